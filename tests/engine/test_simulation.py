"""The Simulation's own state and the run keys: seed, replicas, duration; stragglers as rank classes."""
from __future__ import annotations

import copy
import json

import pytest

from simdist.errors import ScenarioError
from simdist.results.writers import chrome_trace, result_json
from tests.strategies.scenario_runner import run_with

BASE = {
    "name": "sim",
    "cluster": {"nodes": [{"count": 8, "gpu": "v100-sxm2-32gb", "gpus_per_node": 1, "intra_node": "pcie-gen3",
                           "nic": {"bandwidth": "25 Gb/s", "latency": "10 us", "transport": "tcp"}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": "resnet50", "batch_per_gpu": 32, "precision": "fp16"},
    "communication": {"strategy": "ps", "ps": {"servers": 2, "placement": "dedicated"}},
    "run": {"iterations": 6, "warmup": 2},
}
STRAGGLER = {"events": [{"at": "0 s", "kind": "straggler", "target": "gpu:3", "slowdown": 2.0}]}


def test_same_seed_gives_byte_identical_json_and_the_seed_alone_changes_nothing():
    a = result_json(run_with(BASE, {"run.seed": 7}))
    assert a == result_json(run_with(BASE, {"run.seed": 7}))
    # no stochastic element in the scenario: the seed has nothing to draw for
    assert json.loads(a) == json.loads(result_json(run_with(BASE, {"run.seed": 8})))
    asp = {"training.sync": "asp", "failures": STRAGGLER, "run.seed": 3}
    assert result_json(run_with(BASE, asp)) == result_json(run_with(BASE, asp))


def test_replicas_need_a_stochastic_element():
    with pytest.raises(ScenarioError, match=r"run\.replicas.*stochastic") as err:
        run_with(BASE, {"run.replicas": 3})
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("fidelity", ["simulate", "estimate"])
def test_duration_runs_iterations_until_that_simulated_time(fidelity):
    one = run_with(BASE, None, fidelity)
    data = copy.deepcopy(BASE)
    data["run"] = {"duration": "10 s", "warmup": 2}
    r = run_with(data, None, fidelity).to_dict()
    n = r["simulated_iterations"] + r["inferred_iterations"]
    expected = -(-10.0 // one.iteration_time_s)
    assert n == expected
    assert r["iteration_time_s"] == pytest.approx(one.iteration_time_s, rel=1e-9)
    if fidelity == "simulate":
        assert r["simulated_iterations"] == 2 and r["inferred_iterations"] == n - 2


def test_a_straggler_is_its_own_class_and_slows_bsp_to_its_pace_while_asp_keeps_the_others():
    quiet = {"cluster.nodes.0.gpu": {"base": "v100-sxm2-32gb", "comm_interference": 0}}  # idle = extra compute exactly
    bsp = run_with(BASE, {"failures": STRAGGLER, **quiet}).to_dict()
    plain = run_with(BASE, quiet).to_dict()
    assert bsp["strategy"]["rank_classes"] == 2 and plain["strategy"]["rank_classes"] == 1
    nominal = plain["node_groups"][0]["step_s"]
    # everyone runs at the straggler's pace, and the nominal ranks idle for the straggler's extra compute
    rates = bsp["sync"]["per_worker_samples_per_s"]
    assert rates == [rates[3]] * 8 and bsp["iteration_time_s"] >= 2 * nominal
    assert bsp["node_groups"][0]["idle_s"] == pytest.approx(nominal, rel=1e-6)
    fast = {"training.sync": "asp", "cluster.nodes.0.nic.bandwidth": "200 Gb/s",  # compute-bound workers
            "cluster.nodes.0.nic.transport": "rdma"}
    asp = run_with(BASE, {**fast, "failures": STRAGGLER}).to_dict()["sync"]
    asp_plain = run_with(BASE, fast).to_dict()["sync"]
    others = [r for w, r in enumerate(asp["per_worker_samples_per_s"]) if w != 3]
    assert min(others) >= 0.97 * min(asp_plain["per_worker_samples_per_s"])
    assert asp["per_worker_samples_per_s"][3] < 0.95 * min(others)


def test_trace_has_each_class_representative_and_the_first_64_ranks():
    data = copy.deepcopy(BASE)
    data["cluster"]["nodes"][0]["count"] = 80
    data["communication"] = {"strategy": "ring"}
    data["run"] = {"iterations": 3, "warmup": 1}
    straggler = {"events": [{"at": "0 s", "kind": "straggler", "target": "gpu:70", "slowdown": 1.5}]}
    r = run_with(data, {"failures": straggler})
    trace = json.loads(chrome_trace(r))
    tracks = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert {f"gpu:{i}" for i in range(64)} | {"gpu:70", "comm:70"} <= tracks
    assert "gpu:65" not in tracks and any(t.startswith("link:") for t in tracks)
    names = {e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"}
    assert "forward" in names and "optimizer" in names
    assert any(n.startswith("bucket0 all_reduce") and n.endswith("(dp)") for n in names)
    assert any(n.startswith("backward ") and "(bucket0 ready)" in n for n in names)


def test_estimate_reuses_a_built_cluster_only_when_it_fits():
    from simdist.engine.context import build_context
    from simdist.engine.state import Simulation
    from simdist.engine.composite import run_training
    from simdist.io.load import load_data
    from simdist.scenario import Fidelity

    scenario = load_data(copy.deepcopy(BASE))
    ctx = build_context(scenario, Fidelity.ESTIMATE)
    fresh = run_training(scenario, Fidelity.ESTIMATE)
    assert result_json(run_training(scenario, Fidelity.ESTIMATE, context=ctx)) == result_json(fresh)
    assert Simulation(scenario, Fidelity.ESTIMATE, ctx).context is ctx
    other = copy.deepcopy(BASE)
    other["communication"] = {"strategy": "ring"}
    ring = load_data(other)
    assert Simulation(ring, Fidelity.ESTIMATE, ctx).context is not ctx  # other strategy: built anew
    assert result_json(run_training(ring, Fidelity.ESTIMATE, context=ctx)) == result_json(
        run_training(ring, Fidelity.ESTIMATE))


def test_asynchronous_workers_run_until_the_duration_too():
    asp = {"training.sync": "asp"}
    by_count = run_with(BASE, asp).to_dict()
    data = copy.deepcopy(BASE)
    data["run"] = {"duration": "3 s", "warmup": 2}
    r = run_with(data, asp).to_dict()
    per_worker = by_count["iteration_time_s"]  # = every worker's own iteration time at equal speeds
    assert r["simulated_iterations"] == -(-3.0 // per_worker) and r["inferred_iterations"] == 0
    assert r["iteration_time_s"] == pytest.approx(by_count["iteration_time_s"], rel=0.02)


@pytest.mark.parametrize("changes", [
    {"training.sync": "asp", "failures": STRAGGLER},
    {"training.sync": "ssp", "training.staleness": 1, "failures": STRAGGLER},
    {"training.sync": "ssp", "training.staleness": 0, "failures": STRAGGLER},
    {"training.sync": "asp", "communication.ps": {"servers": 3, "placement": "colocated"}},
])
def test_estimate_runs_identical_async_workers_as_one_class_with_the_same_result(changes, monkeypatch):
    import simdist.strategies.async_ps as async_ps

    grouped = run_with(BASE, changes, "estimate").to_dict()
    each = async_ps.worker_graphs
    monkeypatch.setattr(async_ps, "worker_graphs", lambda *a, grouped=False: each(*a, grouped=False))
    alone = run_with(BASE, changes, "estimate").to_dict()
    assert grouped["strategy"] == alone["strategy"]
    assert json.dumps(grouped, sort_keys=True) == json.dumps(alone, sort_keys=True) or (
        grouped["sync"]["staleness"] == alone["sync"]["staleness"]
        and grouped["iteration_time_s"] == pytest.approx(alone["iteration_time_s"], rel=1e-12))
