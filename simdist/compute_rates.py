"""Achieved rates the compute model prices kernels at: bytes per element of each precision, the fraction of peak
FLOP/s large matmuls reach per precision and layer kind, how it falls for small (split or grouped) GEMMs, achieved HBM
bandwidth, per-kernel launch and CUDA-graph overheads, and the calibration and run options that override them
(simdist.compute times layers with them; figures and sources in docs/model.md, "Compute model")."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

from simdist.hardware.specs import GpuSpec
from simdist.low_precision import FP8_RECIPES

# Bytes per element of the compute dtype (weights as the kernels read them) and of saved activations.
DTYPE_BYTES: Mapping[str, float] = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "mxfp8": 1, "nvfp4": 0.5}
# low-precision GEMMs, bf16 tensors between layers (Transformer Engine's recipes)
ACTIVATION_BYTES: Mapping[str, int] = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 2, "mxfp8": 2, "nvfp4": 2}
MIXED_PRECISIONS = frozenset({"fp16", "bf16", "fp8", "mxfp8", "nvfp4"})  # low-precision compute, fp32 master weights
# Precisions whose convolutions run on tensor cores, natively in NHWC: mixed precision, and tf32 (fp32 tensors
# whose convolutions cuDNN runs on Ampere-and-later tensor cores; a GPU without tf32 has no tf32 peak to run).
TENSOR_CORE_PRECISIONS = MIXED_PRECISIONS | {"tf32"}

# Achieved fraction of peak on large matmuls when neither the GpuSpec nor a calibration gives one.
DEFAULT_DTYPE_EFFICIENCY: Mapping[str, float] = {"fp32": 0.75, "tf32": 0.65, "fp16": 0.65, "bf16": 0.65, "fp8": 0.55,
                                                 "mxfp8": 0.55, "nvfp4": 0.55}
# Multiplier of that matmul efficiency per layer kind: convs and attention cores reach less of peak than
# GEMMs; the rest are memory-bound anyway, so their factor rarely matters.
DEFAULT_KIND_FACTOR: Mapping[str, float] = {
    "linear": 1.0, "conv": 0.8, "attention": 0.7, "embedding": 0.5, "norm": 0.5, "pool": 0.5,
    "activation": 0.5, "other": 0.5,
    # an expert's GEMM in a grouped GEMM: as a dense GEMM of its own size (grouped_gemm_factor gives the size);
    # DeepGEMM's grouped GEMMs of 4 x 8192 and 8 x 4096 rows run at 1,288-1,297 TFLOPS against 1,304-1,358 for
    # dense GEMMs of 4096 rows and the same N, K on an H800 (deepseek-ai/DeepGEMM README, "Performance")
    "expert": 1.0,
}
DEFAULT_MEMORY_EFFICIENCY = 0.8  # achieved fraction of HBM bandwidth by streaming kernels
DEFAULT_LAUNCH_OVERHEAD_S = 5e-6  # per kernel: launch plus the idle gap between dependent kernels
# Per kernel replayed from a CUDA graph: no host launch, only the device's gap between dependent kernels. CUDA.jl's
# graphs documentation measures 80 broadcast kernels (an RK4 ODE integration) in 70 us as one graph against 260 us
# launched one by one: 0.875 us per kernel, their execution included (an upper bound on the gap). Host-side
# launches cost 5-20 us each (HolisticTraceAnalysis, "CUDA kernel launch statistics").
GRAPH_KERNEL_GAP_S = 70e-6 / 80

ANY_GPU = "*"  # a calibration entry for every GPU


def _check_fraction(label: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and 0.0 < value <= 1.0):
        raise ValueError(f"{label}: got {value!r}; expected a fraction in (0, 1]")


@dataclass(frozen=True)
class ComputeCalibration:
    """Measured overrides of the compute model's defaults (what `simdist calibrate` fits per GPU and dtype).

    `efficiency[gpu_key][dtype]` is the achieved fraction of peak on matmuls ('*' matches any GPU);
    `kind_factor[kind]` scales it per layer kind (efficiency x factor is capped at 1, so a factor may
    exceed 1); `memory_efficiency[gpu_key]` the HBM fraction; `codec_factor[method]` multiplies the
    compression codec's roofline encode/decode time (measured / predicted, from a codec probe).
    """

    efficiency: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    kind_factor: Mapping[str, float] = field(default_factory=dict)
    memory_efficiency: Mapping[str, float] = field(default_factory=dict)
    launch_overhead_s: float | None = None
    codec_factor: Mapping[str, float] = field(default_factory=dict)
    # How the run executes rather than what was measured (scenario keys, io/resolve.py): Transformer Engine's fp8
    # scaling (workload.fp8_recipe), FP8 attention (workload.fp8_attention), CUDA graphs (training.cuda_graphs)
    fp8_recipe: str = "delayed"
    fp8_attention: bool = False
    cuda_graphs: bool = False

    def codec_cost_factor(self, method: str) -> float:
        """The measured factor on codec `method`'s encode/decode time (1.0 when not measured)."""
        return float(self.codec_factor.get(method, 1.0))

    def __post_init__(self) -> None:
        for gpu, table in self.efficiency.items():
            for dtype, e in table.items():
                _check_fraction(f"efficiency[{gpu}][{dtype}]", e)
        for kind, f in self.kind_factor.items():  # may exceed 1 (a kind beating matmuls): efficiency() caps
            if not (isinstance(f, (int, float)) and 0.0 < f < math.inf):  # efficiency x factor at 1
                raise ValueError(f"kind_factor[{kind}]: got {f!r}; expected a positive factor")
        for gpu, e in self.memory_efficiency.items():
            _check_fraction(f"memory_efficiency[{gpu}]", e)
        for method, f in self.codec_factor.items():
            if not (isinstance(f, (int, float)) and 0.0 < f < math.inf):
                raise ValueError(f"codec_factor[{method}]: got {f!r}; expected a positive factor")
        if self.launch_overhead_s is not None and not self.launch_overhead_s >= 0:
            raise ValueError(f"launch_overhead_s: got {self.launch_overhead_s!r}; expected >= 0")
        if self.fp8_recipe not in FP8_RECIPES:
            raise ValueError(f"fp8_recipe: got {self.fp8_recipe!r}; expected one of {', '.join(FP8_RECIPES)}")

    def __hash__(self) -> int:
        """By value, its tables' items included (so per-layer costs can be memoised on it: tensor_parallel)."""
        return hash((tuple(sorted((g, tuple(sorted(t.items()))) for g, t in self.efficiency.items())),
                     tuple(sorted(self.kind_factor.items())), tuple(sorted(self.memory_efficiency.items())),
                     self.launch_overhead_s, tuple(sorted(self.codec_factor.items())), self.fp8_recipe,
                     self.fp8_attention, self.cuda_graphs))


