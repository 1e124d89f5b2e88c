"""Keys that cannot change this scenario's result are refused, never silently ignored.

A resolved Scenario cannot tell a key left at its default from one set to it, so what is checked
is a value different from the default in a context that never reads it (a staleness bound without
ssp, parameter-server settings without a parameter server, training keys under a benchmark...).
Every problem is reported at once, each with its YAML path and what would make it count.
"""
from __future__ import annotations

from dataclasses import fields

from simdist.errors import Issue
from simdist.scenario import (CommunicationSpec, GradClipping, GradProcessing, LossScaling, Precision, RecoverySpec,
                              RunSpec, Scenario, StrategyKind, SyncMode, TrainingSpec)

# resolved field -> YAML path, where the two differ
_COMM_PATHS = {"hierarchical_intra": "communication.hierarchical.intra",
               "hierarchical_inter": "communication.hierarchical.inter",
               "ps_servers": "communication.ps.servers", "ps_placement": "communication.ps.placement",
               "bucket_size_bytes": "communication.bucket_size", "first_bucket_bytes": "communication.first_bucket_size",
               "fusion_cycle_s": "communication.fusion_cycle"}
_RECOVERY_PATHS = {"checkpoint_interval_s": "checkpoint_interval", "checkpoint_write_s": "checkpoint_write",
                   "restart_s": "restart"}


def _changed(value, default, names) -> list[str]:
    return [f.name for f in fields(default) if f.name in names and getattr(value, f.name) != getattr(default, f.name)]


def _grad_processing_keys(scenario: Scenario, issues: list[Issue]) -> None:
    """training.loss_scaling needs fp16; grad_processing per_micro_batch needs something to run per micro-batch
    and a plain data-parallel run; neither clipping nor unscaling is priced on parameter servers."""
    t, p = scenario.training, scenario.training.parallelism
    if t.loss_scaling is not LossScaling.NONE and scenario.workload.precision is not Precision.FP16:
        issues.append(Issue("training.loss_scaling", f"got {t.loss_scaling.value!r}; loss scaling is for "
                                                     f"workload.precision fp16, not {scenario.workload.precision.value}"))
    on = t.grad_clipping is not GradClipping.NONE or t.loss_scaling is not LossScaling.NONE
    if t.grad_processing is GradProcessing.PER_MICRO_BATCH:
        if not on:
            issues.append(Issue("training.grad_processing", "got 'per_micro_batch'; nothing runs per micro-batch "
                                                            "without training.grad_clipping or loss_scaling"))
        elif p.tp > 1 or p.pp > 1 or p.zero:
            issues.append(Issue("training.grad_processing", "got 'per_micro_batch'; priced for data parallelism "
                                                            "without tp, pp or ZeRO only (use per_update)"))
    if on and scenario.communication.strategy is StrategyKind.PS:
        key = "training.grad_clipping" if t.grad_clipping is not GradClipping.NONE else "training.loss_scaling"
        issues.append(Issue(key, "not priced with communication.strategy ps (the servers apply the update); "
                                 "remove it or use an all-reduce strategy"))


