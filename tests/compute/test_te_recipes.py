"""Transformer Engine's fp8 scaling recipes and FP8 attention, and CUDA graphs, in the compute model (by hand)."""
from __future__ import annotations

import pytest

from simdist.compute import (DEFAULT_LAUNCH_OVERHEAD_S, DEFAULT_MEMORY_EFFICIENCY, GRAPH_KERNEL_GAP_S,
                             ComputeCalibration, layer_times)
from simdist.low_precision import layer_precision, recipe_for, weight_elems
from simdist.workload.specs import MoeSpec
from simdist.workload.transformer import parametric_gpt
from tests.compute.test_low_precision import AMPERE, BW, HOPPER, T

CURRENT = ComputeCalibration(fp8_recipe="current")
FP8_ATTENTION = ComputeCalibration(fp8_attention=True)
GRAPHS = ComputeCalibration(cuda_graphs=True)


def _model(seq: int = 2048, moe: MoeSpec | None = None, flash: bool = True):
    return parametric_gpt(2, 4096, 32, 32000, seq, 11008, name="tiny-llama", kv_heads=8, positions="rotary",
                          mlp="swiglu", norm="rmsnorm", bias=False, tied_head=False, flash_attention=flash,
                          dropout=0.0, moe=moe)


def test_current_scaling_adds_an_amax_pass_per_cast_tensor() -> None:
    """Float8CurrentScaling reads each cast tensor once more (its amax) in a kernel of its own: X and W before the
    forward GEMM, dY before the backward GEMMs; nothing else changes."""
    m, b = _model(), 2
    delayed, current = layer_times(m, HOPPER, b, "fp8"), layer_times(m, HOPPER, b, "fp8", CURRENT)
    bw, launch = BW * DEFAULT_MEMORY_EFFICIENCY, DEFAULT_LAUNCH_OVERHEAD_S
    for i, layer in enumerate(m.layers):
        if layer_precision(layer, "fp8") != "fp8":
            assert current[i] == delayed[i], layer.name
            continue
        x, w, dy = b * layer.input_elems, weight_elems(layer), b * layer.output_elems
        assert current[i].fwd_s - delayed[i].fwd_s == pytest.approx((x + w) * 2 / bw + 2 * launch, rel=1e-9)
        assert current[i].bwd_s - delayed[i].bwd_s == pytest.approx(dy * 2 / bw + launch, rel=1e-9)
    assert recipe_for("fp8", "current").amax_pass and not recipe_for("fp8", "delayed").amax_pass
    assert recipe_for("mxfp8", "current") is recipe_for("mxfp8")  # block-scaled recipes have their own scales
    blockwise = recipe_for("fp8", "blockwise")  # an fp32 scale per 128 elements, rowwise and columnwise
    assert blockwise.written_bytes_per_elem == 2 * (1 + 4 / 128) and not blockwise.amax_pass
    with pytest.raises(ValueError, match="fp8_recipe"):
        ComputeCalibration(fp8_recipe="just_in_time")


def test_blockwise_scaling_writes_its_block_scales() -> None:
    m, b = _model(), 1
    delayed = layer_times(m, HOPPER, b, "fp8")
    blockwise = layer_times(m, HOPPER, b, "fp8", ComputeCalibration(fp8_recipe="blockwise"))
    bw = BW * DEFAULT_MEMORY_EFFICIENCY
    for i, layer in enumerate(m.layers):
        if layer_precision(layer, "fp8") != "fp8":
            assert blockwise[i] == delayed[i], layer.name
            continue
        x, w, dy = b * layer.input_elems, weight_elems(layer), b * layer.output_elems
        scales = 2 * 4 / 128  # bytes per element: both copies' fp32 scales
        assert blockwise[i].fwd_s - delayed[i].fwd_s == pytest.approx((x + w) * scales / bw, rel=1e-9)
        assert blockwise[i].bwd_s - delayed[i].bwd_s == pytest.approx(dy * scales / bw, rel=1e-9)