_NO_CALIBRATION = ComputeCalibration()


def _check_precision(precision: str) -> str:
    p = str(precision)
    if p not in DTYPE_BYTES:
        raise ValueError(f"precision: got {precision!r}; expected one of {', '.join(DTYPE_BYTES)}")
    return p


def matmul_efficiency(gpu: GpuSpec, precision: str, calibration: ComputeCalibration | None = None) -> float:
    """Achieved fraction of peak on large matmuls: calibration, else the GpuSpec's figure, else the default; for
    the units that compute `precision` on this GPU (GpuSpec.runs_as: tf32 on a V100 is an fp32 matmul)."""
    p = gpu.runs_as(_check_precision(precision))
    cal = calibration or _NO_CALIBRATION
    for key in (gpu.key, ANY_GPU):
        if p in cal.efficiency.get(key, {}):
            return cal.efficiency[key][p]
    if p in gpu.compute_efficiency:
        return gpu.compute_efficiency[p]
    return DEFAULT_DTYPE_EFFICIENCY[p]


def efficiency(kind: str, gpu: GpuSpec, precision: str, calibration: ComputeCalibration | None = None) -> float:
    """Achieved fraction of peak FLOP/s for a layer of `kind` (unknown kinds count as 'other')."""
    cal = calibration or _NO_CALIBRATION
    factor = cal.kind_factor.get(kind, DEFAULT_KIND_FACTOR.get(kind, DEFAULT_KIND_FACTOR["other"]))
    return min(1.0, matmul_efficiency(gpu, precision, cal) * factor)


