"""Megatron tensor parallelism: collective sizes by hand for GPT-2 XL, tp = 1 unchanged, GEMM efficiency shrinking."""
from __future__ import annotations

import math

import pytest

from simdist.collectives.schedule import CollectiveOp
from simdist.compute import gemm_saturation, gemm_shrink_factor, layer_times
from simdist.strategies.tensor_parallel import Phase, TpRole, layer_role, shard_model, tensor_parallel_plan
from simdist.workload import get_model
from tests.compute.gpus import A100_80GB

AR, RS, AG = CollectiveOp.ALL_REDUCE, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_GATHER
H, S, L = 1600, 1024, 48  # GPT-2 XL
BSH = S * H * 2  # one micro-batch sample of b x s x h fp16 activations: 3,276,800 bytes


@pytest.fixture(scope="module")
def xl():
    return get_model("gpt2-xl", seq_len=S)


def _block_colls(plan, block: int):
    return [c for c in plan.collectives if c.what.startswith(f"blocks.{block}.")]


def test_gpt2_xl_tp2_all_reduces_by_hand(xl) -> None:
    b = 2
    plan = tensor_parallel_plan(xl, A100_80GB, b, "fp16", 2)
    for i in (0, 17, 47):
        colls = _block_colls(plan, i)
        fwd = [c for c in colls if c.phase is Phase.FWD]
        bwd = [c for c in colls if c.phase is Phase.BWD]
        assert [(c.op, c.size_bytes) for c in fwd] == [(AR, b * BSH)] * 2  # after attn.proj, after mlp.fc2
        assert [(c.op, c.size_bytes) for c in bwd] == [(AR, b * BSH)] * 2  # input grads of qkv and fc1
        assert {c.what.split(" ")[0].split(".", 2)[2] for c in fwd} == {"attn.proj", "mlp.fc2"}
        assert {c.what.split(" ")[0].split(".", 2)[2] for c in bwd} == {"attn.qkv", "mlp.fc1"}
    by_fwd, by_bwd = plan.bytes_by_op("fwd"), plan.bytes_by_op("bwd")
    # blocks + the vocab-parallel embedding (fwd) / LM head (bwd) + three fp32 b x s loss reductions (fwd)
    assert by_fwd == {AR: (2 * L + 1) * b * BSH + 3 * b * S * 4}
    assert by_bwd == {AR: (2 * L + 1) * b * BSH}
    assert b * BSH == 6_553_600


def test_gpt2_xl_sequence_parallel_replaces_each_all_reduce(xl) -> None:
    plan = tensor_parallel_plan(xl, A100_80GB, 1, "fp16", 4, sequence_parallel=True)
    colls = _block_colls(plan, 3)
    fwd = sorted((c.op.value, c.size_bytes) for c in colls if c.phase is Phase.FWD)
    bwd = sorted((c.op.value, c.size_bytes) for c in colls if c.phase is Phase.BWD)
    assert fwd == sorted([("all_gather", BSH), ("reduce_scatter", BSH)] * 2)
    # backward: reduce_scatter of each input gradient, all_gather of each row-parallel output gradient, and
    # Megatron's second all_gather of each column-parallel input for its weight gradient
    assert bwd == sorted([("reduce_scatter", BSH)] * 2 + [("all_gather", BSH)] * 4)
    assert AR not in plan.bytes_by_op("bwd")


def test_tp1_gives_no_collectives_and_the_existing_layer_times(xl) -> None:
    plan = tensor_parallel_plan(xl, A100_80GB, 2, "fp16", 1)
    assert plan.collectives == ()
    assert [x.time for x in plan.layers] == layer_times(xl, A100_80GB, 2, "fp16")
    assert all(x.shard is y for x, y in zip(plan.layers, xl.layers))


def test_tp2_halves_gemm_flops_and_params_of_the_blocks(xl) -> None:
    half = shard_model(xl, 2)
    for full, part in zip(xl.layers, half.layers):
        role = layer_role(full)
        if role in (TpRole.COLUMN, TpRole.ROW, TpRole.HEADS):
            assert part.fwd_flops == pytest.approx(full.fwd_flops / 2)
        if role is TpRole.COLUMN:
            assert part.params == pytest.approx(full.params / 2)
        if role is TpRole.ROW:  # bias added after the all_reduce stays whole
            assert part.params == full.params // 2 + H // 2
        if role in (TpRole.SEQUENCE, TpRole.REPLICATED):
            assert part == full
    assert sum(p.params for p in half.layers) < 0.52 * xl.params


def test_efficiency_monotone_non_increasing_in_tp(xl) -> None:
    factors = {}
    for tp in (1, 2, 4, 8, 16):
        plan = tensor_parallel_plan(xl, A100_80GB, 1, "fp16", tp)  # 1600 and 4800 divide by all of them
        factors[tp] = [x.efficiency_factor for x in plan.layers]
    tps = sorted(factors)
    for a, b in zip(tps, tps[1:]):
        assert all(y <= x for x, y in zip(factors[a], factors[b]))
    assert all(f == 1.0 for f in factors[1])
    qkv = [i for i, x in enumerate(xl.layers) if x.name == "blocks.0.attn.qkv"][0]
    assert factors[16][qkv] < factors[2][qkv] < 1.0


def test_per_rank_compute_time_falls_with_tp_but_not_perfectly(xl) -> None:
    t1 = tensor_parallel_plan(xl, A100_80GB, 1, "fp16", 1)
    t8 = tensor_parallel_plan(xl, A100_80GB, 1, "fp16", 8)
    assert t1.fwd_s / 8 < t8.fwd_s < t1.fwd_s / 2


