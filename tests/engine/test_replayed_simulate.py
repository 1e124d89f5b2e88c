"""`simulate` of a model-parallel plan whose calls never share a link while in flight is the fold's iteration replayed
onto the flow network (engine/training._replayed): the same result as the executor on the flow network, field by
field (1e-9), its links and first iteration's trace included; where calls do contend, the executor runs."""
from __future__ import annotations

import copy
import math

import pytest

from simdist.engine import training
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


def _result(scenario, how):
    plan, sim = build(scenario, Fidelity.SIMULATE)
    ran = how(sim, plan)
    return ran, None if ran is None else model_parallel_result(scenario, Fidelity.SIMULATE, plan, ran)


def _same(a, b, path=""):
    """Field-by-field equality of two JSON values (numbers to 1e-9); the differing paths."""
    if isinstance(a, dict):
        return [d for k in a.keys() | b.keys() for d in _same(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _same(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, (int, float)):
        return [] if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15) else [f"{path}: {a} vs {b}"]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


@pytest.mark.parametrize("name", list(ALONE))
def test_replayed_equals_the_executor(name):
    scenario = _scenario(ALONE[name])
    replayed, by_fold = _result(scenario, training._replayed)
    assert replayed is not None, "no two calls shared a link: the fold replays"
    executed, by_executor = _result(scenario, training.execute)
    a, b = by_fold.to_dict(), by_executor.to_dict()
    assert (a.pop("iteration_by"), b.pop("iteration_by")) == ("fold_replayed", "executor")
    assert (a.pop("simulated_iterations"), a.pop("inferred_iterations")) == (1, 2)
    b.pop("simulated_iterations"), b.pop("inferred_iterations")
    assert not _same(a, b)
    first = [r for r in executed.records if r.iteration == 0 or (r.track.startswith("link:")
                                                                 and r.end_s <= replayed.iteration_s * (1 + 1e-12))]
    key = lambda r: (r.track, r.start_s, r.name)  # noqa: E731
    assert len(replayed.records) == len(first)
    for x, y in zip(sorted(replayed.records, key=key), sorted(first, key=key)):
        assert (x.track, x.name, x.iteration) == (y.track, y.name, y.iteration)
        assert x.start_s == pytest.approx(y.start_s, rel=1e-9, abs=1e-15)
        assert x.end_s == pytest.approx(y.end_s, rel=1e-9, abs=1e-15)


def test_calls_that_contend_run_on_the_executor():
    """dp buckets reduced during the backward (overlap) share the NICs with the pipeline's sends: no replay, and
    simulate is the executor's run (it differs from estimate, which times every call alone)."""
    scenario = _scenario({"communication.overlap": True})
    assert _result(scenario, training._replayed)[0] is None
    plan, sim = build(scenario, Fidelity.SIMULATE)
    assert training.run_lockstep(sim, plan).method == "executor"


def test_without_overlap_the_gradients_wait_for_the_last_pipeline_send():
    """Megatron-Core reduces the gradients after its schedule returns, which waits for every p2p request: stage 1's
    all_reduce starts when its last send of gradients to stage 0 ends."""
    scenario = _scenario({})
    plan, sim = build(scenario, Fidelity.SIMULATE)
    ran = training._replayed(sim, plan)
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
