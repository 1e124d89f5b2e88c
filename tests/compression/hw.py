"""Hand-built GPUs for the codec tests (no catalog dependency)."""
from simdist.hardware.specs import GpuSpec

A100 = GpuSpec(key="a100-test", name="A100 (test)", vendor="nvidia", peak_flops={"fp32": 19.5e12, "fp16": 312e12},
               memory_bytes=80e9, memory_bandwidth_Bps=2.0e12, tdp_w=400, price_per_hour_usd=2.0)
SLOW = GpuSpec(key="slow-test", name="slow (test)", vendor="x", peak_flops={"fp32": 1e12},
               memory_bytes=16e9, memory_bandwidth_Bps=0.5e12, tdp_w=100, price_per_hour_usd=0.5)
