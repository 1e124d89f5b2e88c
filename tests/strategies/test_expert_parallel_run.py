"""Expert parallelism end to end (training.parallelism.ep / etp, training.moe_load_imbalance): estimate equals
simulate, the dispatcher's all-to-alls on the stage's ep groups, the experts' memory per GPU by hand, and the
rules Megatron-Core checks."""
from __future__ import annotations

import copy

import pytest

from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.load import load_data
from simdist.io.overrides import set_path
from simdist.strategies.expert_layout import expert_group
from simdist.strategies.mp_plan import build_mp_plan
from simdist.strategies.pipeline_graph import stage_graph
from simdist.strategies.rank_memory import check_memory
from tests.engine.test_every_key import MOE, TRAIN


def _scenario(**changes):
    """The every-key test's mixture-of-experts context (pp 4 x dp 2, ZeRO-1) with `changes`."""
    data = copy.deepcopy(TRAIN)
    for dotted, value in {**MOE, "training.parallelism": {"pp": 4, "zero": 1}, **changes}.items():
        set_path(data, dotted.split("."), copy.deepcopy(value))
    return load_data(data)


@pytest.mark.parametrize("changes", [
    {"training.parallelism.ep": 2},
    {"training.parallelism.ep": 2, "training.moe_load_imbalance": 3.0},
    {"training.parallelism": {"pp": 2, "tp": 2, "ep": 2, "etp": 1, "zero": 1}, "training.sequence_parallel": True},
    {"training.parallelism": {"pp": 2, "tp": 2, "zero": 1}, "training.sequence_parallel": True},  # etp = tp
])
def test_estimate_equals_simulate(changes):
    s = _scenario(**changes)
    est, sim = simulate(s, fidelity="estimate"), simulate(s, fidelity="simulate")
    assert est.iteration_time_s == pytest.approx(sim.iteration_time_s, rel=1e-6)
    assert est.breakdown_s.tp_communication == pytest.approx(sim.breakdown_s.tp_communication, rel=1e-6, abs=1e-12)


def test_the_dispatcher_runs_on_the_stage_ep_groups():
    """Qwen3-30B-A3B (h 2048, top-8) at 512 tokens, pp 4 x dp 2 with ep 2: per MoE layer and micro-batch the
    forward dispatches and combines 512 x 8 x 2048 x 2 bytes on tp.s<k>.ep / .epc, the backward the same two;
    the experts' gradients have no edp group to go over (edp = 1)."""
    s = _scenario(**{"training.parallelism.ep": 2})
    plan = build_mp_plan(s)
    assert (plan.ep, plan.etp, plan.edp) == (2, 1, 1)
    st = plan.stages[0]
    graph = stage_graph(plan, st, s.communication.bucket_size_bytes)
    a2a = [t for t in graph.tasks if getattr(t, "group", "") in (expert_group(0, "ep"), expert_group(0, "epc"))]
    blocks = sum(1 for i in range(*st.chunks[0].layers) if s.workload.model.layers[i].experts)
    assert blocks == 12 and len(a2a) == 4 * blocks * plan.micro_batches
    assert {t.size_bytes for t in a2a} == {512 * 8 * 2048 * 2}
    assert not [t for t in graph.tasks if "edp" in getattr(t, "group", "")]


def test_expert_memory_per_gpu_by_hand():
    """ep 2 holds half of each stage's routed experts: the weights (bf16) drop by 2 x Ψe / 2 bytes and the
    gradients (fp32) by 4 x Ψe / 2 against ep 1; with the distributed optimizer the states over edp = 1 (ep 2)
    instead of dp = 2 (ep 1) stay 12 x Ψe / 2 either way."""
    one, two = _scenario(), _scenario(**{"training.parallelism.ep": 2})
    model = one.workload.model
    plan = build_mp_plan(one)
    lo, hi = plan.stages[0].chunks[0].layers
    psi = sum(model.layers[i].params for i in range(lo, hi) if model.layers[i].experts)
    a, b = check_memory(one).parts_bytes, check_memory(two).parts_bytes  # the first stage (embedding) both times
    assert a["weights"] - b["weights"] == pytest.approx(2 * psi / 2, rel=1e-9)
    assert a["gradients"] - b["gradients"] == pytest.approx(4 * psi / 2, rel=1e-9)
    assert a["optimizer_states"] == pytest.approx(b["optimizer_states"], rel=1e-9)


@pytest.mark.parametrize("changes, key", [
    ({"training.parallelism.ep": 3}, "training.parallelism.ep"),  # 128 experts
    ({"training.parallelism": {"pp": 4, "ep": 4}}, "training.parallelism.ep"),  # a stage has 2 GPUs
    ({"training.parallelism": {"pp": 2, "tp": 2}}, "training.sequence_parallel"),
    ({"training.parallelism": {"pp": 4, "ep": 2, "zero": 2}}, "training.parallelism.zero"),
    ({"training.parallelism.ep": 2, "communication.backend": "textbook"}, "communication.backend"),
    ({"training.moe_load_imbalance": 2.0}, "training.moe_load_imbalance"),  # ep 1: every GPU holds every expert
    ({"training.parallelism.ep": 2, "training.moe_load_imbalance": 200.0}, "training.moe_load_imbalance"),
    ({"workload.model": "llama3.1-8b", "training.parallelism.ep": 2}, "training.parallelism.ep"),
    ({"workload.model": "llama3.1-8b", "training.moe_load_imbalance": 1.5}, "training.moe_load_imbalance"),
    ({"workload.model": "llama3.1-8b", "training.parallelism.etp": 2}, "training.parallelism.etp"),
])
def test_refusals_name_the_key(changes, key):
    with pytest.raises(ScenarioError) as e:
        _scenario(**changes)
    assert key in str(e.value)


def test_estimate_equals_simulate_with_a_hot_expert_across_nodes():
    """ep 16 over two 8-GPU nodes (PXN), a hot expert at 3 x the mean: the dispatch and combine cross the NICs
    unevenly; estimate times each alone on the fabric by its busiest link, as max-min sharing runs it."""
    s = _scenario(**{"cluster.nodes.0.count": 2, "cluster.nodes.0.gpu": "h100-sxm5-80gb",
                     "training.parallelism": {"pp": 1, "ep": 16, "zero": 1}, "training.moe_load_imbalance": 3.0,
                     "workload.global_batch": 32})
    est, sim = simulate(s, fidelity="estimate"), simulate(s, fidelity="simulate")
    assert est.iteration_time_s == pytest.approx(sim.iteration_time_s, rel=1e-6)
    assert est.breakdown_s.tp_communication == pytest.approx(sim.breakdown_s.tp_communication, rel=1e-6)
