"""Rules about workload.precision and workload.grad_dtype against the GPUs that run them.

Transformer Engine refuses its block-scaled recipes on a GPU without the tensor cores for them (MXFP8 and
NVFP4 need Blackwell), so a scenario asking for one there is refused here rather than run on other units;
fp8 on a GPU without fp8 units has a fallback instead, which the result names (GpuSpec.runs_as).
Gradients are reduced in fp32, bf16, fp16 or fp8, never in a block-scaled format.
The run options of the compute model (workload.fp8_recipe, workload.fp8_attention, training.cuda_graphs) are
checked here and carried into the scenario's ComputeCalibration (with_run_options), which every compute call reads.
"""
from __future__ import annotations

from dataclasses import replace

from simdist.compute import ComputeCalibration
from simdist.errors import Issue
from simdist.low_precision import FP8_PARAM_GATHER_PRECISIONS
from simdist.scenario import Precision, Scenario

# GPUs whose flash-attention kernels run fp8 (cuDNN's FP8 fused attention, which TE's fp8_dpa calls, needs
# compute capability 9.0 or 10.x): the catalog's Hopper and Blackwell entries, and inline GPUs based on them
FP8_ATTENTION_GPUS = ("h100", "h200", "h800", "gh200", "b200", "b300", "gb200", "gb300")

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
    return issues + fp8_param_gather_issues(scenario)


def fp8_param_gather_issues(scenario: Scenario) -> list[Issue]:
    """training.fp8_param_gather (Megatron's --fp8-param-gather) needs fp8 parameters (an fp8 or mxfp8 precision
    on GPUs that run it) and a parameter all-gather to move them (ZeRO/FSDP or the distributed optimizer)."""
    w, t = scenario.workload, scenario.training
    if not t.fp8_param_gather:
        return []
    key, p = "training.fp8_param_gather", w.precision.value
    if p not in FP8_PARAM_GATHER_PRECISIONS:
        return [Issue(key, f"got true; it keeps the parameters in fp8, which needs workload.precision fp8 or mxfp8 "
                           f"(got {p!r}): remove the key or change the precision")]
    issues = []
    fallback = sorted({f"{g.gpu.key} (it runs {p} as {g.gpu.runs_as(p)})" for g in scenario.cluster.node_groups
                       if g.gpu.runs_as(p) != p})
    if fallback:
        issues.append(Issue(key, f"got true; {', '.join(fallback)} has no fp8 units, so there are no fp8 "
                                 "parameters to gather: remove the key"))
    if t.parallelism.zero == 0:
        issues.append(Issue(key, "got true; only a parameter all-gather moves fp8 parameters (ZeRO/FSDP or the "
                                 "distributed optimizer: training.parallelism.zero >= 1), and there is none"))
    return issues


def run_options(m) -> dict:
    """The ComputeCalibration run options a scenario model sets (only those differing from the defaults)."""
    w, t = m.workload, m.training
    out: dict = {}
    if w.fp8_recipe is not None and w.fp8_recipe != "delayed":
        out["fp8_recipe"] = w.fp8_recipe
    if w.fp8_attention:
        out["fp8_attention"] = True
    if t.cuda_graphs:
        out["cuda_graphs"] = True
    return out


def with_run_options(scenario: Scenario, m) -> Scenario:
    """`scenario` whose compute calibration carries the run options of its model (after any calibration profile)."""
    options = run_options(m)
    if not options:
        return scenario
    return replace(scenario, compute_calibration=replace(scenario.compute_calibration or ComputeCalibration(),
                                                         **options))


def run_option_issues(m, cluster, model) -> list[Issue]:
    """fp8_recipe and fp8_attention without fp8 or on GPUs that cannot run them; fp8 attention without a flash
    attention core; CUDA graphs with no model to run (a collective benchmark)."""
    w = m.workload
    fp8 = Precision(w.precision) == Precision.FP8
    gpus = sorted({g.gpu.key for g in cluster.node_groups}) if cluster is not None else []
    no_fp8 = [k for k in gpus if all("fp8" not in g.gpu.peak_flops for g in cluster.node_groups if g.gpu.key == k)]
    issues: list[Issue] = []
    if w.fp8_recipe is not None:
        if not fp8:
            issues.append(Issue("workload.fp8_recipe", f"got {w.fp8_recipe!r} with precision {w.precision!s}; the "
                                "scaling recipe applies to precision fp8 (mxfp8 and nvfp4 have their own block scales)"))
        elif gpus and len(no_fp8) == len(gpus):
            issues.append(Issue("workload.fp8_recipe", f"got {w.fp8_recipe!r}; {', '.join(no_fp8)} has no fp8 units "
                                "(fp8 runs as fp16 there, unscaled): remove the key or use a GPU with fp8"))
    if w.fp8_attention:
        if not fp8:
            issues.append(Issue("workload.fp8_attention", f"got true with precision {w.precision!s}; FP8 attention "
                                "runs under precision fp8 (TE's fp8_dpa)"))
        lacking = [k for k in gpus if not k.startswith(FP8_ATTENTION_GPUS)]
        if lacking:
            issues.append(Issue("workload.fp8_attention", f"got true; {', '.join(lacking)} has no FP8 flash-attention "
                                "kernels (cuDNN's FP8 fused attention needs Hopper or Blackwell)"))
        cores = [l for l in model.layers if l.kind == "attention"] if model is not None else []
        if model is not None and (not cores or any(l.fwd_kernels for l in cores)):
            issues.append(Issue("workload.fp8_attention", "got true; FP8 attention is a flash-attention kernel: "
                                "the model needs attention layers run as flash attention (workload.flash_attention: "
                                "true)"))
    if m.training.cuda_graphs and model is None:
        issues.append(Issue("training.cuda_graphs", "got true; a collective benchmark has no forward and backward to "
                                                    "capture: remove the key"))
    return issues
