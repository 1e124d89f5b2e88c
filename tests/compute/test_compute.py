"""The roofline compute model: hand-checked layers, monotonicity, calibration overrides, optimizer step."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from simdist import compute as C
from simdist.compute import ComputeCalibration, LayerTime, forward_backward_s, layer_times, optimizer_step_time
from simdist.workload import get_model, model_from_layers, parametric_gpt
from .gpus import A100_80GB, V100_16GB, gpu

LAUNCH = C.DEFAULT_LAUNCH_OVERHEAD_S


def _two_layer_model():
    return model_from_layers([
        {"name": "fc1", "kind": "linear", "params": 1000, "fwd_flops": 1e9, "input_elems": 100, "output_elems": 10},
        {"name": "fc2", "kind": "linear", "params": 1000, "fwd_flops": 1e9, "input_elems": 10, "output_elems": 100},
    ], "two")


def test_compute_bound_layer_by_hand() -> None:
    g = gpu(fp32=10e12, efficiency={"fp32": 0.5})
    times = layer_times(_two_layer_model(), g, batch=4, precision="fp32")
    # 4e9 FLOPs at 10 TFLOP/s x 0.5 x linear factor 1.0 = 0.8 ms, far above the bytes term
    assert times[0].fwd_s == pytest.approx(4e9 / 5e12 + LAUNCH)
    assert times[1].fwd_s == pytest.approx(4e9 / 5e12 + LAUNCH)
    # first layer: weight gradient only (1 x fwd); later layers: input + weight gradient (2 x fwd)
    assert times[0].bwd_s == pytest.approx(4e9 / 5e12 + LAUNCH)
    assert times[1].bwd_s == pytest.approx(2 * 4e9 / 5e12 + 2 * LAUNCH)


def test_memory_bound_layer_by_hand() -> None:
    model = model_from_layers([
        {"name": "fc", "kind": "linear", "params": 10, "fwd_flops": 10, "input_elems": 1, "output_elems": 1},
        {"name": "relu", "kind": "activation", "params": 0, "fwd_flops": 1e6, "input_elems": 1e6,
         "output_elems": 1e6, "saved_elems": 1e6},
    ], "m")
    g = gpu(bandwidth_Bps=1e12)
    t = layer_times(model, g, batch=2, precision="fp16")[1]
    bw = 1e12 * C.DEFAULT_MEMORY_EFFICIENCY
    assert t.fwd_s == pytest.approx(2 * 2e6 * 2 / bw + LAUNCH)  # read + write 2e6 fp16 elements
    assert t.bwd_s == pytest.approx(2 * 3e6 * 2 / bw + LAUNCH)  # grad out + saved in, write grad in


def test_layers_before_first_trainable_have_no_backward() -> None:
    model = model_from_layers([
        {"name": "norm_input", "kind": "norm", "params": 0, "fwd_flops": 100, "input_elems": 100, "output_elems": 100},
        {"name": "fc", "kind": "linear", "params": 100, "fwd_flops": 2e4, "input_elems": 100, "output_elems": 100},
    ], "m")
    times = layer_times(model, gpu(), batch=1, precision="fp32")
    assert times[0].bwd_s == 0.0
    assert times[1].bwd_s > 0.0


def test_calibration_overrides_gpu_efficiency_and_defaults() -> None:
    model = _two_layer_model()
    g = gpu(key="g1", fp32=10e12, efficiency={"fp32": 0.5})
    assert C.matmul_efficiency(g, "fp32") == 0.5
    assert C.matmul_efficiency(gpu(key="bare"), "fp16") == C.DEFAULT_DTYPE_EFFICIENCY["fp16"]
    cal = ComputeCalibration(efficiency={"g1": {"fp32": 0.25}}, launch_overhead_s=0.0)
    assert C.matmul_efficiency(g, "fp32", cal) == 0.25
    t = layer_times(model, g, 4, "fp32", cal)
    assert t[0].fwd_s == pytest.approx(4e9 / 2.5e12)
    # a wildcard applies to other GPUs, the GPU-specific entry wins
    cal2 = ComputeCalibration(efficiency={"*": {"fp32": 0.1}, "g1": {"fp32": 0.4}})
    assert C.matmul_efficiency(g, "fp32", cal2) == 0.4
    assert C.matmul_efficiency(gpu(key="other"), "fp32", cal2) == 0.1
    # kind factor scales the matmul efficiency
    cal3 = ComputeCalibration(kind_factor={"linear": 0.5})
    assert C.efficiency("linear", g, "fp32", cal3) == pytest.approx(0.25)


@pytest.mark.parametrize("bad", [
    dict(efficiency={"g": {"fp16": 1.5}}), dict(kind_factor={"conv": 0.0}), dict(memory_efficiency={"*": -1}),
    dict(launch_overhead_s=-1e-6),
])
def test_calibration_rejects_bad_fractions(bad: dict) -> None:
    with pytest.raises(ValueError):
        ComputeCalibration(**bad)


def test_mixed_precision_is_faster_on_tensor_cores() -> None:
    m = get_model("resnet50")
    fp32 = sum(t.total_s for t in layer_times(m, A100_80GB, 64, "fp32"))
    fp16 = sum(t.total_s for t in layer_times(m, A100_80GB, 64, "fp16"))
    bf16 = sum(t.total_s for t in layer_times(m, A100_80GB, 64, "bf16"))
    assert fp16 < fp32 / 2
    assert bf16 == pytest.approx(fp16)


def test_bf16_falls_back_to_fp16_peak() -> None:
    m = _two_layer_model()
    assert layer_times(m, V100_16GB, 8, "bf16") == layer_times(m, V100_16GB, 8, "fp16")


def test_gpt_iteration_is_near_closed_form_when_compute_bound() -> None:
    m = parametric_gpt(4, 1024, 16, 1000, 512)
    eff = C.DEFAULT_DTYPE_EFFICIENCY["fp16"]
    fwd, bwd = forward_backward_s(layer_times(m, A100_80GB, 16, "fp16"))
    linear = sum(l.fwd_flops for l in m.layers if l.kind == "linear") * 16
    # matmuls alone at the linear efficiency give a lower bound on the forward pass
    assert fwd > linear / (312e12 * eff)
    assert bwd > fwd  # backward is about twice the forward


@settings(max_examples=40, deadline=None)
@given(key=st.sampled_from(["resnet50", "gpt2", "vit-b16", "alexnet"]), batch=st.integers(1, 64),
       speedup=st.floats(1.0, 8.0), bw_up=st.floats(1.0, 8.0), precision=st.sampled_from(["fp32", "fp16"]))
def test_faster_gpu_is_never_slower(key: str, batch: int, speedup: float, bw_up: float, precision: str) -> None:
    m = get_model(key)
    slow = gpu(fp32=15e12, fp16=120e12, bandwidth_Bps=0.9e12)
    fast = gpu(fp32=15e12 * speedup, fp16=120e12 * speedup, bandwidth_Bps=0.9e12 * bw_up)
    for a, b in zip(layer_times(m, slow, batch, precision), layer_times(m, fast, batch, precision)):
        assert b.fwd_s <= a.fwd_s and b.bwd_s <= a.bwd_s


@settings(max_examples=40, deadline=None)
@given(key=st.sampled_from(["resnet50", "gpt2", "inception-v3", "bert-base"]), batch=st.integers(1, 128),
       extra=st.integers(1, 64), precision=st.sampled_from(["fp32", "fp16", "bf16"]))
def test_more_batch_never_takes_less_time(key: str, batch: int, extra: int, precision: str) -> None:
    m = get_model(key)
    small = sum(t.total_s for t in layer_times(m, A100_80GB, batch, precision))
    big = sum(t.total_s for t in layer_times(m, A100_80GB, batch + extra, precision))
    assert big >= small
    # and the per-sample time never grows with batch (fixed costs amortise)
    assert big / (batch + extra) <= small / batch * (1 + 1e-12)


def test_bad_inputs() -> None:
    m = _two_layer_model()
    with pytest.raises(ValueError, match="batch"):
        layer_times(m, A100_80GB, 0, "fp16")
    with pytest.raises(ValueError, match="precision"):
        layer_times(m, A100_80GB, 1, "int4")
    with pytest.raises(ValueError, match="optimizer"):
        optimizer_step_time(10, A100_80GB, "adagrad", "fp32")


@pytest.mark.parametrize("optimizer,precision,grad,per_param", [
    ("sgd", "fp32", "fp32", 12), ("momentum", "fp32", "fp32", 20), ("adam", "fp32", "fp32", 28),
    ("adam", "fp16", "fp16", 28), ("adam", "bf16", "fp32", 30),
])
def test_optimizer_step_streams_its_bytes(optimizer: str, precision: str, grad: str, per_param: int) -> None:
    g = gpu(bandwidth_Bps=1e12)
    n = 10**9
    expected = n * per_param / (1e12 * C.DEFAULT_MEMORY_EFFICIENCY) + LAUNCH
    assert C.optimizer_bytes_per_param(optimizer, precision, grad) == per_param
    assert optimizer_step_time(n, g, optimizer, precision, grad) == pytest.approx(expected)


def test_optimizer_step_ordering_and_zero() -> None:
    n = 25_557_032
    times = [optimizer_step_time(n, A100_80GB, o, "fp32") for o in ("sgd", "momentum", "adam")]
    assert times == sorted(times) and times[0] < times[2]
    assert optimizer_step_time(0, A100_80GB, "adam", "fp32") == 0.0
    assert optimizer_step_time(n, V100_16GB, "adam", "fp32") > optimizer_step_time(n, A100_80GB, "adam", "fp32")


def test_layer_time_total() -> None:
    assert LayerTime(1.0, 2.0).total_s == 3.0


def test_an_unfused_optimizer_streams_every_op_of_its_update():
    """One kernel per elementwise op (training.optimizer_kernels: unfused): Adam with decoupled weight decay is
    17 ops, 37 fp32 element reads and writes plus two reads of the gradient, against one fused pass."""
    from simdist.compute import optimizer_bytes_per_param, optimizer_step_time
    from simdist.io.catalog import gpus

    assert optimizer_bytes_per_param("adam", "fp32") == 28
    assert optimizer_bytes_per_param("adam", "fp32", kernels="unfused") == 37 * 4 + 2 * 4
    assert optimizer_bytes_per_param("adam", "fp16", "fp32", kernels="unfused") == 156 + 4 + 2  # + the fp16 copy
    assert optimizer_bytes_per_param("sgd", "fp32", kernels="unfused") == 28
    assert optimizer_bytes_per_param("momentum", "fp32", kernels="unfused") == 56
    v100 = gpus()["v100-sxm2-16gb"]
    fused = optimizer_step_time(336_000_000, v100, "adam", "fp16")
    unfused = optimizer_step_time(336_000_000, v100, "adam", "fp16", kernels="unfused")
    assert unfused / fused == pytest.approx(162 / 30, rel=0.05)
    with pytest.raises(ValueError, match="kernels"):
        optimizer_bytes_per_param("adam", "fp32", kernels="foreach")


def test_lamb_streams_adams_update_plus_its_trust_ratio_pass():
    """LAMB (DeepLearningExamples' TensorFlow LAMBOptimizer): Adam's moments and two per-tensor norms. Unfused it
    is 21 ops, 43 fp32 element reads and writes plus two gradient reads; fused, two passes (the update written
    and read back once the ratio is known); its state is Adam's two fp32 moments."""
    from simdist.compute import OPTIMIZER_STATES, optimizer_bytes_per_param

    assert optimizer_bytes_per_param("lamb", "fp32", kernels="unfused") == 43 * 4 + 2 * 4
    assert optimizer_bytes_per_param("lamb", "fp32") == optimizer_bytes_per_param("adam", "fp32") + 8
    assert OPTIMIZER_STATES["lamb"] == OPTIMIZER_STATES["adam"] == 2
