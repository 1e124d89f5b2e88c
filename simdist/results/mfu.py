"""Model FLOPs utilisation (MFU): the model's training FLOPs per second over the GPUs' peak dense FLOP/s.

Megatron-LM's definition (Narayanan et al. 2021, appendix; Korthikanti et al. 2022, section 6): the model
FLOPs of one sample are forward + backward = 3 x its forward FLOPs (a multiply-add counts 2), never the
recomputed forward (that is hardware FLOPs utilisation), divided by the peak dense FLOP/s at the run's
compute precision (GpuSpec.flops, no sparsity). A mixture-of-experts model counts its active FLOPs: the router
and the top_k experts each token runs (and the shared experts), not every expert it holds (an expert layer's
`fwd_flops` is that work), as Megatron-LM's num_floating_point_operations and Megatron-Bridge's "model TFLOP/s"
count them (tests/workload/test_moe.py checks the GEMMs against that formula; it leaves out the router's small GEMM
and counts the attention core causal). Any strategy (data, tensor, pipeline parallel) uses the
same two functions: `mfu` for one GPU's share, `cluster_mfu` for a run over node groups.
"""
from __future__ import annotations

from typing import Sequence

from simdist.hardware.specs import GpuSpec
from simdist.workload.specs import ModelSpec, model_flops_per_sample


def mfu(model_flops_per_s_per_gpu: float, gpu: GpuSpec, precision: str) -> float:
    """One GPU's model FLOP/s as a fraction of its peak dense FLOP/s at `precision`."""
    if not model_flops_per_s_per_gpu >= 0:
        raise ValueError(f"model_flops_per_s_per_gpu: got {model_flops_per_s_per_gpu!r}; expected >= 0")
    return model_flops_per_s_per_gpu / gpu.flops(str(precision))


def cluster_mfu(model: ModelSpec, samples_per_s: float, gpus: Sequence[tuple[GpuSpec, int]], precision: str) -> float:
    """MFU of a run: model FLOPs per sample x samples/s over the summed peak of `gpus` ((spec, count) pairs);
    with one GPU type it equals mfu(model FLOP/s / GPUs, gpu, precision)."""
    peak = sum(n * g.flops(str(precision)) for g, n in gpus)
    if peak <= 0:
        raise ValueError("gpus: expected at least one GPU with a peak FLOP/s")
    return model_flops_per_sample(model) * samples_per_s / peak
