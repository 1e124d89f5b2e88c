"""The goodput timeline on hand-worked cases: rollback, recovery policies, checkpoints, maintenance."""
from __future__ import annotations

import math

import pytest

from simdist.failures.incidents import Incident, Slowdown
from simdist.failures.state import Costs
from simdist.failures.timeline import run_timeline
from tests.failures.helpers import budget, compute_bound, job

COSTS = Costs(interval_s=3600.0, write_s=60.0, detection_s=60.0, restart_s=300.0)


def test_node_failure_loses_the_work_since_the_last_checkpoint_plus_detection_and_restart():
    # checkpoints end at 3660 and 7320 (1 h of compute + 60 s write each); the node fails at 9000:
    # 9000 - 7320 = 1680 s of work is rolled back, then 60 s detection + 300 s restart.
    j = job(duration_s=36000.0)
    t = run_timeline(j, "checkpoint_restart", COSTS, lambda s: 1.0, [Incident(9000.0, "node", (1,))])
    assert t.lost_work_s == pytest.approx(1680.0)
    assert t.restart_s == pytest.approx(360.0)
    assert (t.failures, t.restarts) == (1, 1)
    # 36000 s: 9000 + 360 s before restarting, then 26640 s of compute+checkpoint cycles from 9360
    first = 2 + 0  # checkpoints before the failure
    after = math.floor(26640.0 / 3660.0)
    assert t.checkpoints == first + after
    assert t.checkpoint_s == pytest.approx(60.0 * (first + after))
    assert t.useful_s == pytest.approx(36000.0 - 1680.0 - 360.0 - t.checkpoint_s)
    assert budget(t) == pytest.approx(36000.0)


def test_failure_during_a_checkpoint_write_loses_the_interval_and_counts_the_write_started():
    t = run_timeline(job(duration_s=7200.0), "checkpoint_restart", COSTS, lambda s: 1.0,
                     [Incident(3630.0, "node", (0,))])
    assert t.lost_work_s == pytest.approx(3600.0)  # the checkpoint being written never committed
    assert t.checkpoint_s == pytest.approx(30.0)
    assert budget(t) == pytest.approx(7200.0)


def test_failure_during_recovery_restarts_the_recovery():
    t = run_timeline(job(), "checkpoint_restart", COSTS, lambda s: 1.0,
                     [Incident(1000.0, "node", (0,)), Incident(1100.0, "gpu", (2,))])
    assert t.restart_s == pytest.approx(100.0 + 360.0)
    assert t.lost_work_s == pytest.approx(1000.0)
    assert t.failures_by_kind == {"node": 1, "gpu": 1}


def test_async_checkpoint_blocks_for_the_snapshot_only_and_commits_after_the_write():
    costs = Costs(interval_s=3600.0, write_s=2.0, persist_s=600.0, detection_s=60.0, restart_s=300.0)
    # snapshot at 3600..3602 commits at 4202; a failure at 4000 rolls back to 0
    t = run_timeline(job(duration_s=8000.0), "checkpoint_restart", costs, lambda s: 1.0,
                     [Incident(4000.0, "node", (0,))])
    assert t.lost_work_s == pytest.approx(3600.0 + 398.0)
    # a failure after the write committed loses only the work since the snapshot
    t = run_timeline(job(duration_s=8000.0), "checkpoint_restart", costs, lambda s: 1.0,
                     [Incident(4300.0, "node", (0,))])
    assert t.lost_work_s == pytest.approx(4300.0 - 3602.0)
    assert t.checkpoint_s == pytest.approx(2.0 * t.checkpoints)


def test_elastic_shrink_raises_per_gpu_work_and_keeps_going_until_the_node_rejoins():
    j = job(nodes=4, duration_s=20000.0)
    step = compute_bound(j)
    t = run_timeline(j, "elastic", COSTS, step, [Incident(5000.0, "node", (3,), repair_s=7200.0)])
    assert t.lost_work_s == pytest.approx(0.0)  # data-parallel survivors hold the model: no rollback
    assert t.restart_s == pytest.approx(360.0 + 300.0)  # re-form on 3 nodes, re-form on 4 after repair
    # 3 of 4 nodes carry the whole batch from 5360 until the repair at 12200: 4/3 per-GPU work
    assert t.degraded_s == pytest.approx((12200.0 - 5360.0 - 60.0 * 2) * (1 - 3 / 4), rel=1e-6)
    assert t.rejoins == 1 and budget(t) == pytest.approx(20000.0)


