"""link_down and spine switch_down: the fabric reroutes and the job runs on at the rerouted speed, or a
partition cuts nodes off and the job recovers as after a node failure."""
from __future__ import annotations

import numpy as np
import pytest

from simdist.engine.composite import state_step_time
from simdist.failures.costs import job_spec
from simdist.failures.targets import failure_targets
from simdist.failures.incidents import sample_random
from simdist.failures.state import ClusterState
from simdist.scenario import Fidelity, RandomFailuresSpec
from simdist.strategies.plan import build_plan
from simdist.topology.build import build_topology
from tests.failures.test_engine_goodput import _run, _scenario

# 4 nodes x 2 GPUs, 2 per leaf, 2 spines, every link 100 Gb/s (efficiency 0.92); halving-doubling over 8
# GPUs: the distance-4 steps (reduce-scatter's first, all-gather's last, S/2 bytes each) cross the leaves.
COMM = {"workload.batch_per_gpu": 1, "communication.strategy": "halving_doubling"}


def _step(state: ClusterState, fidelity: Fidelity, changes: dict = COMM) -> float:
    s = _scenario(changes)
    facts = failure_targets(build_topology(s.cluster))
    return state_step_time(s, fidelity, job_spec(s, 86400.0, 8, 1, 1, facts))(state)


def _dead(*edges):
    return ClusterState(degraded_links=tuple(sorted((u, v, 0.0) for u, v in edges)))


@pytest.mark.parametrize("fidelity", [Fidelity.ESTIMATE, Fidelity.SIMULATE])
def test_a_dead_spine_link_reroutes_at_the_hand_calculated_bandwidth(fidelity):
    s = _scenario(COMM)
    grad_bytes = sum(b.bucket.size_bytes(4) for b in build_plan(s).buckets)  # fp32 gradients
    healthy = _step(ClusterState(), fidelity)
    link = _step(_dead(("leaf0", "spine0")), fidelity)
    # healthy: leaf0's 4 cross-leaf flows (2 GPUs x 2 nodes) share 2 NICs and 2 uplinks, 2 per 100 Gb/s;
    # with leaf0-spine0 dead all 4 share one uplink: 1/4 of 100 Gb/s instead of 1/2, for S bytes per GPU
    rate = 12.5e9 * 0.92
    assert link - healthy == pytest.approx(grad_bytes * (4 - 2) / rate, rel=1e-3)
    # a spine switch down leaves every leaf one uplink: the same as building the 2:1 fabric with one spine
    spine = _step(_dead(("leaf0", "spine0"), ("leaf1", "spine0")), fidelity)
    one_spine = _step(ClusterState(), fidelity, {**COMM, "cluster.fabric.oversubscription": 2.0})
    assert spine == pytest.approx(one_spine, rel=1e-9) and spine == pytest.approx(link, rel=1e-9)


def test_link_down_event_continues_without_a_restart():
    day = 86400.0
    r = _run({**COMM, "failures.events": [{"at": "2 h", "kind": "link_down", "target": "link:leaf0-spine0",
                                           "duration": "6 h"}]}).to_dict()["goodput"]
    assert r["failures"] == 1 and r["restarts"] == 0 and r["lost_work_s"] == 0
    healthy = _step(ClusterState(), Fidelity.ESTIMATE)
    slow = _step(_dead(("leaf0", "spine0")), Fidelity.ESTIMATE)
    # 6 h at healthy/slow of the speed, less the 6 checkpoint writes of 30 s that fall in the window
    # (2 h 0.5 min, 3 h 1 min, ..., 7 h 3 min), which are not training
    assert r["degraded_s"] == pytest.approx((6 * 3600 - 6 * 30) * (1 - healthy / slow), rel=1e-9)
    assert r["useful_s"] + r["degraded_s"] + r["checkpoint_s"] == pytest.approx(day)
    assert r["states_simulated"] == 1


def test_leaf_switch_down_takes_its_rack_a_spine_switch_down_reroutes():
    leaf = _run({**COMM, "failures.events": [{"at": "150 min", "kind": "switch_down",
                                              "target": "switch:leaf1"}]}).to_dict()["goodput"]
    spine = _run({**COMM, "failures.events": [{"at": "150 min", "kind": "switch_down", "target": "switch:spine1",
                                               "duration": "2 h"}]}).to_dict()["goodput"]
    assert leaf["restarts"] == 1 and leaf["lost_work_s"] == pytest.approx(29 * 60.0)
    assert spine["restarts"] == 0 and spine["lost_work_s"] == 0 and spine["degraded_s"] > 0
    assert spine["failures_by_kind"] == {"switch_down": 1}


def test_a_partition_stops_the_job_and_recovers():
    events = [{"at": "150 min", "kind": "switch_down", "target": "switch:spine0", "duration": "10 h"},
              {"at": "150 min", "kind": "switch_down", "target": "switch:spine1", "duration": "10 h"}]
    # the first spine reroutes; the second cuts leaf1's rack (nodes 2, 3) off: a restart, 29 min rolled back
    g = _run({**COMM, "failures.events": events}).to_dict()["goodput"]
    assert g["failures"] == 2 and g["restarts"] == 1 and g["lost_work_s"] == pytest.approx(29 * 60.0)
    s = _scenario(COMM)
    facts = failure_targets(build_topology(s.cluster))
    assert facts.cut_off(facts.switch_edges("spine0") + facts.switch_edges("spine1")) == (2, 3)
    assert facts.cut_off((("node0/nic0", "leaf0"),)) == (0,)
    assert facts.cut_off(facts.switch_edges("spine0")) == ()
    # elastic: the cut-off rack is out (the job shrinks) until the links come back
    e = _run({**COMM, "failures.events": events, "failures.recovery": {"policy": "elastic"}}).to_dict()["goodput"]
    assert e["restarts"] == 1 and e["rejoins"] == 2 and e["lost_work_s"] < 60


def test_random_fabric_faults_reroute_instead_of_aborting():
    s = _scenario(COMM)
    facts = failure_targets(build_topology(s.cluster))
    spec = RandomFailuresSpec(link_mtbf_s=50 * 3600.0, switch_mtbf_s=50 * 3600.0)
    incs = sample_random(spec, facts, 500 * 3600.0, np.random.default_rng(1))
    links = [i for i in incs if i.kind == "link"]
    spines = [i for i in incs if i.kind == "switch" and i.links]  # spine0, spine1
    assert links and all(i.nodes == () and len(i.links) == 1 for i in links)
    assert spines and all(i.nodes == () and len(i.links) == 2 for i in spines)
    assert all(len(i.nodes) == 2 and not i.links for i in incs if i.kind == "switch" and not i.links)
    g = _run({**COMM, "failures.random": {"link_mtbf": "20 h"}, "failures.events": []}).to_dict()["goodput"]
    # most faults reroute; only two overlapping ones that leave a leaf no uplink cut a rack off (a restart)
    assert g["failures"] == 6 and g["restarts"] == 1 and g["degraded_s"] > 0


def test_async_modes_abort_on_random_fabric_faults_and_say_so():
    g = _run({**COMM, "training.sync": "local_sgd", "failures.random": {"link_mtbf": "20 h"}}).to_dict()["goodput"]
    assert g["fabric_faults"].startswith("abort") and g["restarts"] == g["failures"] == 6
    with pytest.raises(Exception, match="training.sync"):
        _run({**COMM, "training.sync": "local_sgd", "failures.events": [
            {"at": "2 h", "kind": "link_down", "target": "link:leaf0-spine0"}]})
