"""Hand-built GpuSpecs for the compute and memory tests (the hardware catalog is someone else's)."""
from __future__ import annotations

from simdist.hardware.specs import GpuSpec


def gpu(key: str = "test-gpu", fp32: float = 20e12, fp16: float = 300e12, memory_bytes: float = 80e9,
        bandwidth_Bps: float = 2e12, efficiency: dict | None = None) -> GpuSpec:
    return GpuSpec(key, key, "test", {"fp32": fp32, "fp16": fp16}, memory_bytes, bandwidth_Bps, 400.0, 1.0,
                   compute_efficiency=efficiency or {})


A100_80GB = GpuSpec("a100-sxm4-80gb", "NVIDIA A100 SXM4 80GB", "nvidia",
                    {"fp32": 19.5e12, "tf32": 156e12, "fp16": 312e12, "bf16": 312e12}, 80e9, 2.039e12, 400.0, 2.0)
V100_16GB = GpuSpec("v100-sxm2-16gb", "NVIDIA V100 SXM2 16GB", "nvidia",
                    {"fp32": 15.7e12, "fp16": 125e12}, 16e9, 900e9, 300.0, 1.0)