def test_fp8_attention_runs_the_core_at_the_fp8_rate_with_its_conversions() -> None:
    """With fp8 attention the flash-attention core computes at the fp8 peak (twice bf16 here, at fp8's efficiency)
    and pays the conversions of Q, K, V and O each way; every other layer is unchanged."""
    m, b = _model(8192), 1
    plain, fp8_attn = layer_times(m, HOPPER, b, "fp8"), layer_times(m, HOPPER, b, "fp8", FP8_ATTENTION)
    bw, launch = BW * DEFAULT_MEMORY_EFFICIENCY, DEFAULT_LAUNCH_OVERHEAD_S
    cores = [i for i, l in enumerate(m.layers) if l.kind == "attention"]
    for i, layer in enumerate(m.layers):
        if i not in cores:
            assert fp8_attn[i] == plain[i], layer.name
            continue
        bf16_gemm = layer.fwd_flops * b / (1000 * T * 0.7 * 0.7)  # the core at bf16 x the attention factor
        fp8_gemm = layer.fwd_flops * b / (2000 * T * 0.6 * 0.7)
        convert = (layer.input_elems * 3 + layer.output_elems * 3) * b / bw + 2 * launch
        assert plain[i].fwd_s == pytest.approx(bf16_gemm + launch, rel=1e-9)
        assert fp8_attn[i].fwd_s == pytest.approx(fp8_gemm + launch + convert, rel=1e-9)
        assert fp8_attn[i].total_s < plain[i].total_s
    # only under fp8, and only where the GPU has fp8 units (an A100 runs fp8 as fp16: nothing to change)
    assert layer_times(m, HOPPER, b, "bf16", FP8_ATTENTION) == layer_times(m, HOPPER, b, "bf16")
    assert layer_times(m, AMPERE, b, "fp8", FP8_ATTENTION) == layer_times(m, AMPERE, b, "fp8")


def test_cuda_graphs_replace_each_kernel_launch_by_the_graph_gap() -> None:
    """Each layer's forward and backward kernels cost GRAPH_KERNEL_GAP_S instead of a host launch: the step loses
    exactly (launch - gap) per kernel."""
    m, b = _model(512, flash=False), 1  # unfused attention: layers of many kernels
    eager, graphed = layer_times(m, HOPPER, b, "bf16"), layer_times(m, HOPPER, b, "bf16", GRAPHS)
    saved = DEFAULT_LAUNCH_OVERHEAD_S - GRAPH_KERNEL_GAP_S
    core = next(i for i, l in enumerate(m.layers) if l.kind == "attention")
    kernels = len(m.layers[core].fwd_kernels)
    assert eager[core].fwd_s - graphed[core].fwd_s == pytest.approx(kernels * saved, rel=1e-9)
    norm = next(i for i, l in enumerate(m.layers) if l.name == "blocks.1.norm1")
    assert eager[norm].fwd_s - graphed[norm].fwd_s == pytest.approx(saved, rel=1e-9)
    assert eager[norm].bwd_s - graphed[norm].bwd_s == pytest.approx(2 * saved, rel=1e-9)  # dgrad and wgrad
    # never more than the (calibrated) launch itself
    zero = ComputeCalibration(launch_overhead_s=0.0, cuda_graphs=True)
    assert layer_times(m, HOPPER, b, "bf16", zero) == layer_times(m, HOPPER, b, "bf16",
                                                                  ComputeCalibration(launch_overhead_s=0.0))


def test_cuda_graphs_leave_dropless_experts_eager() -> None:
    """A dropless MoE layer's token counts are known only at run time, so its experts are launched from the host;
    padded to a capacity they are captured too."""
    for cf, changes in ((None, False), (1.0, True)):
        m = _model(512, MoeSpec(experts=8, top_k=2, expert_ffn_hidden=1024, capacity_factor=cf))
        i = next(i for i, l in enumerate(m.layers) if l.experts)
        eager, graphed = layer_times(m, HOPPER, 1, "bf16")[i], layer_times(m, HOPPER, 1, "bf16", GRAPHS)[i]
        assert (graphed.total_s < eager.total_s) is changes
