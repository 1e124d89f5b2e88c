"""Layers that list their kernels are timed as the sum of one roofline per kernel; gradient accumulation into a
buffer costs a streaming add per gradient tensor."""
from __future__ import annotations

from dataclasses import replace

import pytest

from simdist import compute as C
from simdist.compute import layer_times
from simdist.workload.specs import Kernel, LayerSpec, ModelSpec
from .gpus import gpu

LAUNCH = C.DEFAULT_LAUNCH_OVERHEAD_S
MEM = C.DEFAULT_MEMORY_EFFICIENCY


def _model(*layers: LayerSpec) -> ModelSpec:
    head = LayerSpec("fc", "linear", 100, 200.0, 10, 10, 10, ((10, 10),))
    return ModelSpec("k", "custom", (head, *layers))


def test_kernels_are_summed_each_on_its_own_roofline() -> None:
    g = gpu(fp16=100e12, bandwidth_Bps=1e12, efficiency={"fp16": 0.5})
    gemm = Kernel("gemm", "attention", 1e9, 1e3)  # compute-bound: 1e9 / (100e12 x 0.5 x attention's factor)
    soft = Kernel("softmax", "activation", 1e3, 1e6, 5e5)  # memory-bound: (1e6 x 2 B + 5e5 B) / (1e12 x 0.8)
    layer = LayerSpec("core", "attention", 0, 1e9 + 1e3, 10, 10, 10, (), (gemm, soft), (soft, gemm, gemm))
    t = layer_times(_model(layer), g, batch=2, precision="fp16")[1]
    g_s = 2e9 / (50e12 * C.DEFAULT_KIND_FACTOR["attention"])
    s_s = 2 * (1e6 * 2 + 5e5) / (1e12 * MEM)
    assert t.fwd_s == pytest.approx(g_s + s_s + 2 * LAUNCH)
    assert t.bwd_s == pytest.approx(s_s + 2 * g_s + 3 * LAUNCH)
    # one roofline over the same work would hide the softmax under the GEMM
    merged = LayerSpec("core", "attention", 0, 1e9 + 1e3, 1e6, 0, 1e6, ())
    assert layer_times(_model(merged), g, batch=2, precision="fp16")[1].fwd_s < t.fwd_s


def test_tensor_parallel_shrink_applies_to_the_gemm_kernels_only() -> None:
    g = gpu(fp16=100e12, bandwidth_Bps=1e12, efficiency={"fp16": 0.5})
    gemm, soft = Kernel("gemm", "attention", 1e9, 0.0), Kernel("softmax", "activation", 0.0, 1e6)
    layer = LayerSpec("core", "attention", 0, 1e9, 10, 10, 10, (), (gemm, soft))
    one = layer_times(_model(layer), g, 1, "fp16")[1].fwd_s
    half = layer_times(_model(layer), g, 1, "fp16", efficiency_factors=[1.0, 0.5])[1].fwd_s
    gemm_s = 1e9 / (100e12 * 0.5 * C.DEFAULT_KIND_FACTOR["attention"])
    assert half - one == pytest.approx(gemm_s)


def test_gradient_accumulation_streams_every_weight_gradient_into_the_buffer() -> None:
    g = gpu(bandwidth_Bps=1e12)
    fc = LayerSpec("fc2", "linear", 10**6, 1.0, 1, 1, 1, ((1000, 1000),))
    plain = layer_times(_model(fc), g, 1, "fp16")[1].bwd_s
    fp32 = layer_times(_model(fc), g, 1, "fp16", accumulation_bytes=4)[1].bwd_s
    # read the new fp16 gradient (2 B), read and write the fp32 buffer (8 B), one kernel per tensor
    assert fp32 - plain == pytest.approx(10**6 * 10 / (1e12 * MEM) + LAUNCH)
    assert layer_times(_model(fc), g, 1, "fp16", accumulation_bytes=4)[1].fwd_s == \
        layer_times(_model(fc), g, 1, "fp16")[1].fwd_s
    with pytest.raises(ValueError, match="accumulation_bytes"):
        layer_times(_model(fc), g, 1, "fp16", accumulation_bytes=-1)


