"""Per-GPU memory estimate for data-parallel training: weights, gradients, optimizer states, activations, buffers.

Mixed precision follows the ZeRO paper's accounting (Rajbhandari et al. 2020, section 3.1): a low-precision
copy of the weights, gradients in `grad_dtype`, and an fp32 master copy plus fp32 optimizer states, so Adam
with fp16 weights and gradients costs 2 + 2 + (4 + 4 + 4) = 16 bytes per parameter. ZeRO stage 1/2/3 shards
optimizer states / + gradients / + weights over the dp ranks. Formulas and sources: docs/model.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from simdist.compute import ACTIVATION_BYTES, DTYPE_BYTES, MIXED_PRECISIONS, OPTIMIZER_STATES
from simdist.errors import InfeasibleError
from simdist.hardware.specs import GpuSpec
from simdist.units import format_size
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
        parts = ", ".join(f"{k.replace('_', ' ')} {format_size(v)}" for k, v in self.parts_bytes.items() if v > 0)
        return f"needs {format_size(self.total_bytes)} per GPU ({parts}), the {self.gpu or 'GPU'} has {format_size(self.capacity_bytes)}"


def _dtype(label: str, value: str) -> str:
    v = str(value)
    if v not in DTYPE_BYTES:
        raise ValueError(f"{label}: got {value!r}; expected one of {', '.join(DTYPE_BYTES)}")
    return v


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
    n = model.params
    mixed = p in MIXED_PRECISIONS
    weights = n * DTYPE_BYTES[p] if mixed else n * FP32_MASTER_BYTES
    grads = n * DTYPE_BYTES[g]
    states = n * (FP32_STATE_BYTES * OPTIMIZER_STATES[opt] + (FP32_MASTER_BYTES if mixed else 0))
    if zero >= 1:
        states /= dp
    if zero >= 2:
        grads /= dp
    if zero >= 3:
        weights /= dp
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
