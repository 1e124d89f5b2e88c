"""Context parallelism (training.parallelism.cp) as Megatron-Core and Transformer Engine run it: the layout's cp
and dp x cp groups, the per-rank work (every layer on s / cp tokens, the attention core 1 / cp of the whole),
the K/V volume each ring step moves (hand calculation), a ring step lasting max(attention, transfer), estimate
equal to simulate, the memory and the refusals."""
from __future__ import annotations

import copy

import pytest

from simdist.errors import ScenarioError
from simdist.io.load import load_data
from simdist.layout import Axis, build_layout
from simdist.memory import TransformerShape, block_activations
from simdist.scenario import CpCommType
from simdist.strategies.context_parallel import (CpAttention, CpCall, attention_part, cp_attention, kv_block_bytes,
                                                 shard_sequence)
from simdist.strategies.mp_plan import build_mp_plan, transformer_shape
from simdist.strategies.pipeline_graph import P2P_OP, cp_exchange_group, cp_group, pipeline_graphs
from simdist.strategies.rank_memory import check_memory
from simdist.workload.specs import Kernel, LayerSpec
from tests.strategies.scenario_runner import run_with

NIC = {"bandwidth": "400 Gb/s", "latency": "5 us", "transport": "rdma"}
HEADS, KV_HEADS, HIDDEN, SEQ = 16, 4, 1024, 4096
CP = {
    "name": "cp",
    "cluster": {"nodes": [{"count": 1, "gpu": "h100-sxm5-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-h100",
                           "nic": dict(NIC)}], "fabric": {"topology": "single_switch"}},
    "workload": {"model": {"gpt": {"layers": 4, "hidden": HIDDEN, "heads": HEADS, "vocab": 32000}},
                 "seq_len": SEQ, "flash_attention": True, "global_batch": 2, "precision": "bf16"},
    "training": {"parallelism": {"tp": 4, "cp": 2}, "micro_batch": 1, "sequence_parallel": True,
                 "optimizer": "adam"},
    "communication": {"strategy": "ring", "bucket_size": "25 MB"},
    "run": {"iterations": 3, "warmup": 1, "fidelity": "estimate"},
}


def _scenario(changes: dict | None = None):
    from simdist.io.overrides import set_path
    data = copy.deepcopy(CP)
    for dotted, value in (changes or {}).items():
        set_path(data, dotted.split("."), value)
    return load_data(data)