def test_elastic_waits_when_the_survivors_cannot_train():
    j = job(nodes=2, duration_s=20000.0)
    step = compute_bound(j)

    def step_time(state):  # one node cannot hold the batch
        return math.inf if state.nodes_out else step(state)
    t = run_timeline(j, "elastic", COSTS, step_time, [Incident(5000.0, "node", (1,), repair_s=3600.0)])
    assert t.downtime_s == pytest.approx(3600.0 - 360.0)
    assert t.degraded_s == pytest.approx(0.0)


def test_replica_groups_keep_the_other_groups_committing_while_one_restarts():
    j = job(nodes=4, duration_s=20000.0, groups=4)
    costs = Costs(interval_s=3600.0, write_s=60.0, detection_s=60.0, restart_s=300.0, weight_copy_s=100.0)
    t = run_timeline(j, "replica_groups", costs, lambda s: 1.0, [Incident(5000.0, "node", (2,))])
    assert t.restart_s == 0.0 and t.downtime_s == 0.0  # the job never stopped
    assert t.group_out_s == pytest.approx(460.0)  # detection + restart + weight copy of one group
    assert t.degraded_s == pytest.approx(460.0 / 4)  # 3 of 4 groups committed their steps meanwhile
    assert t.lost_work_s == pytest.approx(0.0)
    assert t.rejoins == 1 and budget(t) == pytest.approx(20000.0)
    # the same failure under checkpoint_restart stops everyone and rolls back
    c = run_timeline(j, "checkpoint_restart", costs, lambda s: 1.0, [Incident(5000.0, "node", (2,))])
    assert c.useful_s < t.useful_s - 1000.0


def test_spares_swap_in_fast_until_the_pool_is_empty():
    costs = Costs(interval_s=3600.0, write_s=60.0, detection_s=60.0, restart_s=600.0, spares=1, spare_delay_s=30.0)
    incidents = [Incident(1000.0, "node", (0,), repair_s=50000.0), Incident(5000.0, "node", (1,), repair_s=50000.0)]
    t = run_timeline(job(duration_s=20000.0), "spares", costs, lambda s: 1.0, incidents)
    assert t.restart_s == pytest.approx((60.0 + 30.0) + (60.0 + 600.0))  # the second finds no spare
    incidents = [Incident(1000.0, "node", (0,), repair_s=100.0), Incident(5000.0, "node", (1,), repair_s=100.0)]
    t = run_timeline(job(duration_s=20000.0), "spares", costs, lambda s: 1.0, incidents)
    assert t.restart_s == pytest.approx(2 * (60.0 + 30.0))  # the repaired node refilled the pool


def test_in_memory_restores_from_the_peer_unless_the_peer_failed_too():
    costs = Costs(interval_s=600.0, write_s=100.0, detection_s=60.0, restart_s=120.0, memory_copy_s=5.0,
                  restore_s=5.0, persistent_interval_s=3000.0, load_s=100.0)
    j = job(nodes=4, duration_s=20000.0)
    # persistent checkpoint after 3000 s compute; memory copies every 600 s; node 1 fails at 2000 s
    single = run_timeline(j, "in_memory", costs, lambda s: 1.0, [Incident(2000.0, "node", (1,))])
    # compute 600, copy 5 -> 605, 1210, 1815; work since the copy ending at 1815: 185 s
    assert single.lost_work_s == pytest.approx(185.0)
    assert single.restart_s == pytest.approx(60.0 + 120.0 + 5.0)
    both = run_timeline(j, "in_memory", costs, lambda s: 1.0, [Incident(2000.0, "rack", (1, 2))])
    assert both.correlated == 1
    assert both.lost_work_s == pytest.approx(2000.0 - 15.0)  # back to the start: no persistent copy yet
    assert both.restart_s == pytest.approx(60.0 + 120.0 + 100.0)