def test_batch_norm_reads_its_input_twice_each_way_and_in_place_relu_reads_its_output_in_backward() -> None:
    from simdist.workload.layers import activation, batch_norm, norm

    g = gpu(fp16=1e18, bandwidth_Bps=1e12)  # every kernel memory-bound: time = bytes / (bandwidth x efficiency)
    elems, channels, batch, a = 10**6, 64, 4, 2  # fp16 activations
    bn, relu = batch_norm("bn", elems, channels), activation("relu", elems, saves=False)
    t_bn, t_relu = layer_times(_model(bn, relu), g, batch, "fp16")[1:]
    weights = 2 * channels * a  # weight and bias, read once forward; read and their gradients written backward
    # forward: statistics (read x), normalise (read x, write y); backward: sums (read dy, x), input grad (dy, x, dx)
    assert t_bn.fwd_s == pytest.approx((3 * batch * elems * a + weights) / (1e12 * MEM) + 2 * LAUNCH)
    assert t_bn.bwd_s == pytest.approx((5 * batch * elems * a + 2 * weights) / (1e12 * MEM) + 2 * LAUNCH)
    assert t_relu.bwd_s == pytest.approx(3 * batch * elems * a / (1e12 * MEM) + LAUNCH)  # dy, y in; dx out
    # a row norm (LayerNorm) stays one pass each way; neither changes what is kept for backward
    t_ln = layer_times(_model(norm("ln", elems, channels)), g, batch, "fp16")[1]
    assert t_ln.fwd_s == pytest.approx((2 * batch * elems * a + weights) / (1e12 * MEM) + LAUNCH)
    assert (bn.saved_elems, relu.saved_elems, bn.params) == (elems, 0, 2 * channels)
    assert bn.fwd_flops == norm("n", elems, channels).fwd_flops == sum(k.flops for k in bn.fwd_kernels)


def test_a_3x3_stride_1_convolution_on_cuda_cores_runs_as_winograd() -> None:
    from simdist.workload.layers import Shape, conv
    from .gpus import A100_80GB, V100_16GB

    x = Shape(256, 14, 14)
    c3, _ = conv("c3", x, 256, 3, 1, 1)
    c3s2, _ = conv("c3s2", x, 256, 3, 2, 1)
    c1, _ = conv("c1", x, 256, 1)
    assert (c3.winograd, c3s2.winograd, c1.winograd) == (True, False, False)
    assert c3.fwd_flops == 2.0 * 14 * 14 * 256 * 256 * 9  # the model's FLOPs (MFU) stay the direct convolution's
    g = gpu(fp32=10e12, fp16=100e12, bandwidth_Bps=1e18, efficiency={"fp32": 0.5, "fp16": 0.5})  # compute-bound
    conv_eff = 0.5 * C.DEFAULT_KIND_FACTOR["conv"]

    def times(layer, precision, on=g):
        return layer_times(_model(layer), on, 8, precision)[1]

    fp32 = times(c3, "fp32")
    direct_s = 8 * c3.fwd_flops / (10e12 * conv_eff)
    assert fp32.fwd_s == pytest.approx(direct_s / C.WINOGRAD_SPEEDUP + LAUNCH)
    assert fp32.bwd_s == pytest.approx(2 * direct_s / C.WINOGRAD_SPEEDUP + 2 * LAUNCH)  # both gradients too
    c3s2_direct = 8 * c3s2.fwd_flops / (10e12 * conv_eff)
    assert times(c3s2, "fp32").fwd_s == pytest.approx(c3s2_direct + LAUNCH)  # strided: direct
    assert times(c3, "fp16").fwd_s == pytest.approx(8 * c3.fwd_flops / (100e12 * conv_eff) + LAUNCH)  # tensor cores
    # tf32 runs on A100's tensor cores (implicit GEMM, the mark changes nothing); on a V100, which has no tf32
    # units, as fp32 (Winograd)
    direct = replace(c3, winograd=False)
    assert times(c3, "tf32", A100_80GB).fwd_s == times(direct, "tf32", A100_80GB).fwd_s
    assert times(c3, "tf32", V100_16GB).fwd_s == pytest.approx(times(c3, "fp32", V100_16GB).fwd_s)
    assert times(c3, "fp32", V100_16GB).fwd_s < times(direct, "fp32", V100_16GB).fwd_s
