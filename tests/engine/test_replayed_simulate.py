"""`simulate` of a model-parallel plan (engine/training._model_parallel): where no two calls that share a link are in
flight at once, the fold's iteration replayed onto the flow network; where some may be, those on the flow network
and the others in their time alone, replayed. Either way the same result as every call on the flow network, field
by field (1e-9), its links and trace included."""
from __future__ import annotations

import copy
import math

import pytest

from simdist.engine import training
from simdist.graph.spans import network_calls
import simdist.network.replay as call_replay
from simdist.engine.outcomes import model_parallel_result
from simdist.engine.plans import build
from simdist.engine.simulation import simulate
from simdist.io.load import load_data, load_scenario
from simdist.io.overrides import set_path
from simdist.scenario import Fidelity

NIC = {"bandwidth": "200 Gb/s", "latency": "2 us", "transport": "rdma", "count": 8}
BASE = {
    "name": "mp",
    "cluster": {"nodes": [{"count": 4, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                           "nic": NIC}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": {"gpt": {"layers": 8, "hidden": 2048, "heads": 16, "vocab": 32000}}, "seq_len": 2048,
                 "global_batch": 32, "precision": "bf16"},
    "training": {"parallelism": {"tp": 8, "pp": 2, "dp": 2}, "micro_batch": 1},
    "communication": {"overlap": False},
    "run": {"iterations": 3, "warmup": 1, "fidelity": "simulate"},
}
ALONE = {  # no two calls that share a link in flight at once
    "1f1b": {},
    "interleaved": {"training.schedule": "interleaved", "training.virtual_stages": 2},
    "context parallel": {"training.parallelism": {"tp": 4, "pp": 2, "dp": 2, "cp": 2},
                         "workload.flash_attention": True},
    "ZeRO-1": {"training.parallelism.zero": 1},
}


def _scenario(changes: dict):
    data = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        set_path(data, dotted.split("."), value)
    return load_data(data)


def _result(scenario, full: bool = False):
    """(Ran, RunResult) of simulate as it runs, or (`full`) with every call on the flow network."""
    plan, sim = build(scenario, Fidelity.SIMULATE)
    ran = training._with_links(sim.context, training.execute(sim, plan)) if full else training.run_lockstep(sim, plan)
    return ran, model_parallel_result(scenario, Fidelity.SIMULATE, plan, ran)


def _same(a, b, path=""):
    """Field-by-field equality of two JSON values (numbers to 1e-9); the differing paths."""
    if isinstance(a, dict):
        return [d for k in a.keys() | b.keys() for d in _same(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _same(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, (int, float)):
        return [] if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15) else [f"{path}: {a} vs {b}"]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def _equal(scenario, method: str) -> None:
    ran, result = _result(scenario)
    full, by_flows = _result(scenario, full=True)
    a, b = result.to_dict(), by_flows.to_dict()
    assert (a.pop("iteration_by"), b.pop("iteration_by")) == (method, "executor")
    simulated = (a.pop("simulated_iterations"), a.pop("inferred_iterations"))
    assert simulated == ((1, 2) if method == "fold_replayed" else (b["simulated_iterations"], b["inferred_iterations"]))
    b.pop("simulated_iterations"), b.pop("inferred_iterations")
    assert not _same(a, b)
    last = ran.iteration_s * simulated[0] * (1 + 1e-12)
    want = [r for r in full.records if r.iteration < simulated[0] and (r.iteration >= 0 or r.end_s <= last)]
    key = lambda r: (r.track, r.start_s, r.name)  # noqa: E731
    assert len(ran.records) == len(want)
    for x, y in zip(sorted(ran.records, key=key), sorted(want, key=key)):
        assert (x.track, x.name, x.iteration) == (y.track, y.name, y.iteration)
        assert x.start_s == pytest.approx(y.start_s, rel=1e-9, abs=1e-15)
        assert x.end_s == pytest.approx(y.end_s, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("name", list(ALONE))
def test_replayed_equals_every_call_on_the_flow_network(name):
    _equal(_scenario(ALONE[name]), "fold_replayed")


def test_contending_calls_on_the_flow_network_and_the_others_alone_equal_every_call_on_it():
    """dp buckets reduced during the backward (overlap) share the NICs with the pipeline's sends: those run on the
    flow network, the tp calls on the NVSwitch in their time alone."""
    _equal(_scenario({"communication.overlap": True}), "partly_alone")


def test_without_overlap_the_gradients_wait_for_the_last_pipeline_send():
    """Megatron-Core reduces the gradients after its schedule returns, which waits for every p2p request: stage 1's
    all_reduce starts when its last send of gradients to stage 0 ends."""
    scenario = _scenario({})
    plan, sim = build(scenario, Fidelity.SIMULATE)
    ran = training.run_lockstep(sim, plan)
    graph = plan.graphs[1]
    spans = ran.spans[graph.rank_class.index]
    sends = [t for t in graph.tasks if "send gradients" in t.name]
    reduce = next(t for t in graph.tasks if "all_reduce (dp.s1)" in t.name)
    assert spans[reduce.id][0] == pytest.approx(spans[sends[-1].id][1], rel=1e-12)
    last_compute = max(spans[t.id][1] for t in graph.tasks if t.stream is not None and t.stream.value == "compute"
                       and t.name != "optimizer")
    assert spans[sends[-1].id][1] > last_compute  # the send itself ends after the last backward


def test_the_gpt3_preset_simulates_as_it_estimates():
    """GPT-3 175B on 1,024 A100 (tp 8, pp 16, dp 8; gradients reduced after the flush): no call shares a link
    with another in flight, so simulate replays the fold and equals estimate."""
    scenario = load_scenario("scenarios/presets/megatron-gpt3-175b.yaml")
    est, sim = simulate(scenario, fidelity="estimate"), simulate(scenario, fidelity="simulate")
    assert sim.extra["iteration_by"] == "fold_replayed"
    assert sim.iteration_time_s == pytest.approx(est.iteration_time_s, rel=1e-6)
    assert sim.breakdown_s.pipeline_bubble == pytest.approx(est.breakdown_s.pipeline_bubble, rel=1e-6)


CONTENDING = {  # shipped scenarios whose calls share links in flight, so simulate may differ from estimate
    "deepseek-v3-ep64": "the expert all-to-alls share the NICs with the pipeline sends",
    "llama31-405b-gb200-nvl72": "tp and pipeline traffic share the rack's NVLink",
    "llama31-405b-h100-cp": "pipeline sends, overlapped dp reduce-scatters and cp K/V transfers share the NICs",
    "tpu-v5p-gspmd": "ZeRO-3's all-gathers and reduce-scatters and the tp collectives share the torus's ICI links",
}


def _model_parallel_shipped() -> list:
    from tests.golden.regenerate import shipped_scenarios

    out = []
    for path in shipped_scenarios():
        par = load_scenario(path).training.parallelism
        if max(par.tp, par.pp, par.cp, par.ep) > 1:
            out.append(path)
    return out


@pytest.mark.parametrize("path", _model_parallel_shipped(), ids=lambda p: p.stem)
def test_every_shipped_model_parallel_scenario_simulates_as_it_estimates_where_nothing_contends(path):
    """Where no two calls share a link in flight, simulate equals estimate (1e-6); the scenarios whose calls do
    (CONTENDING) are those the contention check finds, and no others."""
    scenario = load_scenario(path)
    plan, sim = build(scenario, Fidelity.SIMULATE)
    if plan.model_parallel and hasattr(sim.context.network, "replayed"):
        folded = training.fold(list(plan.graphs), plan.time_of, plan.groups, plan.slowdown)
        calls = [(plan.schedule_of(t, g), a, b) for t, g, a, b in network_calls(list(plan.graphs), folded.spans)]
        flows = call_replay.contended(sim.context.network, calls, 1e-9 * folded.end_s)[2]
        assert bool(flows) == (path.stem in CONTENDING), path.stem
    if path.stem in CONTENDING:
        return
    est, simulated = simulate(scenario, fidelity="estimate"), simulate(scenario, fidelity="simulate")
    assert simulated.iteration_time_s == pytest.approx(est.iteration_time_s, rel=1e-6)
    assert simulated.throughput.samples_per_s == pytest.approx(est.throughput.samples_per_s, rel=1e-6)


def test_a_run_whose_alone_calls_met_a_call_on_their_links_is_run_again_on_the_flow_network(monkeypatch):
    """Were too few schedules put on the flow network (here: none but the first that contends), the calls left
    alone meet others on their links in flight; the run is not the flow network's, so every call runs again on
    a fresh cluster's flow network."""
    scenario = _scenario({"communication.overlap": True})
    real = training.call_replay.contended

    def too_few(network, calls, tolerance_s):
        schedules, got, flows = real(network, calls, tolerance_s)
        return schedules, got, {min(flows)}

    monkeypatch.setattr(training.call_replay, "contended", too_few)
    ran, result = _result(scenario)
    monkeypatch.undo()
    _, by_flows = _result(scenario, full=True)
    assert ran.method == "executor"
    a, b = result.to_dict(), by_flows.to_dict()
    assert not _same(a, b)


def test_on_a_degraded_fabric_contending_plans_run_every_call_on_the_flow_network():
    """A run whose calls are partly alone may have to be redone on a freshly built cluster, which would not have
    the degraded link: with a link degraded every call runs on the flow network, and the result is the same as
    the executor's on that fabric."""
    scenario = _scenario({"communication.overlap": True})
    results = []
    for how in (training.run_lockstep, lambda sim, plan: training._with_links(sim.context, training.execute(sim, plan))):
        plan, sim = build(scenario, Fidelity.SIMULATE)
        sim.context.network.set_link_capacity(0, sim.context.topology.links.capacity_Bps[0] * 0.5)
        assert not sim.context.network.pristine
        ran = how(sim, plan)
        results.append((ran.method, model_parallel_result(scenario, Fidelity.SIMULATE, plan, ran).to_dict()))
    (method, a), (_, b) = results
    assert method == "executor"
    a.pop("iteration_by"), b.pop("iteration_by")
    assert not _same(a, b)