def test_gemm_saturation_shape() -> None:
    assert gemm_saturation(0.0, A100_80GB, "fp16") == 1.0
    vals = [gemm_saturation(2.0 * n ** 3, A100_80GB, "fp16") for n in (256, 512, 1024, 4096, 16384)]
    assert vals == sorted(vals) and vals[-1] > 0.999 and vals[0] < 0.5
    assert gemm_shrink_factor(1e12, 1e12, A100_80GB, "fp16") == 1.0
    with pytest.raises(ValueError):
        gemm_shrink_factor(1e9, 2e9, A100_80GB, "fp16")


def test_what_io_refuses_is_an_invariant_here(xl) -> None:
    """io.rules_parallel refuses these with the key's path (tests/io/test_rules.py)."""
    with pytest.raises(AssertionError, match="tp 3 divides"):
        tensor_parallel_plan(xl, A100_80GB, 1, "fp16", 3)
    with pytest.raises(AssertionError, match="the 25 attention heads"):
        tensor_parallel_plan(xl, A100_80GB, 1, "fp16", 2, heads=25)
    with pytest.raises(AssertionError, match="the 8 key/value heads"):
        tensor_parallel_plan(get_model("llama2-7b", seq_len=512), A100_80GB, 1, "bf16", 16, heads=32, kv_heads=8)
    with pytest.raises(AssertionError, match="sequence_parallel"):
        tensor_parallel_plan(xl, A100_80GB, 1, "fp16", 1, sequence_parallel=True)
    with pytest.raises(AssertionError, match="needs transformer blocks"):
        shard_model(get_model("resnet50"), 2)


def test_llama_swiglu_and_rmsnorm_roles() -> None:
    m = get_model("llama2-7b", seq_len=512)
    roles = {x.name.split(".", 2)[-1]: layer_role(x) for x in m.layers if x.name.startswith("blocks.0.")}
    assert roles["mlp.gate_up"] is TpRole.COLUMN and roles["mlp.down"] is TpRole.ROW
    assert roles["mlp.swiglu"] is TpRole.SHARDED and roles["norm1"] is TpRole.SEQUENCE
    plan = tensor_parallel_plan(m, A100_80GB, 1, "bf16", 8, heads=32)
    assert len(_block_colls(plan, 0)) == 4
    assert math.isclose(sum(x.shard.params for x in plan.layers), m.params / 8, rel_tol=0.01)


def test_layer_times_efficiency_factors_are_checked(xl) -> None:
    n = len(xl.layers)
    with pytest.raises(ValueError, match="one per layer"):
        layer_times(xl, A100_80GB, 1, "fp16", efficiency_factors=[1.0] * (n - 1))
    with pytest.raises(ValueError, match="efficiency_factors"):
        layer_times(xl, A100_80GB, 1, "fp16", efficiency_factors=[0.0] * n)
    slow = layer_times(xl, A100_80GB, 1, "fp16", efficiency_factors=[0.5] * n)
    base = layer_times(xl, A100_80GB, 1, "fp16")
    assert sum(t.fwd_s for t in slow) > sum(t.fwd_s for t in base)


def test_layer_costs_feed_the_stage_balancer(xl) -> None:
    from simdist.strategies.pipeline_schedule import balance_stages, stage_costs

    plan = tensor_parallel_plan(xl, A100_80GB, 1, "fp16", 4)
    costs = plan.layer_costs_s
    assert len(costs) == len(xl.layers) and sum(costs) == pytest.approx(plan.fwd_s + plan.bwd_s)
    per_stage = stage_costs(costs, balance_stages(costs, 4))
    assert max(per_stage) < 1.1 * sum(costs) / 4


def test_layouts_that_differ_in_dp_or_zero_share_the_per_layer_costs() -> None:
    """The per-layer plan is memoised on its arguments' values: estimating a layout again with another dp, ZeRO
    stage or bucket size builds no new one, and a calibration equal by value hits the same entry."""
    from dataclasses import replace

    from simdist.compute_rates import ComputeCalibration
    from simdist.engine.simulation import simulate
    from simdist.io.load import load_scenario

    base = ["workload.model=gpt3-1.3b", "cluster.nodes.0.count=2", "training.parallelism.tp=2",
            "training.parallelism.pp=2", "workload.global_batch=64", "training.micro_batch=4"]
    preset = "scenarios/presets/megatron-gpt3-175b.yaml"
    tensor_parallel_plan.cache_clear()
    first = simulate(load_scenario(preset, base + ["training.parallelism.dp=4"]), "estimate").iteration_time_s
    assert tensor_parallel_plan.cache_info().misses == 1
    for more in (["training.parallelism.dp=4", "training.parallelism.zero=1"],
                 ["training.parallelism.dp=4", "communication.bucket_size=25 MB"]):
        simulate(load_scenario(preset, base + more), "estimate")
    assert tensor_parallel_plan.cache_info().misses == 1 and tensor_parallel_plan.cache_info().hits == 2
    again = simulate(load_scenario(preset, base + ["training.parallelism.dp=4"]), "estimate").iteration_time_s
    assert again == first
    a = ComputeCalibration(efficiency={"a100-sxm4-80gb": {"fp16": 0.5}}, kind_factor={"linear": 1.1})
    b = replace(a, efficiency={"a100-sxm4-80gb": {"fp16": 0.5}})
    assert a == b and hash(a) == hash(b) and hash(a) != hash(ComputeCalibration())
