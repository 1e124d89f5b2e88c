"""Failure runs end to end through simulate(): the engine's step_time per state, keys, errors, determinism."""
from __future__ import annotations

import copy

import pytest

from simdist.engine.composite import state_step_time
from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.failures.state import ClusterState
from simdist.io.load import load_data
from simdist.io.overrides import set_path

BASE = {
    "name": "fail",
    "cluster": {
        "nodes": [{"count": 4, "gpu": "a100-sxm4-80gb", "gpus_per_node": 2, "intra_node": "pcie-gen4",
                   "nic": {"bandwidth": "100 Gb/s", "latency": "2 us", "transport": "rdma"}}],
        "fabric": {"topology": "fat_tree", "nodes_per_leaf": 2, "link": {"bandwidth": "100 Gb/s", "latency": "1 us"}},
    },
    "workload": {"model": "resnet50", "batch_per_gpu": 32, "precision": "fp16"},
    "failures": {"recovery": {"policy": "checkpoint_restart", "checkpoint_interval": "1 h",
                              "checkpoint_write": "30 s", "detection": "1 min", "restart": "4 min"}},
    "run": {"duration": "24 h", "warmup": 2},
}
DESIGN_KEYS = {"ratio", "useful_s", "wall_s", "lost_work_s", "checkpoint_s", "restart_s", "downtime_s", "failures",
               "restarts"}


def _scenario(changes: dict | None = None):
    data = copy.deepcopy(BASE)
    for dotted, value in (changes or {}).items():
        set_path(data, dotted.split("."), value)
    return load_data(data)


def _run(changes: dict | None = None, fidelity: str = "estimate"):
    return simulate(_scenario(changes), fidelity=fidelity)


def test_a_scheduled_node_failure_through_the_engine():
    r = _run({"failures.events": [{"at": "150 min", "kind": "node_down", "target": "node:1"}]}).to_dict()
    g = r["goodput"]
    assert DESIGN_KEYS <= set(g)
    assert g["failures"] == 1 and g["restarts"] == 1
    # checkpoints end at 1 h 0.5 min and 2 h 1 min; the failure at 2 h 30 min loses 29 min
    assert g["lost_work_s"] == pytest.approx(29 * 60.0)
    assert g["restart_s"] == pytest.approx(300.0)
    assert g["healthy_iteration_time_s"] == pytest.approx(r["iteration_time_s"])
    parts = g["useful_s"] + g["degraded_s"] + g["lost_work_s"] + g["checkpoint_s"] + g["restart_s"] + g["downtime_s"]
    assert parts == pytest.approx(g["wall_s"])
    assert g["samples_per_s"] == pytest.approx(g["ratio"] * r["throughput"]["samples_per_s"])
    price = _scenario().cluster.node_groups[0].gpu.price_per_hour_usd  # the catalog's A100 80GB price
    assert g["cost_per_sample_usd"] == pytest.approx(8 * price / 3600 / g["samples_per_s"], rel=1e-3)


def test_rack_down_takes_every_node_under_the_leaf_at_once():
    r = _run({"failures.events": [{"at": "2 h", "kind": "rack_down", "target": "switch:leaf1",
                                   "duration": "3 h"}],
              "failures.recovery": {"policy": "elastic"}}).to_dict()
    g = r["goodput"]
    assert g["failures"] == 1 and g["failures_by_kind"] == {"rack_down": 1}
    assert g["restarts"] == 1 and g["rejoins"] == 2  # both nodes of leaf1 come back after 3 h
    assert g["states_simulated"] == 1  # the shrunk cluster without nodes 2 and 3, in one state
    s = _scenario({"failures.recovery": {"policy": "elastic"}})
    from simdist.failures.targets import failure_targets
    from simdist.failures.incidents import scheduled
    from simdist.topology.build import build_topology

    incidents, _ = scheduled(_scenario({"failures.events": [{"at": "2 h", "kind": "rack_down",
                                                             "target": "switch:leaf1"}]}).failures.events,
                             failure_targets(build_topology(s.cluster)), 1800.0)
    assert [i.nodes for i in incidents] == [(2, 3)]


