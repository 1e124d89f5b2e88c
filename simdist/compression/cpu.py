"""What a codec's operations cost on a CPU: measured per-core rates, scaled to the cores that run them.

A codec runs on a CPU when the gradients are in host memory: a torch DDP hook over gloo on CPU tensors (the
emulated cluster), BytePS's compressors (on the worker after the copy to host memory, and on the server).
There an operation is not a bandwidth-bound GPU kernel: a random permutation, a top-k search or a random
number costs nanoseconds per element on one core, and an out-of-place op's fresh output costs the kernel's
page faults (glibc serves large tensors with mmap, so every new buffer is first touched again). `REFERENCE_CORE` holds those rates as
`benchmarks/codec_cpu.py` measured them on one core of the development machine (torch on one thread,
2**23 fp32 elements, median of 7 runs of thread CPU time after a warm-up), and `CpuProcessor` prices a
codec's `Kernel` list with them, over `cores` cores (a fraction when several workers share one).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from simdist.compression.cost import Kernel


@dataclass(frozen=True)
class CpuRates:
    """Per-core rates of the operations codecs run (bytes, elements or FLOP per second of one core)."""

    stream_Bps: float  # bytes of an elementwise pass (read + write) per second, into an existing buffer
    first_touch_Bps: float  # bytes of fresh memory per second (torch.zeros: the kernel's page faults and zeroing)
    rng_per_s: float  # uniform random numbers generated
    randperm_per_s: float  # elements of a random permutation
    topk_per_s: float  # elements searched by a top-k selection (k = 1 % of them)
    gather_per_s: float  # elements read at random indices
    scatter_per_s: float  # elements written at random indices
    gemm_flops: float  # fp32 FLOP/s of a matrix product
    op_overhead_s: float  # one tensor op's fixed cost (dispatch, allocation) on a tiny tensor
    measured_on: str = ""

    def rate(self, op: str) -> float:
        return {"rng": self.rng_per_s, "randperm": self.randperm_per_s, "topk": self.topk_per_s,
                "gather": self.gather_per_s, "scatter": self.scatter_per_s}[op]


# benchmarks/codec_cpu.py --repeats 7 on the development machine, 2026-12-07: /proc/cpuinfo 'Intel(R) Xeon(R)
# Processor' (the KVM hypervisor masks the SKU; 2 vCPUs, 480 MiB L3, so 2**23 fp32 stay in cache), torch
# 2.13.0+cpu on one thread. The machine was shared: repeated runs spread by about +-20 % (UNCERTAIN).
REFERENCE_CORE = CpuRates(
    stream_Bps=15.2e9, first_touch_Bps=2.42e9, rng_per_s=2.37e8, randperm_per_s=3.32e7, topk_per_s=5.60e7,
    gather_per_s=9.76e7, scatter_per_s=1.69e8, gemm_flops=1.20e11, op_overhead_s=3.46e-6,
    measured_on="development machine, Intel Xeon (KVM-masked SKU), one core, torch 2.13 on one thread")


@dataclass(frozen=True)
class CpuProcessor:
    """Prices `Kernel`s on `cores` cores of a CPU with per-core `rates` (ops split evenly over the cores:
    torch's intra-op threads, BytePS's OpenMP loops; a fraction below 1 when workers share a core)."""

    rates: CpuRates = REFERENCE_CORE
    cores: float = 1.0

    @classmethod
    def reference(cls, cores: float = 1.0) -> "CpuProcessor":
        return cls(REFERENCE_CORE, cores)

    def kernel_time_s(self, kernel: Kernel) -> float:
        """Seconds of one `Kernel` entry: each launch's fixed cost plus its work over the cores."""
        r = self.rates
        if kernel.op == "stream":
            work = max(kernel.bytes_moved / r.stream_Bps, kernel.flops / r.gemm_flops)
        else:
            work = kernel.count / r.rate(kernel.op)
        work += kernel.alloc_bytes / r.first_touch_Bps
        return kernel.launches * r.op_overhead_s + work / self.cores

    def time_s(self, kernels: Iterable[Kernel]) -> float:
        """Seconds for kernels run one after another."""
        return sum((self.kernel_time_s(k) for k in kernels), 0.0)
