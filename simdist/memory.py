"""Per-GPU memory estimate: weights, gradients, optimizer states, activations, buffers, workspace.

Mixed precision follows the ZeRO paper's accounting (Rajbhandari et al. 2020, section 3.1): a low-precision
copy of the weights, gradients in `grad_dtype`, and an fp32 master copy plus fp32 optimizer states, so Adam
with fp16 weights and gradients costs 2 + 2 + (4 + 4 + 4) = 16 bytes per parameter. ZeRO stage 1/2/3 shards
optimizer states / + gradients / + weights over the dp ranks. Model-parallel runs add transformer activations
per layer after Korthikanti et al. 2022 (tp, sequence parallelism, recomputation) and the micro-batches a
pipeline schedule keeps in flight. Formulas and sources: docs/model.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from simdist.compute import ACTIVATION_BYTES, DTYPE_BYTES, MIXED_PRECISIONS, OPTIMIZER_STATES
from simdist.errors import InfeasibleError
from simdist.hardware.specs import GpuSpec
from simdist.scenario import PipelineSchedule, Recompute
from simdist.units import format_memory
from simdist.workload.specs import ModelSpec

# CUDA context, cuBLAS/cuDNN workspaces and allocator fragmentation reserve, per GPU.
FRAMEWORK_RESERVE_BYTES = 1.0e9
FP32_MASTER_BYTES = 4
FP32_STATE_BYTES = 4


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak bytes one GPU needs, by part, against the GPU's capacity."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_states_bytes: float  # incl. the fp32 master weights in mixed precision
    activations_bytes: float
    buffers_bytes: float  # communication buckets, compression error-feedback (given by the caller)
    workspace_bytes: float  # framework reserve + the largest layer's transient input and output
    capacity_bytes: float
    gpu: str = ""

    @property
    def total_bytes(self) -> float:
        return math.fsum((self.weights_bytes, self.gradients_bytes, self.optimizer_states_bytes,
                          self.activations_bytes, self.buffers_bytes, self.workspace_bytes))

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    @property
    def parts_bytes(self) -> dict[str, float]:
        """Part name (weights, gradients, optimizer_states, activations, buffers, workspace) -> bytes."""
        return {"weights": self.weights_bytes, "gradients": self.gradients_bytes,
                "optimizer_states": self.optimizer_states_bytes, "activations": self.activations_bytes,
                "buffers": self.buffers_bytes, "workspace": self.workspace_bytes}

    def parts(self) -> dict[str, float]:
        """The same as parts_bytes (kept for callers that prefer a method)."""
        return self.parts_bytes

    def describe(self) -> str:
        """'needs 2.8 TB per GPU (weights 349 GB, ...), the v100 has 16 GB'."""
        parts = ", ".join(f"{k.replace('_', ' ')} {format_memory(v)}" for k, v in self.parts_bytes.items() if v > 0)
        return f"needs {format_memory(self.total_bytes)} per GPU ({parts}), the {self.gpu or 'GPU'} has {format_memory(self.capacity_bytes)}"


def _dtype(label: str, value: str) -> str:
    v = str(value)
    if v not in DTYPE_BYTES:
        raise ValueError(f"{label}: got {value!r}; expected one of {', '.join(DTYPE_BYTES)}")
    return v


def model_state_bytes(params: float, precision: str, optimizer: str, grad_dtype: str = "fp32", zero: int = 0,
                      dp: int = 1) -> tuple[float, float, float]:
    """(weights, gradients, optimizer states incl. fp32 master) bytes of `params` parameters on one GPU."""
    p, g, opt = _dtype("precision", precision), _dtype("grad_dtype", grad_dtype), str(optimizer)
    if opt not in OPTIMIZER_STATES:
        raise ValueError(f"optimizer: got {optimizer!r}; expected one of {', '.join(OPTIMIZER_STATES)}")
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"zero: got {zero!r}; expected 0, 1, 2 or 3")
    mixed = p in MIXED_PRECISIONS
    weights = params * (DTYPE_BYTES[p] if mixed else FP32_MASTER_BYTES)
    grads = params * DTYPE_BYTES[g]
    states = params * (FP32_STATE_BYTES * OPTIMIZER_STATES[opt] + (FP32_MASTER_BYTES if mixed else 0))
    if zero >= 1:
        states /= dp
    if zero >= 2:
        grads /= dp
    if zero >= 3:
        weights /= dp
    return float(weights), float(grads), float(states)


def estimate_memory(model: ModelSpec, gpu: GpuSpec, batch_per_gpu: int, precision: str, optimizer: str,
                    grad_dtype: str = "fp32", zero: int = 0, dp: int = 1,
                    extra_buffer_bytes: float = 0.0) -> MemoryEstimate:
    """Peak memory of one data-parallel rank training `model` with `batch_per_gpu` samples per step.

    Activations are every layer's saved elements x batch x activation bytes (all kept until backward,
    no recomputation); the workspace adds the largest layer's live input and output on top of a reserve.
    """
    p = _dtype("precision", precision)
    g = _dtype("grad_dtype", grad_dtype)
    opt = str(optimizer)
    if opt not in OPTIMIZER_STATES:
        raise ValueError(f"optimizer: got {optimizer!r}; expected one of {', '.join(OPTIMIZER_STATES)}")
    if not isinstance(batch_per_gpu, int) or isinstance(batch_per_gpu, bool) or batch_per_gpu < 1:
        raise ValueError(f"batch_per_gpu: got {batch_per_gpu!r}; expected a positive integer")
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"zero: got {zero!r}; expected 0, 1, 2 or 3")
    if not isinstance(dp, int) or dp < 1:
        raise ValueError(f"dp: got {dp!r}; expected a positive integer")
    if extra_buffer_bytes < 0:
        raise ValueError(f"extra_buffer_bytes: got {extra_buffer_bytes!r}; expected >= 0")
    weights, grads, states = model_state_bytes(model.params, p, opt, g, zero, dp)
    a = ACTIVATION_BYTES[p]
    activations = math.fsum(layer.saved_elems for layer in model.layers) * batch_per_gpu * a
    live = max((layer.input_elems + layer.output_elems for layer in model.layers), default=0.0)
    workspace = FRAMEWORK_RESERVE_BYTES + live * batch_per_gpu * a
    return MemoryEstimate(float(weights), float(grads), float(states), activations, float(extra_buffer_bytes),
                          workspace, gpu.memory_bytes, gpu.key)


def check_fits(estimate: MemoryEstimate) -> MemoryEstimate:
    """Return the estimate when it fits, else raise InfeasibleError naming the figures."""
    if not estimate.fits:
        raise InfeasibleError(f"does not fit in GPU memory: {estimate.describe()}")
    return estimate


# ----------------------------------------------------------------------------- model parallelism


@dataclass(frozen=True)
class TransformerShape:
    """What the per-layer activation formula needs: hidden size, attention heads, sequence length."""

    hidden: int
    heads: int
    seq_len: int


def layer_activation_bytes(shape: TransformerShape, micro_batch: int, tp: int = 1, sequence_parallel: bool = False,
                           recompute: "Recompute | str" = Recompute.NONE, activation_bytes: int = 2) -> float:
    """Activation bytes one transformer layer keeps for backward on one tp rank (Korthikanti et al. 2022, Table 2).

    16-bit activations: none sbh(10 + 24/t + 5as/(ht)), or sbh/t (34 + 5as/h) with sequence parallelism;
    selective (attention core recomputed) sbh(10 + 24/t), or 34sbh/t; full (layer input only) 2sbh, or 2sbh/t
    with sequence parallelism (the input is sequence-sharded). t = 1 gives sbh(34 + 5as/h). Other activation
    widths scale the figure by activation_bytes / 2.
    """
    rc = Recompute(recompute)
    s, b, h, a, t = shape.seq_len, micro_batch, shape.hidden, shape.heads, tp
    sbh = s * b * h
    if rc is Recompute.FULL:
        x = 2 * sbh / (t if sequence_parallel else 1)
    elif sequence_parallel:
        x = sbh / t * (34 + (5 * a * s / h if rc is Recompute.NONE else 0))
    else:
        x = sbh * (10 + 24 / t + (5 * a * s / (h * t) if rc is Recompute.NONE else 0))
    return x * activation_bytes / 2


def in_flight_micro_batches(schedule: "PipelineSchedule | str", pp: int, micro_batches: int, stage: int,
                            virtual_stages: int = 1) -> float:
    """Micro-batches whose activations pipeline rank `stage` holds at its peak, in whole-stage equivalents.

    GPipe: all m. 1F1B: min(p - stage, m). Interleaved: min(2(p - stage - 1) + (v - 1)p + 1, m v) chunks of 1/v
    stage each, i.e. p + (p - 1)/v stages on the first rank (Narayanan et al. 2021). One pipeline stage: 1.
    """
    kind = PipelineSchedule(schedule)
    p, m, v = pp, micro_batches, virtual_stages
    if not 0 <= stage < p:
        raise ValueError(f"stage {stage} outside 0..{p - 1}")
    if p == 1:
        return 1.0
    if kind is PipelineSchedule.GPIPE:
        return float(m)
    if kind is PipelineSchedule.ONE_F_ONE_B:
        return float(min(p - stage, m))
    return min(2 * (p - stage - 1) + (v - 1) * p + 1, m * v) / v


def estimate_parallel_memory(gpu: GpuSpec, *, params: float, precision: str, optimizer: str,
                             grad_dtype: str = "fp32", zero: int = 0, dp: int = 1,
                             activation_bytes_per_micro_batch: float = 0.0, in_flight: float = 1.0,
                             transient_bytes: float = 0.0, gathered_param_bytes: float = 0.0,
                             extra_buffer_bytes: float = 0.0, what: str = "") -> MemoryEstimate:
    """Peak memory of one GPU holding `params` parameters (its tp shard of its pipeline stage) sharded by ZeRO.

    Activations: one micro-batch's bytes on this GPU times the micro-batches in flight. Workspace: the framework
    reserve, the transient bytes (largest live layer input/output, a layer being recomputed) and, under ZeRO-3,
    the gathered parameters of the unit in use and the one prefetched.
    """
    for label, v in (("activation_bytes_per_micro_batch", activation_bytes_per_micro_batch),
                     ("in_flight", in_flight), ("transient_bytes", transient_bytes),
                     ("gathered_param_bytes", gathered_param_bytes), ("extra_buffer_bytes", extra_buffer_bytes),
                     ("params", params)):
        if not v >= 0:
            raise ValueError(f"{label}: got {v!r}; expected >= 0")
    weights, grads, states = model_state_bytes(params, precision, optimizer, grad_dtype, zero, dp)
    workspace = FRAMEWORK_RESERVE_BYTES + transient_bytes + (gathered_param_bytes if zero >= 3 else 0.0)
    return MemoryEstimate(weights, grads, states, activation_bytes_per_micro_batch * in_flight,
                          float(extra_buffer_bytes), workspace, gpu.memory_bytes,
                          gpu.key + (f" ({what})" if what else ""))
