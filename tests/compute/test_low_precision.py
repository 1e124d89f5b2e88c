"""Transformer Engine's recipes in the compute model: fp8 runs only the linear GEMMs it wraps, plus its quantize
kernels; mxfp8 and nvfp4 only where the GPU has them (simdist.low_precision, compute.layer_times)."""
from __future__ import annotations

import pytest

from simdist.compute import DEFAULT_LAUNCH_OVERHEAD_S, DEFAULT_MEMORY_EFFICIENCY, layer_times
from simdist.hardware.specs import GpuSpec
from simdist.low_precision import RECIPES, cast_cost, layer_precision, weight_elems
from simdist.workload.transformer import parametric_gpt

T = 1e12
BW = 4e12
# A Blackwell-like part: fp8 = mxfp8 at twice bf16, nvfp4 at twice fp8; efficiencies distinct per dtype, so a test
# can tell which peak and efficiency a layer ran at
BLACKWELL = GpuSpec("bw", "bw", "nvidia", {"fp32": 80 * T, "fp16": 2000 * T, "bf16": 2000 * T, "fp8": 4000 * T,
                                           "mxfp8": 4000 * T, "nvfp4": 8000 * T}, 180 * 2**30, BW, 1000.0, 1.0,
                    compute_efficiency={"fp32": 0.8, "fp16": 0.7, "bf16": 0.7, "fp8": 0.6, "mxfp8": 0.6,
                                        "nvfp4": 0.5})
HOPPER = GpuSpec("hop", "hop", "nvidia", {"fp32": 67 * T, "fp16": 1000 * T, "bf16": 1000 * T, "fp8": 2000 * T},
                 80 * 2**30, BW, 700.0, 1.0, compute_efficiency={"fp32": 0.8, "fp16": 0.7, "bf16": 0.7, "fp8": 0.6})
AMPERE = GpuSpec("amp", "amp", "nvidia", {"fp32": 19.5 * T, "fp16": 312 * T, "bf16": 312 * T}, 80 * 2**30, 2e12,
                 400.0, 1.0, compute_efficiency={"fp32": 0.9, "fp16": 0.8, "bf16": 0.8})


def _model(seq: int = 2048):
    return parametric_gpt(2, 4096, 32, 32000, seq, 11008, name="tiny-llama", kv_heads=8, positions="rotary",
                          mlp="swiglu", norm="rmsnorm", bias=False, tied_head=False, flash_attention=True,
                          dropout=0.0)


def test_only_the_blocks_linear_layers_run_in_the_recipe() -> None:
    m = _model()
    low = {l.name for l in m.layers if layer_precision(l, "fp8") == "fp8"}
    assert low == {l.name for l in m.layers if l.kind == "linear" and l.name != "lm_head"}
    assert all(layer_precision(l, "bf16") == "bf16" for l in m.layers)
    assert layer_precision(next(l for l in m.layers if l.name == "lm_head"), "nvfp4") == "bf16"


def test_fp8_changes_only_the_gemms_it_runs() -> None:
    """Every layer but the blocks' linear layers takes exactly its bf16 time under fp8; a linear layer takes its
    fp8 GEMM plus the quantize kernels, by hand."""
    m, b = _model(), 1
    bf16, fp8 = layer_times(m, HOPPER, b, "bf16"), layer_times(m, HOPPER, b, "fp8")
    bw, launch = BW * DEFAULT_MEMORY_EFFICIENCY, DEFAULT_LAUNCH_OVERHEAD_S
    checked = 0
    for i, layer in enumerate(m.layers):
        if layer_precision(layer, "fp8") == "bf16":
            assert fp8[i] == bf16[i], layer.name
            continue
        # fp8 GEMM: 2000 TFLOP/s x 0.6; compute-bound at 2048 tokens x 4096 wide
        gemm_fwd = layer.fwd_flops * b / (2000 * T * 0.6)
        x, w = layer.input_elems * b, weight_elems(layer)
        cast_fwd = (x + w) * (2 + 2 * 1) / bw + 2 * launch  # read bf16, write fp8 and its transpose; X and W
        assert fp8[i].fwd_s == pytest.approx(gemm_fwd + launch + cast_fwd, rel=1e-12), layer.name
        gemm_bwd = 2 * layer.fwd_flops * b / (2000 * T * 0.6)
        cast_bwd = layer.output_elems * b * 4 / bw + launch  # dY
        assert fp8[i].bwd_s == pytest.approx(gemm_bwd + 2 * launch + cast_bwd, rel=1e-12), layer.name
        assert fp8[i].total_s < bf16[i].total_s  # twice the GEMM rate outweighs the casts at this size
        checked += 1
    assert checked == 2 * 4  # qkv, proj, gate_up, down per block