def relevance_issues(scenario: Scenario, timeline: bool = False) -> list[Issue]:
    """Every non-default key this scenario's run would not read. `timeline`: a failure run over run.duration
    (the goodput timeline reads failures.recovery and failures.random)."""
    issues: list[Issue] = []
    t, comm, run = scenario.training, scenario.communication, scenario.run
    d_t, d_c = TrainingSpec(), CommunicationSpec()
    if scenario.workload.benchmark is not None:
        for name in _changed(t, d_t, {f.name for f in fields(d_t)} - {"parallelism"}):
            issues.append(Issue(f"training.{name}", "a benchmark workload runs no training; remove it"))
        p = t.parallelism
        for name in ("tp", "pp", "zero"):
            if getattr(p, name) != getattr(d_t.parallelism, name):
                issues.append(Issue(f"training.parallelism.{name}", "a benchmark workload runs no training; remove it"))
        if p.dp is not None and p.dp != scenario.cluster.num_gpus:
            issues.append(Issue("training.parallelism.dp", "a benchmark runs over every GPU; remove it"))
        for name in _changed(comm, d_c, {"bucket_size_bytes", "first_bucket_bytes", "bucketing", "fusion_cycle_s",
                                         "overlap", "compression"}):
            issues.append(Issue(_COMM_PATHS.get(name, f"communication.{name}"),
                                "a benchmark times bare collectives (no buckets, overlap or codec); remove it"))
        w = scenario.workload
        for name in ("batch_per_gpu", "global_batch", "seq_len"):
            if getattr(w, name) is not None:
                issues.append(Issue(f"workload.{name}", "a benchmark workload has no batch; remove it"))
        if w.precision != Precision.FP32:
            issues.append(Issue("workload.precision", "a benchmark workload has no model (its sizes are bytes); "
                                                      "remove it"))
        if w.grad_dtype != Precision.FP32:
            issues.append(Issue("workload.grad_dtype", "a benchmark has no gradients (its sizes are bytes); remove it"))
        if run.duration_s is not None or run.iterations != RunSpec().iterations or run.warmup != RunSpec().warmup:
            key = "run.duration" if run.duration_s is not None else (
                "run.iterations" if run.iterations != RunSpec().iterations else "run.warmup")
            issues.append(Issue(key, "a benchmark runs each size once on an idle fabric; remove it"))
        if scenario.failures is not None:
            issues.append(Issue("failures", "a benchmark runs on a healthy idle fabric; remove 'failures'"))
    else:
        if t.staleness != d_t.staleness and t.sync != SyncMode.SSP:
            issues.append(Issue("training.staleness", f"got {t.staleness}; the bound is read only with "
                                                      "training.sync: ssp"))
        if t.local_steps != d_t.local_steps and t.sync != SyncMode.LOCAL_SGD:
            issues.append(Issue("training.local_steps", f"got {t.local_steps}; read only with "
                                                        "training.sync: local_sgd"))
        if t.micro_batch != d_t.micro_batch and t.parallelism.pp == 1 and t.parallelism.tp == 1:
            issues.append(Issue("training.micro_batch", f"got {t.micro_batch}; pipeline micro-batches need "
                                                        "training.parallelism.pp or tp > 1; use "
                                                        "training.grad_accumulation for accumulation"))
        _grad_processing_keys(scenario, issues)
        if t.schedule != d_t.schedule and t.parallelism.pp == 1:
            issues.append(Issue("training.schedule", f"got {t.schedule.value!r}; a pipeline schedule needs "
                                                     "training.parallelism.pp > 1"))
    if comm.strategy != StrategyKind.PS:
        for name in _changed(comm, d_c, {"ps_servers", "ps_placement"}):
            issues.append(Issue(_COMM_PATHS[name], "read only with communication.strategy: ps"))
    if comm.strategy != StrategyKind.HIERARCHICAL:
        for name in _changed(comm, d_c, {"hierarchical_intra", "hierarchical_inter"}):
            issues.append(Issue(_COMM_PATHS[name], "read only with communication.strategy: hierarchical"))
    f = scenario.failures
    if f is not None and not timeline:
        for name in _changed(f.recovery, RecoverySpec(), {x.name for x in fields(RecoverySpec)}):
            issues.append(Issue(f"failures.recovery.{_RECOVERY_PATHS.get(name, name)}",
                                "recovery applies to failures that stop the job, which do not run yet "
                                "(only static stragglers); remove it"))
        r = f.random
        if r is not None and all(x is None for x in (r.gpu_mtbf_s, r.node_mtbf_s, r.link_mtbf_s)):
            issues.append(Issue("failures.random", "no MTBF is set, so nothing fails at random; set one "
                                                   "(gpu_mtbf, node_mtbf, link_mtbf) or remove 'failures.random'"))
    return issues