def test_cp_groups_follow_megatron_cores_order() -> None:
    """tp,cp,dp,pp (the default with cp > 1): cp ranks are tp apart; gradients reduce over dp x cp ranks."""
    lay = build_layout([n // 8 for n in range(32)], dp=2, tp=4, pp=2, cp=2)
    assert [a.value for a in lay.order] == ["tp", "cp", "dp", "pp"]
    assert lay.cp_groups()[0] == [0, 4]
    assert lay.dp_groups()[0] == [0, 8]
    assert lay.dp_cp_groups()[0] == [0, 8, 4, 12]
    assert lay.pp_groups()[0] == [0, 16]
    for axis in Axis:
        ranks = sorted(r for g in lay.groups(axis) for r in g)
        assert ranks == list(range(32))
    assert sorted(r for g in lay.dp_cp_groups() for r in g) == list(range(32))
    assert lay.rank(**vars(lay.coords(13))) == 13


def test_three_axis_orders_lay_out_as_before() -> None:
    old = build_layout([0] * 8, dp=2, tp=2, pp=2, order="pp,tp,dp")
    assert old.dp_cp_groups() == old.dp_groups() and old.cp == 1


def test_activations_per_rank_halve_with_cp_2() -> None:
    """Every per-token term of the block divides by cp, the flash core's log-sum-exp too."""
    shape = TransformerShape(HIDDEN, HEADS, SEQ, KV_HEADS, 2816, "swiglu", dropout=False, flash_attention=True)
    one = block_activations(shape, 1, tp=4, sequence_parallel=True)
    two = block_activations(TransformerShape(HIDDEN, HEADS, SEQ, KV_HEADS, 2816, "swiglu", dropout=False,
                                             flash_attention=True, cp=2), 1, tp=4, sequence_parallel=True)
    assert two.core_bytes == pytest.approx(one.core_bytes / 2, rel=1e-12)
    assert two.kept_bytes == pytest.approx(one.kept_bytes / 2, rel=1e-12)
    assert two.input_bytes == pytest.approx(one.input_bytes / 2, rel=1e-12)


def test_run_activations_halve_with_cp() -> None:
    """On the same tp, a cp-2 layout keeps half the activations per GPU of cp 1 (model states unchanged
    without ZeRO); the buffers grow by the ring's K/V and dK/dV buffers: 4 blocks."""
    cp1 = check_memory(_scenario({"training.parallelism": {"tp": 4, "cp": 1, "dp": 2}}))
    cp2 = check_memory(_scenario())
    assert cp2.parts_bytes["activations"] == pytest.approx(cp1.parts_bytes["activations"] / 2, rel=1e-12)
    for part in ("weights", "gradients", "optimizer_states"):
        assert cp2.parts_bytes[part] == cp1.parts_bytes[part]
    block = 2 * (SEQ / 2) * (HEADS / 4) * (HIDDEN / HEADS) * 2  # the inline GPT: kv heads = heads
    assert cp2.parts_bytes["buffers"] - cp1.parts_bytes["buffers"] == pytest.approx(4 * block)


def test_work_per_rank_is_one_cp_th() -> None:
    """Non-attention layers run s / cp tokens; under p2p each of the cp ring steps is 1 / cp^2 of the core's
    FLOPs, so a rank's attention is the whole core's / cp (2 cp chunk balance); a2a runs it at once."""
    model = _scenario().workload.model
    cut = shard_sequence(model, 2, CpCommType.P2P)
    for full, part in zip(model.layers, cut.layers):
        if full.name.endswith("attn.core"):
            assert 2 * part.fwd_flops == pytest.approx(full.fwd_flops / 2)
            assert 2 * part.bwd_kernels[0].flops == pytest.approx(full.bwd_kernels[0].flops / 2)
            assert part.input_elems == pytest.approx(full.input_elems / 2)
        else:
            assert part.fwd_flops == pytest.approx(full.fwd_flops / 2)
            assert part.saved_elems == pytest.approx(full.saved_elems / 2)
    core = LayerSpec("blocks.0.attn.core", "attention", 0, 8e9, 100.0, 50.0, 10.0,
                     bwd_kernels=(Kernel("bwd", "attention", 2e10, 300.0),))
    a2a = attention_part(core, 4, CpCommType.A2A)
    assert (a2a.fwd_flops, a2a.bwd_kernels[0].flops, a2a.input_elems) == (2e9, 5e9, 25.0)


def test_gqa_kv_block_is_the_hand_calculation() -> None:
    """Grouped-query attention: the K/V block is of the K/V heads only, tp-sharded."""
    shape = TransformerShape(HIDDEN, HEADS, SEQ, KV_HEADS)
    assert kv_block_bytes(shape, 2, 4, 2, 2) == 2 * 2 * (SEQ / 4) * (KV_HEADS / 2) * (HIDDEN / HEADS) * 2


def test_kv_volume_per_ring_step_is_the_hand_calculation() -> None:
    """Each forward ring step moves 2 (s / cp) (kv / tp) d x 2 bytes per rank (bf16); forward moves cp - 1
    blocks per attention core, backward cp transfers carrying 2 (cp - 1) blocks (K/V, then K/V and dK/dV,
    then dK/dV)."""
    cp, tp, d = 4, 2, HIDDEN // HEADS
    plan = build_mp_plan(_scenario({"training.parallelism": {"tp": tp, "cp": cp}}))
    block = 2 * (SEQ / cp) * (HEADS / tp) * d * 2
    assert kv_block_bytes(transformer_shape(_scenario().workload.model), 1, cp, tp, 2) == block
    (graph,) = pipeline_graphs(plan, 25e6)
    ring = [t for t in graph.tasks if getattr(t, "group", "") == cp_exchange_group(0)]
    assert all(t.op == P2P_OP for t in ring)
    fwd = [t for t in ring if t.name.startswith("F")]
    bwd = [t for t in ring if t.name.startswith("B")]
    cores, per_micro = 4, plan.micro_batches  # 4 blocks
    assert len(fwd) == cores * per_micro * (cp - 1)
    assert sum(t.size_bytes for t in fwd) == pytest.approx(cores * per_micro * (cp - 1) * block)
    assert len(bwd) == cores * per_micro * cp
    assert sum(t.size_bytes for t in bwd) == pytest.approx(cores * per_micro * 2 * (cp - 1) * block)


def test_ring_step_lasts_max_of_attention_and_transfer() -> None:
    """Forward: cp - 1 steps of max(c, x) and a last step of c; backward: cp steps of max(c, x_k)."""
    fwd, bwd = cp_attention(CpCommType.P2P, 4, 1, TransformerShape(HIDDEN, HEADS, SEQ, KV_HEADS), 1, 2, 1.0, 2.0)
    seconds = lambda size: size / 1e6  # noqa: E731 - 1 MB/s
    block = kv_block_bytes(TransformerShape(HIDDEN, HEADS, SEQ, KV_HEADS), 1, 4, 1, 2)
    x = block / 1e6
    t, waits, _ = fwd.timeline(seconds, None)
    assert t == pytest.approx(3 * max(1.0, x) + 1.0)
    assert bwd.exchanges == (block, 2 * block, 2 * block, block)
    t, _, _ = bwd.timeline(seconds, None)
    assert t == pytest.approx(2 * max(2.0, x) + 2 * max(2.0, 2 * x))
    hidden = CpAttention(CpCommType.P2P, (1.0, 1.0), (5e5,))
    assert hidden.timeline(seconds, None) == (2.0, (), ((0.0, 0.5),))  # the transfer under the step
    exposed = CpAttention(CpCommType.P2P, (1.0, 1.0), (3e6,))  # 3 s of transfer beside 1 s of compute
    assert exposed.timeline(seconds, None) == (4.0, ((1.0, 3.0),), ((0.0, 1.0),))
    blocking = CpAttention(CpCommType.ALL_GATHER, (1.0,), before=(CpCall(P2P_OP, 1e6, "x"),))
    assert blocking.timeline(None, lambda op, size: size / 1e6) == (2.0, ((0.0, 1.0),), ())


def test_all_gather_and_a2a_volumes() -> None:
    shape = TransformerShape(HIDDEN, HEADS, SEQ, KV_HEADS)
    block = kv_block_bytes(shape, 1, 2, 1, 2)
    fwd, bwd = cp_attention(CpCommType.ALL_GATHER, 2, 1, shape, 1, 2, 1.0, 2.0)
    assert [c.size_bytes for c in fwd.before] == [block, block]  # K and V of both ranks each
    assert [c.op.value for c in bwd.after] == ["reduce_scatter", "reduce_scatter"]
    fwd, bwd = cp_attention(CpCommType.A2A, 2, 1, shape, 1, 2, 1.0, 2.0)
    q = (SEQ / 2) * HIDDEN * 2
    assert [c.size_bytes for c in fwd.before] == [q, block / 2, block / 2]
    assert [c.size_bytes for c in fwd.after] == [q]
    assert len(bwd.before) == 2 and len(bwd.after) == 3


@pytest.mark.parametrize("mode", ["p2p", "all_gather", "a2a"])
def test_estimate_equals_simulate(mode: str) -> None:
    """One node, tp 4 x cp 2: nothing contends (the ring's transfers run beside the attention only)."""
    changes = {"training.cp_comm_type": mode}
    est = run_with(CP, changes, fidelity="estimate")
    sim = run_with(CP, changes, fidelity="simulate")
    assert est.iteration_time_s == pytest.approx(sim.iteration_time_s, rel=1e-6)


def test_cp_splits_a_micro_batchs_compute_and_names_the_groups() -> None:
    """A micro-batch's compute per rank with cp 2 is about half of cp 1's on large blocks (smaller GEMMs run
    a little less efficiently and every kernel still launches: a little more than half; on hidden 1024, 0.78)."""
    big = {"workload.model": {"gpt": {"layers": 4, "hidden": 8192, "heads": 64, "vocab": 32000}}}
    two = build_mp_plan(_scenario(big)).stages[0].chunks[0]
    one = build_mp_plan(_scenario({**big, "training.parallelism": {"tp": 4, "cp": 1, "dp": 2}})).stages[0].chunks[0]
    ratio = (two.fwd_s + two.bwd_s) / (one.fwd_s + one.bwd_s)
    assert 0.5 < ratio < 0.6
    plan = build_mp_plan(_scenario({"training.cp_comm_type": "all_gather"}))
    (graph,) = pipeline_graphs(plan, 25e6)
    assert any(getattr(t, "group", "") == cp_group(0) for t in graph.tasks)


REFUSALS = [
    ({"workload.flash_attention": False}, "training.parallelism.cp"),
    ({"workload.seq_len": 4094}, "training.parallelism.cp"),
    ({"training.cp_comm_type": "a2a", "training.parallelism": {"tp": 8, "cp": 1}}, "training.cp_comm_type"),
    ({"training.cp_comm_type": "a2a", "cluster.nodes.0.count": 4}, None),
    ({"training.placement_order": "tp,dp,pp"}, "training.placement_order"),
    ({"workload": {"model": "resnet50", "global_batch": 8, "precision": "bf16"},
      "training.parallelism": {"cp": 2}, "training.sequence_parallel": False}, "training.parallelism.cp"),
]


@pytest.mark.parametrize("changes,path", REFUSALS)
def test_refusals_name_the_key(changes: dict, path: str | None) -> None:
    if path is None:  # a2a with tp 4 x cp 8 = 32 ranks for 16 heads
        changes = {**changes, "training.parallelism": {"tp": 4, "cp": 8}}
        path = "training.cp_comm_type"
    with pytest.raises(ScenarioError, match=path.replace(".", r"\.")):
        run_with(CP, changes, fidelity="estimate")


@pytest.mark.parametrize("changes,path", REFUSALS)
def test_check_says_what_run_says(changes: dict, path: str | None, tmp_path) -> None:
    from simdist.io.overrides import set_path
    from tests.io.test_check_equals_run import assert_check_equals_run
    if path is None:
        changes = {**changes, "training.parallelism": {"tp": 4, "cp": 8}}
    data = copy.deepcopy(CP)
    for dotted, value in changes.items():
        set_path(data, dotted.split("."), value)
    assert_check_equals_run(data, tmp_path / "cp.yaml")


def test_distributed_optimizer_shards_over_dp_x_cp() -> None:
    """Megatron-Core's distributed optimizer shards over the data-parallel group with cp: with dp 1 and cp 2
    the optimizer states per GPU halve (ZeRO-1), the weights and gradients stay whole."""
    plain = check_memory(_scenario())
    sharded = check_memory(_scenario({"training.parallelism": {"tp": 4, "cp": 2, "zero": 1}}))
    assert sharded.parts_bytes["optimizer_states"] == pytest.approx(plain.parts_bytes["optimizer_states"] / 2)
    assert sharded.parts_bytes["weights"] == plain.parts_bytes["weights"]
    plan = build_mp_plan(_scenario({"training.parallelism": {"tp": 4, "cp": 2, "zero": 1}}))
    assert plan.grad_dp == 2 and plan.stages[0].grad_buckets


def test_stage_dp_groups_are_dp_x_cp_ranks() -> None:
    """The gradients of a stage go over its dp x cp groups; its cp groups are the cp ring's ranks."""
    from simdist.engine.mp_groups import LayoutGroups
    from simdist.engine.simulation import simulate  # noqa: F401  (the engine's modules loaded as a run loads them)
    from simdist.engine.state import Simulation
    from simdist.scenario import Fidelity
    scenario = _scenario({"training.parallelism": {"tp": 2, "cp": 2, "dp": 2}})
    plan = build_mp_plan(scenario)
    groups = LayoutGroups(Simulation(scenario, Fidelity.ESTIMATE).context, plan.layout, plan)
    assert [g.ranks for g in groups.axis_groups["dp.s0"]] == [(0, 4, 2, 6), (1, 5, 3, 7)]
    assert [g.ranks for g in groups.axis_groups[cp_group(0)]] == [(0, 2), (1, 3), (4, 6), (5, 7)]
    assert groups.groups[cp_exchange_group(0)].kind == "tp_exchange"


@pytest.mark.parametrize("mode", ["p2p", "a2a"])
def test_estimates_fold_of_the_ring_is_exact(mode: str, monkeypatch) -> None:
    """estimate folds each chunk's chain, the cp core included (sum of max(c, x) per ring step), into one task:
    the same iteration and breakdown as estimate on the unfused graphs (tp 2 x cp 2 x pp 2), the K/V transfers
    hidden under the ring steps counted as tp communication as the unfused graphs count them."""
    import simdist.strategies.pipeline_graph as pipeline_graph
    changes = {"training.parallelism": {"tp": 2, "cp": 2, "pp": 2}, "training.cp_comm_type": mode}
    fused = run_with(CP, changes, fidelity="estimate")
    monkeypatch.setattr(pipeline_graph._Fuse, "fusable", lambda self, key, segs: False)
    unfused = run_with(CP, changes, fidelity="estimate")
    assert fused.iteration_time_s == pytest.approx(unfused.iteration_time_s, rel=1e-12)
    assert fused.breakdown_s.to_dict() == pytest.approx(unfused.breakdown_s.to_dict(), rel=1e-9, abs=1e-15)
