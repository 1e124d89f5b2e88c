"""Roofline cost of the GPU kernels a codec launches: memory traffic, FLOPs and launch overhead.

Each codec lists its encode and decode work as `Kernel`s; `KernelCostModel` turns them into seconds
on a `GpuSpec`, so every cost is inspectable and a measured `calibration` factor can scale it later.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from simdist.hardware.specs import GpuSpec

DEFAULT_FLOPS_EFFICIENCY = 0.7  # fp32 GEMM fraction of peak when the GpuSpec gives none


@dataclass(frozen=True)
class Kernel:
    """One kernel or tensor op (or `launches` identical back-to-back ones): the bytes it moves and FLOPs it does
    on a GPU, and what kind of work it is for a CPU (`op`: a streaming pass, or `count` random numbers,
    permuted elements, elements searched by top-k, random-index gathers or scatters; simdist/compression/cpu.py).
    `alloc_bytes`: what an out-of-place op allocates (free from a GPU's caching allocator, first-touch page
    faults on a CPU)."""

    name: str
    bytes_moved: float
    flops: float = 0.0
    launches: int = 1
    op: str = "stream"  # stream | rng | randperm | topk | gather | scatter
    count: float = 0.0  # elements of the `op` (not used for stream)
    alloc_bytes: float = 0.0  # bytes of a freshly allocated output (out-of-place tensor ops)


@dataclass(frozen=True)
class KernelCostModel:
    """Per kernel: launch overhead + max(bytes / (HBM bandwidth x eff), FLOPs / (fp32 peak x eff)).

    `random_access_bytes` is the DRAM sector a scattered 4-byte access really moves (32 B on NVIDIA
    GPUs); `calibration` multiplies every figure (1.0 until `simdist calibrate` measures codecs).
    """

    launch_overhead_s: float = 5e-6
    memory_efficiency: float = 0.8
    flops_efficiency: float | None = None  # None: gpu.compute_efficiency['fp32'], else 0.7
    random_access_bytes: float = 32.0
    calibration: float = 1.0

    def kernel_time_s(self, kernel: Kernel, gpu: GpuSpec) -> float:
        """Seconds for one `Kernel` entry (all its launches)."""
        mem_s = kernel.bytes_moved / (gpu.memory_bandwidth_Bps * self.memory_efficiency)
        flop_s = 0.0
        if kernel.flops > 0:
            eff = self.flops_efficiency
            if eff is None:
                eff = gpu.compute_efficiency.get("fp32", DEFAULT_FLOPS_EFFICIENCY)
            flop_s = kernel.flops / (gpu.flops("fp32") * eff)
        return self.calibration * (kernel.launches * self.launch_overhead_s + max(mem_s, flop_s))

    def time_s(self, kernels: Iterable[Kernel], gpu: GpuSpec) -> float:
        """Seconds for kernels run one after another on one stream."""
        return sum((self.kernel_time_s(k, gpu) for k in kernels), 0.0)