def memory_bandwidth_Bps(gpu: GpuSpec, calibration: ComputeCalibration | None = None) -> float:
    """Achieved HBM bandwidth: line rate x (calibrated or default) memory efficiency."""
    cal = calibration or _NO_CALIBRATION
    eff = cal.memory_efficiency.get(gpu.key, cal.memory_efficiency.get(ANY_GPU, DEFAULT_MEMORY_EFFICIENCY))
    return gpu.memory_bandwidth_Bps * eff


def launch_overhead_s(calibration: ComputeCalibration | None = None) -> float:
    """Per kernel launched from the host: the calibrated figure, else DEFAULT_LAUNCH_OVERHEAD_S."""
    cal = calibration or _NO_CALIBRATION
    return DEFAULT_LAUNCH_OVERHEAD_S if cal.launch_overhead_s is None else cal.launch_overhead_s


def layer_kernel_overhead_s(calibration: ComputeCalibration | None = None, graphed: bool = True) -> float:
    """Per kernel of a layer's forward or backward: a host launch, or with CUDA graphs (`cuda_graphs`, a layer
    that can be captured: `graphed`) the device's gap between replayed kernels, GRAPH_KERNEL_GAP_S (never more
    than a launch)."""
    cal = calibration or _NO_CALIBRATION
    host = launch_overhead_s(cal)
    return min(GRAPH_KERNEL_GAP_S, host) if cal.cuda_graphs and graphed else host


# A matmul of W FLOPs is modelled as W / (peak x e) plus a fixed ramp GEMM_RAMP_S (the last partial wave of
# thread blocks, prologue and epilogue, SMs left idle by too few output tiles) run at full rate, so its
# efficiency is e x W / (W + peak x e x GEMM_RAMP_S): saturating in the per-GPU work. An assumption of the same
# shape as the size curves of NVIDIA's "Matrix Multiplication Background" guide (efficiency rising with
# M x N x K and saturating); a GEMM reaches half its large-matrix throughput at GEMM_RAMP_S of work.
GEMM_RAMP_S = 4e-6
GEMM_KINDS = frozenset({"linear", "conv", "attention", "expert"})  # matmul-like layers whose efficiency depends on size


def gemm_saturation(flops: float, gpu: GpuSpec, precision: str, calibration: ComputeCalibration | None = None,
                    ramp_s: float = GEMM_RAMP_S) -> float:
    """Fraction of its large-matrix efficiency a matmul of `flops` FLOPs reaches: W / (W + peak x e x ramp)."""
    if flops < 0:
        raise ValueError(f"flops: got {flops!r}; expected >= 0")
    if flops == 0:
        return 1.0
    p = _check_precision(precision)
    half = gpu.flops(p) * matmul_efficiency(gpu, p, calibration) * ramp_s
    return flops / (flops + half)


def gemm_shrink_factor(full_flops: float, split_flops: float, gpu: GpuSpec, precision: str,
                       calibration: ComputeCalibration | None = None, ramp_s: float = GEMM_RAMP_S) -> float:
    """Efficiency of a matmul cut down from `full_flops` to `split_flops` FLOPs relative to the uncut one.

    The compute model's (calibrated) efficiency describes the model's own, uncut matrices, so only the
    ratio is applied: 1 when nothing is split, falling as the split matrices shrink.
    """
    if not 0 <= split_flops <= full_flops:
        raise ValueError(f"split_flops: got {split_flops!r}; expected 0 <= split <= full ({full_flops!r})")
    if split_flops == full_flops or split_flops == 0:
        return 1.0
    return gemm_saturation(split_flops, gpu, precision, calibration, ramp_s) / \
        gemm_saturation(full_flops, gpu, precision, calibration, ramp_s)


def grouped_gemm_factor(flops: float, experts: int, gpu: GpuSpec, precision: str,
                        calibration: ComputeCalibration | None = None) -> float:
    """Efficiency of a grouped GEMM of `flops` FLOPs over `experts` equal groups relative to one GEMM of the same
    work: each expert's GEMM (tokens_per_expert rows) is a matmul of flops / experts, with the size curve of
    gemm_shrink_factor (the ramp per GEMM). Checked against DeepGEMM's published grouped and dense GEMMs
    (tests/compute/test_grouped_gemm.py)."""
    if experts < 1:
        raise ValueError(f"experts: got {experts!r}; expected >= 1")
    return gemm_shrink_factor(flops, flops / experts, gpu, precision, calibration)