def test_cast_bytes_by_recipe() -> None:
    """Per element: read 2 B of bf16 (nvfp4: twice, its amax pass) and write two copies with their scales."""
    assert RECIPES["fp8"].read_bytes_per_elem + RECIPES["fp8"].written_bytes_per_elem == 2 + 2 * 1
    assert RECIPES["mxfp8"].written_bytes_per_elem == pytest.approx(2 * (1 + 1 / 32))
    assert RECIPES["nvfp4"].read_bytes_per_elem + RECIPES["nvfp4"].written_bytes_per_elem == \
        pytest.approx(4 + 2 * (0.5 + 1 / 16))
    layer = next(l for l in _model().layers if l.name == "blocks.0.mlp.down")
    c = cast_cost(layer, 2, RECIPES["nvfp4"], weight_cast_share=0.25)
    per = 4 + 2 * (0.5 + 1 / 16)
    assert c.fwd_bytes == pytest.approx((2 * 2048 * 11008 + 0.25 * 4096 * 11008) * per)
    assert c.bwd_bytes == pytest.approx(2 * 2048 * 4096 * per)
    assert c.fwd_kernels == pytest.approx(2 * 1.25) and c.bwd_kernels == 2
    with pytest.raises(ValueError, match="weight_cast_share"):
        cast_cost(layer, 1, RECIPES["fp8"], weight_cast_share=1.5)


def test_cached_weights_cast_once_per_step() -> None:
    m = _model()
    every, once_in_8 = layer_times(m, HOPPER, 1, "fp8"), layer_times(m, HOPPER, 1, "fp8", weight_cast_share=1 / 8)
    bw = BW * DEFAULT_MEMORY_EFFICIENCY
    for i, layer in enumerate(m.layers):
        saved = (7 / 8) * (weight_elems(layer) * 4 / bw + DEFAULT_LAUNCH_OVERHEAD_S) \
            if layer_precision(layer, "fp8") == "fp8" else 0.0
        assert every[i].fwd_s - once_in_8[i].fwd_s == pytest.approx(saved, rel=1e-9, abs=1e-15)


def test_block_scaled_recipes_on_blackwell() -> None:
    """mxfp8 runs at the fp8 rate with its block scales written; nvfp4 at twice it, with an amax pass."""
    m = _model()
    fp8, mx, nv = (layer_times(m, BLACKWELL, 1, p) for p in ("fp8", "mxfp8", "nvfp4"))
    bw = BW * DEFAULT_MEMORY_EFFICIENCY
    for i, layer in enumerate(m.layers):
        if layer_precision(layer, "fp8") == "bf16":
            assert fp8[i] == mx[i] == nv[i]
            continue
        x, w, dy = layer.input_elems, weight_elems(layer), layer.output_elems
        assert mx[i].fwd_s - fp8[i].fwd_s == pytest.approx((x + w) * 2 / 32 / bw, rel=1e-9)  # the E8M0 scales
        assert mx[i].bwd_s - fp8[i].bwd_s == pytest.approx(dy * 2 / 32 / bw, rel=1e-9)
        assert nv[i].total_s < mx[i].total_s  # at these sizes the 2x GEMM rate wins over the amax pass


def test_fp8_on_a_gpu_without_fp8_runs_its_fallback_without_casts() -> None:
    """An A100 has no fp8 units: the linear layers run at its fp16 rate, no quantize kernels, the rest in bf16."""
    m = _model()
    fp8, bf16 = layer_times(m, AMPERE, 1, "fp8"), layer_times(m, AMPERE, 1, "bf16")
    for i, layer in enumerate(m.layers):
        if layer_precision(layer, "fp8") == "bf16":
            assert fp8[i] == bf16[i]
        else:  # compute-bound: the same rate; only the weight bytes the fallback reads differ
            assert fp8[i].fwd_s == pytest.approx(bf16[i].fwd_s, rel=1e-9)


def test_block_scaled_precision_on_hopper_has_no_fallback() -> None:
    with pytest.raises(KeyError):
        layer_times(_model(), HOPPER, 1, "mxfp8")