def test_maintenance_saves_first_so_no_work_is_lost():
    t = run_timeline(job(duration_s=20000.0), "checkpoint_restart", COSTS, lambda s: 1.0, [],
                     maintenance=[(5000.0, 900.0)])
    assert t.lost_work_s == 0.0 and t.maintenance == 1
    assert t.downtime_s == pytest.approx(900.0)
    assert t.restart_s == pytest.approx(300.0)  # no detection for a planned stop


def test_a_straggler_for_a_while_slows_only_that_window():
    j = job(duration_s=10000.0)

    def step_time(state):
        return max([1.0] + [x for _, x in state.stragglers])
    s = Slowdown(2000.0, 3000.0, "straggler", stragglers=((5, 2.0),))
    t = run_timeline(j, "checkpoint_restart", Costs(interval_s=1e9, write_s=0.0), step_time, [], [s])
    assert t.degraded_s == pytest.approx(500.0)
    jitter = Slowdown(0.0, math.inf, "network_jitter", delay_s=0.25)
    t = run_timeline(j, "checkpoint_restart", Costs(interval_s=1e9, write_s=0.0), lambda s: 1.0, [], [jitter])
    assert t.useful_s == pytest.approx(10000.0 / 1.25)


def test_recorded_segments_cover_the_run_and_mark_the_failure():
    t = run_timeline(job(duration_s=36000.0), "checkpoint_restart", COSTS, lambda s: 1.0,
                     [Incident(9000.0, "node", (1,))], record=True)
    spans = [s for s in t.segments if s[2] > s[1]]
    assert spans[0][1] == 0.0 and spans[-1][2] == pytest.approx(36000.0)
    assert all(a[2] == pytest.approx(b[1]) for a, b in zip(spans, spans[1:]))  # no gaps
    assert ("failure: node 1", 9000.0, 9000.0) in t.segments
    assert ("restart", 9000.0, 9360.0) in t.segments
    assert run_timeline(job(), "checkpoint_restart", COSTS, lambda s: 1.0, []).segments == []


@pytest.mark.parametrize("policy", ["checkpoint_restart", "in_memory", "elastic", "spares", "replica_groups"])
def test_the_time_budget_adds_up_under_random_failures_for_every_policy(policy):
    """Property: whatever happens, useful + degraded + lost + checkpoint + restart + downtime = wall."""
    import numpy as np

    from simdist.failures.incidents import sample_random
    from simdist.scenario import FailureDistribution, RandomFailuresSpec
    from tests.failures.helpers import facts

    f = facts(8, leaves=2)
    spec = RandomFailuresSpec(node_mtbf_s=40 * 3600.0, switch_mtbf_s=400 * 3600.0, repair_s=3 * 3600.0,
                              repair_sigma=1.0, distribution=FailureDistribution.WEIBULL)
    costs = Costs(interval_s=1800.0, write_s=40.0, persist_s=0.0, detection_s=60.0, restart_s=300.0,
                  memory_copy_s=3.0, restore_s=3.0, persistent_interval_s=7200.0, load_s=40.0, spares=1,
                  spare_delay_s=30.0, weight_copy_s=20.0)
    j = job(nodes=8, duration_s=30 * 86400.0, groups=4)
    for seed in range(5):
        incs = sample_random(spec, f, j.duration_s, np.random.default_rng(seed))
        slow = [Slowdown(86400.0, 2 * 86400.0, "straggler", stragglers=((3, 1.5),))]
        t = run_timeline(j, policy, costs, compute_bound(j), incs, slow,
                         maintenance=[(d * 86400.0, 600.0) for d in range(1, 30)])
        assert t.failures == len(incs)
        assert budget(t) == pytest.approx(j.duration_s, rel=1e-9)
        for part in (t.useful_s, t.lost_work_s, t.checkpoint_s, t.restart_s, t.downtime_s):
            assert part >= -1e-6
        assert 0.5 < t.useful_s / j.duration_s < 1.0
