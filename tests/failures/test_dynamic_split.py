"""batch_split dynamic in the goodput timeline: after a straggler appears (or goes) the split lags for
rebalance_every iterations at the old split's step time, then the batch is re-split from the observed
step times, so the straggler gets less work."""
from __future__ import annotations

from dataclasses import replace

import pytest

from simdist.engine.simulation import simulate
from simdist.failures.incidents import Slowdown
from simdist.failures.state import ClusterState, Costs
from simdist.failures.timeline import run_timeline
from simdist.scenario import RecoveryPolicy
from tests.failures.helpers import budget, job
from tests.failures.test_engine_goodput import _scenario

HOUR = 3600.0
COSTS = Costs(interval_s=1e9, write_s=0.0)  # no checkpoints: only the step times matter


def _step_time(state: ClusterState) -> float:
    """Hand-made step times: healthy 1 s; gpu 3 at 2x slower: 2 s with a split that ignores it, 1.25 s
    with a split balanced for it; the balanced split without the straggler: 1.1 s."""
    slow = dict(state.stragglers)
    balanced = dict(state.balanced_for or ())
    if not slow:
        return 1.1 if balanced else 1.0
    return 1.25 if balanced == slow else 2.0


@pytest.mark.parametrize("k", [50, 200])
def test_dynamic_split_beats_the_equal_split_by_the_hand_computed_amount(k):
    d = 10 * HOUR
    fixed = job(duration_s=d)
    dynamic = replace(fixed, rebalance_every=k)
    strag = [Slowdown(2 * HOUR, 6 * HOUR, "straggler", stragglers=((3, 2.0),))]
    eq = run_timeline(fixed, RecoveryPolicy.CHECKPOINT_RESTART, COSTS, _step_time, [], strag)
    dyn = run_timeline(dynamic, RecoveryPolicy.CHECKPOINT_RESTART, COSTS, _step_time, [], strag)
    # equal: 4 h at half speed = 2 h of healthy work lost to slower iterations
    assert eq.degraded_s == pytest.approx(2 * HOUR)
    # dynamic: k iterations at 2 s (half speed), then the rest of the 4 h at 1.25 s (80 % speed); when the
    # straggler goes, k iterations at 1.1 s (91 %) with the split still balanced for it, then healthy again
    lag_on, lag_off = k * 2.0, k * 1.1
    expected = lag_on * 0.5 + (4 * HOUR - lag_on) * (1 - 1 / 1.25) + lag_off * (1 - 1 / 1.1)
    assert dyn.degraded_s == pytest.approx(expected, rel=1e-12)
    assert dyn.rebalances == 2 and budget(dyn) == pytest.approx(d)
    assert dyn.useful_s - eq.useful_s == pytest.approx(2 * HOUR - expected, rel=1e-12)


def test_a_change_undone_before_the_re_split_needs_no_re_split():
    dynamic = replace(job(duration_s=10 * HOUR), rebalance_every=1000)  # 2000 s lag at 2 s per step
    strag = [Slowdown(HOUR, HOUR + 600.0, "straggler", stragglers=((3, 2.0),))]
    t = run_timeline(dynamic, RecoveryPolicy.CHECKPOINT_RESTART, COSTS, _step_time, [], strag)
    assert t.rebalances == 0 and t.degraded_s == pytest.approx(600.0 * 0.5)


def test_dynamic_split_through_the_engine_gives_the_straggler_less_work():
    base = {"failures.events": [{"at": "2 h", "kind": "straggler", "target": "gpu:1", "slowdown": 2.0,
                                 "duration": "6 h"}], "workload.batch_per_gpu": 16}
    eq = simulate(_scenario(base)).goodput.to_dict()
    dyn = simulate(_scenario({**base, "training.batch_split": "dynamic", "training.rebalance_every": 20})).goodput.to_dict()
    assert dyn["rebalances"] == 2 and dyn["rebalance_every"] == 20
    assert dyn["healthy_iteration_time_s"] == pytest.approx(eq["healthy_iteration_time_s"], rel=1e-12)
    assert dyn["degraded_s"] < eq["degraded_s"] and dyn["ratio"] > eq["ratio"]


def test_dynamic_split_through_the_engine_matches_the_hand_combination():
    from simdist.engine.composite import state_step_time
    from simdist.failures.costs import job_spec
    from simdist.failures.targets import failure_targets
    from simdist.scenario import Fidelity
    from simdist.topology.build import build_topology

    k = 20
    s = _scenario({"failures.events": [{"at": "2 h", "kind": "straggler", "target": "gpu:1", "slowdown": 2.0,
                                        "duration": "6 h"}], "workload.batch_per_gpu": 16,
                   "training.batch_split": "dynamic", "training.rebalance_every": k})
    g = simulate(s).goodput.to_dict()
    step = state_step_time(s, Fidelity.ESTIMATE, job_spec(s, 86400.0, 128, 16, 1, failure_targets(build_topology(s.cluster))))
    slow = ((1, 2.0),)
    t0 = step(ClusterState(balanced_for=()))
    lag_on, bal, lag_off = (step(ClusterState(stragglers=slow, balanced_for=())),
                            step(ClusterState(stragglers=slow, balanced_for=slow)), step(ClusterState(balanced_for=slow)))
    assert lag_on > bal > t0 and lag_off > t0  # the balanced split is slower on the healthy cluster
    # the 6 h window holds six 30 s checkpoint writes (one per hour of compute), which run no iterations
    expected = (k * lag_on * (1 - t0 / lag_on) + (6 * HOUR - 6 * 30.0 - k * lag_on) * (1 - t0 / bal)
                + k * lag_off * (1 - t0 / lag_off))
    assert g["degraded_s"] == pytest.approx(expected, rel=1e-9)