def test_elastic_shrink_raises_per_gpu_work_in_the_engine():
    s = _scenario({"failures.recovery": {"policy": "elastic"}})
    r = simulate(s, fidelity="estimate")
    from simdist.engine.composite import run_goodput  # noqa: F401 - the path simulate took
    from simdist.failures.costs import job_spec
    from simdist.failures.targets import failure_targets
    from simdist.topology.build import build_topology

    job = job_spec(s, 86400.0, 256, 32, 1, failure_targets(build_topology(s.cluster)))
    st = state_step_time(s, s.run.fidelity.__class__("estimate"), job)
    healthy = st(ClusterState())
    shrunk_scenario = st.scenario_for(ClusterState(frozenset({3})), ())
    assert shrunk_scenario.workload.batch_per_gpu == 43  # ceil(256 / 6)
    assert shrunk_scenario.cluster.num_gpus == 6
    assert st(ClusterState(frozenset({3}))) > healthy
    assert healthy == pytest.approx(r.iteration_time_s)
    shrunk = simulate(shrunk_scenario, fidelity="estimate")
    assert shrunk.breakdown_s.compute > 1.2 * r.breakdown_s.compute  # 43 samples per GPU instead of 32


def test_a_straggler_state_is_the_static_straggler_run():
    s = _scenario()
    from simdist.failures.costs import job_spec
    from simdist.failures.targets import failure_targets
    from simdist.topology.build import build_topology

    job = job_spec(s, 86400.0, 256, 32, 1, failure_targets(build_topology(s.cluster)))
    st = state_step_time(s, s.run.fidelity.__class__("estimate"), job)
    slow = st(ClusterState(stragglers=((5, 2.0),)))
    static = _run({"failures": {"events": [{"at": "0 s", "kind": "straggler", "target": "gpu:5", "slowdown": 2.0}]},
                   "run": {"iterations": 6, "warmup": 2}})
    assert static.goodput is None and slow == pytest.approx(static.iteration_time_s)
    # with node 0 out, GPU 5 is GPU 3 of the shrunk cluster
    assert st.key(ClusterState(frozenset({0}), ((5, 2.0),)))[1] == ((3, 2.0),)


def test_a_degraded_link_slows_the_iteration_through_the_capacity_api():
    s = _scenario()
    from simdist.failures.costs import job_spec
    from simdist.failures.targets import failure_targets
    from simdist.scenario import Fidelity
    from simdist.topology.build import build_topology

    facts = failure_targets(build_topology(s.cluster))
    job = job_spec(s, 86400.0, 256, 32, 1, facts)
    link = facts.fabric_links[0]
    u, v = facts.link_ends(link)
    for fidelity in (Fidelity.ESTIMATE, Fidelity.SIMULATE):
        st = state_step_time(s, fidelity, job)
        healthy = st(ClusterState())
        assert st(ClusterState(degraded_links=((u, v, 1.0),))) == pytest.approx(healthy, rel=1e-9)
        assert st(ClusterState(degraded_links=((u, v, 0.05),))) > 1.05 * healthy


def test_the_same_seed_gives_the_same_numbers():
    changes = {"failures.random": {"node_mtbf": "200 h", "distribution": "weibull", "repair_sigma": 1.0},
               "run": {"duration": "7 d", "replicas": 3, "seed": 4}}
    a = _run(changes).to_dict()["goodput"]
    assert a == _run(changes).to_dict()["goodput"]
    changes["run"] = {"duration": "7 d", "replicas": 3, "seed": 5}
    assert _run(changes).to_dict()["goodput"] != a
    assert a["ratio_ci95"][0] <= a["ratio"] <= a["ratio_ci95"][1]


