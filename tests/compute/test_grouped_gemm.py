"""Grouped-GEMM efficiency of MoE experts against DeepGEMM's published GEMM throughput (nothing fitted: the ramp
GEMM_RAMP_S and the H100's catalog efficiency predate these checks), and the experts layer's compute."""
from __future__ import annotations

from dataclasses import replace

import pytest

from simdist.compute import (DTYPE_BYTES, gemm_saturation, grouped_gemm_factor, layer_times, matmul_efficiency,
                             memory_bandwidth_Bps)
from simdist.io.catalog import gpus
from simdist.workload import get_model, parametric_gpt
from simdist.workload.specs import MoeSpec

H100 = gpus()["h100-sxm5-80gb"]  # the H800 of DeepGEMM's table has the H100 SXM's compute and HBM (not its NVLink)


def _gemm_tflops(m: int, n: int, k: int, groups: int = 1) -> float:
    """simdist's fp8 throughput for `groups` GEMMs of m x k by k x n: the roofline of the work at the catalog's
    efficiency times the size factor of one group's GEMM, against reading A and B in fp8 and writing D in bf16."""
    flops = 2.0 * m * n * k * groups
    eff = matmul_efficiency(H100, "fp8") * gemm_saturation(flops / groups, H100, "fp8")
    moved = groups * (m * k * DTYPE_BYTES["fp8"] + n * k * DTYPE_BYTES["fp8"] + m * n * 2)
    t = max(flops / (H100.flops("fp8") * eff), moved / memory_bandwidth_Bps(H100))
    return flops / t / 1e12


# deepseek-ai/DeepGEMM README (first release), "Performance", H800, TFLOPS: normal GEMMs and grouped GEMMs
# (contiguous layout), N = 4096, K = 7168
DEEPGEMM_DENSE = {64: 287, 128: 533, 4096: 1304}
DEEPGEMM_GROUPED = {(4, 8192): 1297, (8, 4096): 1288}


@pytest.mark.parametrize("m", sorted(DEEPGEMM_DENSE))
def test_gemm_size_model_within_25_percent_of_deepgemm(m: int) -> None:
    assert _gemm_tflops(m, 4096, 7168) == pytest.approx(DEEPGEMM_DENSE[m], rel=0.25)


@pytest.mark.parametrize("groups,m", sorted(DEEPGEMM_GROUPED))
def test_grouped_gemm_of_large_groups_runs_as_fast_as_dense(groups: int, m: int) -> None:
    """Large groups lose nothing to grouping, in DeepGEMM's table and in the model (to 3 %)."""
    measured = DEEPGEMM_GROUPED[(groups, m)] / DEEPGEMM_DENSE[4096]
    assert _gemm_tflops(m, 4096, 7168, groups) / _gemm_tflops(4096, 4096, 7168) == pytest.approx(measured, abs=0.03)


def test_grouped_gemm_factor_is_the_size_factor_of_one_group() -> None:
    w = 2.0 * 8 * 4096 * 4096 * 7168  # 8 experts' GEMMs of 4096 rows
    f = grouped_gemm_factor(w, 8, H100, "bf16")
    assert f == pytest.approx(gemm_saturation(w / 8, H100, "bf16") / gemm_saturation(w, H100, "bf16"))
    assert grouped_gemm_factor(w, 1, H100, "bf16") == 1.0
    assert grouped_gemm_factor(w, 256, H100, "bf16") < grouped_gemm_factor(w, 8, H100, "bf16") < 1.0
    with pytest.raises(ValueError):
        grouped_gemm_factor(w, 0, H100, "bf16")


def _experts_time(model, batch: int = 1, precision: str = "bf16") -> tuple[float, float]:
    i = next(i for i, l in enumerate(model.layers) if l.experts)
    t = layer_times(model, H100, batch, precision)[i]
    return t.fwd_s, t.bwd_s


