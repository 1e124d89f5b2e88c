"""Rules about workload.precision and workload.grad_dtype against the GPUs that run them.

Transformer Engine refuses its block-scaled recipes on a GPU without the tensor cores for them (MXFP8 and
NVFP4 need Blackwell), so a scenario asking for one there is refused here rather than run on other units;
fp8 on a GPU without fp8 units has a fallback instead, which the result names (GpuSpec.runs_as).
Gradients are reduced in fp32, bf16, fp16 or fp8, never in a block-scaled format.
"""
from __future__ import annotations

from simdist.errors import Issue
from simdist.scenario import Precision, Scenario

BLOCK_SCALED = (Precision.MXFP8, Precision.NVFP4)


def precision_issues(scenario: Scenario) -> list[Issue]:
    """A block-scaled precision on a GPU that lacks it, or as the gradient dtype."""
    w = scenario.workload
    issues: list[Issue] = []
    if w.precision in BLOCK_SCALED and w.model is not None:
        lacking = sorted({g.gpu.key for g in scenario.cluster.node_groups if w.precision.value not in g.gpu.peak_flops})
        if lacking:
            issues.append(Issue("workload.precision", f"got {w.precision.value!r}; {', '.join(lacking)} has no "
                                f"{w.precision.value} tensor cores (Transformer Engine refuses it there): use fp8 "
                                f"or bf16, or a GPU with them (the B200, B300, GB200, GB300 entries)"))
    if w.grad_dtype in BLOCK_SCALED:
        issues.append(Issue("workload.grad_dtype", f"got {w.grad_dtype.value!r}; gradients are reduced in fp32, "
                                                   "bf16, fp16 or fp8, not in a block-scaled format"))
    return issues