@pytest.mark.parametrize("change, path, words", [
    ({"failures.events": [{"at": "1 h", "kind": "node_down", "target": "node:9"}]}, "failures.events.0.target",
     "0..3"),
    ({"failures.events": [{"at": "1 h", "kind": "link_degrade", "target": "link:leaf0-spine9", "factor": 0.5}]},
     "failures.events.0.target", "no such link"),
    ({"failures.events": [{"at": "1 h", "kind": "rack_down", "target": "switch:leaf7"}]}, "failures.events.0.target",
     "no such switch"),
    ({"failures.events": [{"at": "1 h", "kind": "link_down", "target": "link:leaf0-spine9"}]},
     "failures.events.0.target", "no such link"),
    ({"failures.events": [{"at": "1 h", "kind": "rack_down", "target": "switch:spine0"}]},
     "failures.events.0.target", "use switch_down"),
    ({"failures.events": [{"at": "1 h", "kind": "node_down", "target": "node:1", "slowdown": 2.0}]},
     "failures.events.0.slowdown", "does not use"),
    ({"failures.events": [{"at": "1 h", "kind": "network_jitter"}]}, "failures.events.0.delay", "missing"),
    ({"failures.recovery.spares": 2}, "failures.recovery.spares", "does not use"),
    ({"failures.events": [{"at": "1 h", "kind": "node_down", "target": "node:1", "duration": "1 h"}]},
     "failures.events.0.duration", "changes nothing"),
    ({"failures.recovery.storage_bandwidth": "1 GB/s"}, "failures.recovery.storage_bandwidth", "not both"),
    ({"failures.random": {"weibull_shape": 0.5}}, "failures.random.weibull_shape", "weibull"),
    ({"failures.recovery": {"policy": "replica_groups", "replica_groups": 3}}, "failures.recovery.replica_groups",
     "divisor"),
])
def test_bad_failure_keys_name_the_path(change, path, words):
    with pytest.raises(ScenarioError) as err:
        _scenario(change)
    assert path in [i.path for i in err.value.issues], str(err.value)
    assert words in str(err.value)


def test_failure_runs_need_a_duration():
    with pytest.raises(ScenarioError, match=r"run\.duration"):
        _run({"run": {"iterations": 6, "warmup": 2}, "failures.random": {}})


def test_replicas_need_a_stochastic_element_and_duration_alone_is_a_steady_state_run():
    from simdist.engine.simulation import simulate

    data = copy.deepcopy(BASE)
    del data["failures"]
    data["run"] = {"duration": "1 h", "replicas": 3}
    with pytest.raises(ScenarioError) as err:
        simulate(load_data(data))
    assert {i.path for i in err.value.issues} == {"run.replicas"}
    data["run"] = {"duration": "1 h", "fidelity": "estimate"}  # iterations until that simulated time
    assert simulate(load_data(data)).goodput is None


def test_jitter_enters_through_its_lognormal_mean_and_maintenance_through_the_engine():
    import math

    jitter = {"at": "0 s", "kind": "network_jitter", "delay": "2 ms", "sigma": 1.0}
    r = _run({"failures.events": [jitter]}).to_dict()
    g = r["goodput"]
    step = r["iteration_time_s"]
    mean_delay = 2e-3 * math.exp(0.5)
    computing = g["wall_s"] - g["checkpoint_s"]  # no failures: the rest of the time trains, each step slower
    assert g["degraded_s"] / computing == pytest.approx(1 - step / (step + mean_delay), rel=1e-6)
    m = _run({"failures.maintenance": {"interval": "6 h", "duration": "20 min"}}).to_dict()["goodput"]
    assert m["maintenance"] == 3 and m["downtime_s"] == pytest.approx(3 * 1200.0)
    assert m["lost_work_s"] == 0.0 and m["restart_s"] == pytest.approx(3 * 240.0)


def test_survivors_that_cannot_hold_the_rebalanced_batch_wait_for_the_repair_and_say_why():
    data = copy.deepcopy(BASE)
    data["cluster"]["nodes"][0]["gpu"] = "v100-sxm2-16gb"
    data["workload"]["batch_per_gpu"] = 280  # fits; 6 GPUs would need 374 samples each, which does not
    data["failures"]["recovery"]["policy"] = "elastic"
    data["failures"]["events"] = [{"at": "2 h", "kind": "node_down", "target": "node:1", "duration": "1 h"}]
    g = simulate(load_data(data), fidelity="estimate").goodput.to_dict()
    assert list(g["unrunnable_states"]) == ["1 nodes out"]
    assert "GPU" in next(iter(g["unrunnable_states"].values()))
    assert g["downtime_s"] == pytest.approx(3600.0 - 300.0)  # waiting for the repair after detection + restart


def test_result_folder_has_the_goodput(tmp_path):
    from click.testing import CliRunner

    from simdist.cli import main
    import json
    import yaml

    path = tmp_path / "f.yaml"
    data = copy.deepcopy(BASE)
    data["failures"]["events"] = [{"at": "2 h", "kind": "gpu_down", "target": "gpu:3"}]
    path.write_text(yaml.safe_dump(data))
    res = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert "goodput ratio" in res.output and "Young/Daly interval" in res.output
    assert json.loads((tmp_path / "out" / "result.json").read_text())["goodput"]["failures"] == 1