def _moe(experts: int, top_k: int, ffn: int, capacity_factor: float | None = None):
    moe = MoeSpec(experts=experts, top_k=top_k, expert_ffn_hidden=ffn, capacity_factor=capacity_factor)
    return parametric_gpt(1, 2048, 16, 1000, 2048, 4096, mlp="swiglu", norm="rmsnorm", bias=False, tied_head=False,
                          positions="rotary", dropout=0.0, flash_attention=True, moe=moe)


def test_same_active_work_in_more_smaller_experts_runs_slower() -> None:
    """8 experts of 1024 top-2 and 64 experts of 128 top-16 do the same FLOPs; the fine-grained ones' GEMMs have
    an eighth of the rows each (and 8x the SwiGLU and permute traffic per FLOP is the same), so they run slower."""
    coarse, fine = _moe(8, 2, 1024), _moe(64, 16, 128)
    c = next(l for l in coarse.layers if l.experts)
    f = next(l for l in fine.layers if l.experts)
    assert sum(k.flops for k in c.fwd_kernels if k.kind == "expert") == \
        sum(k.flops for k in f.fwd_kernels if k.kind == "expert")
    assert sum(_experts_time(fine)) > sum(_experts_time(coarse))


def test_capacity_factor_pads_the_expert_gemms() -> None:
    dropless, padded = _experts_time(_moe(8, 2, 1024)), _experts_time(_moe(8, 2, 1024, 1.25))
    assert padded[0] > dropless[0] and padded[1] > dropless[1]
    # model FLOPs (MFU) stay the routed tokens' work
    assert _moe(8, 2, 1024, 1.25).fwd_flops == _moe(8, 2, 1024).fwd_flops


def test_fp8_runs_the_expert_gemms_and_casts_their_operands() -> None:
    """Under fp8 the experts' GEMMs run at the fp8 peak: with a batch large enough to amortise the weight casts the
    layer is faster than in bf16; the router stays in bf16 (no TE module)."""
    m = get_model("mixtral-8x7b", seq_len=4096)
    bf16, fp8 = _experts_time(m, 8, "bf16"), _experts_time(m, 8, "fp8")
    assert sum(fp8) < sum(bf16)
    router = next(i for i, l in enumerate(m.layers) if l.name == "blocks.0.router")
    assert layer_times(m, H100, 8, "fp8")[router] == layer_times(m, H100, 8, "bf16")[router]
    # the weight casts: a share of 0 (weights cached from an earlier micro-batch) is faster in forward only
    i = next(i for i, l in enumerate(m.layers) if l.experts)
    cached = layer_times(m, H100, 8, "fp8", weight_cast_share=0.0)[i]
    assert cached.fwd_s < fp8[0] and cached.bwd_s == pytest.approx(fp8[1])


def test_experts_layer_reads_its_weights_once_per_pass() -> None:
    """The weights are spread over the GEMM kernels by FLOPs. On 16 tokens every expert GEMM is bound by reading
    its weights, so doubling the weights adds exactly their bytes once to the forward (and twice to backward: the
    dgrad GEMMs read them, the wgrad GEMMs write their gradients)."""
    moe = MoeSpec(experts=8, top_k=2, expert_ffn_hidden=1024)
    m = parametric_gpt(1, 2048, 16, 1000, 16, 4096, mlp="swiglu", norm="rmsnorm", bias=False, tied_head=False,
                       positions="rotary", dropout=0.0, flash_attention=True, moe=moe)
    more = replace(m, layers=tuple(replace(l, params=l.params * 2) if l.experts else l for l in m.layers))
    extra = m.layers[next(i for i, l in enumerate(m.layers) if l.experts)].params * 2 / memory_bandwidth_Bps(H100)
    (f0, b0), (f1, b1) = _experts_time(m), _experts_time(more)
    assert f1 - f0 == pytest.approx(extra, rel=1e-9)
    assert b1 - b0 == pytest.approx(2 * extra, rel=1e-9)
