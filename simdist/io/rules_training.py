"""What the training engine runs: the support rules of sync modes, strategies, ZeRO / FSDP and the host keys.

Each function returns every problem it finds as an Issue (the YAML path, what was given, what would run);
`io.rules.rules` gathers them so that `simdist check` and `simdist run` refuse the same scenarios with the
same lines. Model-parallel rules (tp, pp, schedules) are in io/rules_parallel.py.
"""
from __future__ import annotations

from simdist.compression.registry import USES_ERROR_FEEDBACK, USES_RANK, USES_RATIO
from simdist.errors import Issue
from simdist.input_pipeline import loader_samples_per_s
from simdist.scenario import (BatchSplit, CommunicationSpec, CompressionMethod, CompressionSpec, FailureKind,
                              RecoveryPolicy, Scenario, StrategyKind, SyncMode)
from simdist.strategies.plan import data_parallel_degree, is_model_parallel

ZERO_KEY = "training.parallelism.zero"
SHARDED_STRATEGIES = (StrategyKind.RING, StrategyKind.HALVING_DOUBLING, StrategyKind.TORUS3D)


def bad_value(path: str, value: object, expected: str) -> Issue:
    """The common shape: `path: got 'value'; expected ...` (as ScenarioError.bad_value words it)."""
    return Issue(path, f"got {value!r}; expected {expected}")


def parallelism_issues(scenario: Scenario) -> list[Issue]:
    """tp and pp run as BSP over an all-reduce strategy without the
    data-parallel engine's own keys (buckets cut by layer, codecs, Horovod's fusion cycle, stragglers)."""
    t, comm = scenario.training, scenario.communication
    out: list[Issue] = []
    if not is_model_parallel(scenario):  # (io.resolve checks dp x tp x pp = the cluster's GPUs)
        return out
    if t.sync != SyncMode.BSP:
        out.append(bad_value("training.sync", t.sync.value, "bsp with tp or pp > 1"))
    if comm.strategy == StrategyKind.PS:
        out.append(bad_value("communication.strategy", "ps", "an all-reduce strategy with tp or pp > 1"))
    if comm.compression.method != CompressionMethod.NONE:
        out.append(bad_value("communication.compression", comm.compression.method.value,
                             "none with tp or pp > 1 (gradient codecs run with data parallelism only)"))
    if t.batch_split != BatchSplit.EQUAL:
        out.append(bad_value("training.batch_split", t.batch_split.value, "equal with tp or pp > 1"))
    shrinking = (RecoveryPolicy.ELASTIC, RecoveryPolicy.REPLICA_GROUPS)
    if scenario.failures is not None and scenario.failures.recovery.policy in shrinking:
        out.append(bad_value("failures.recovery.policy", scenario.failures.recovery.policy.value,
                             "checkpoint_restart, in_memory or spares with tp or pp > 1 (the job restarts on its "
                             "layout; shrinking a model-parallel job by whole dp replicas is not modelled)"))
    for i, event in enumerate(scenario.failures.events if scenario.failures is not None else ()):
        if event.kind == FailureKind.STRAGGLER:  # failures, repairs, link faults and jitter run with tp/pp
            out.append(bad_value(f"failures.events.{i}.kind", "straggler", "a failure, link or jitter event with tp "
                                 "or pp > 1 (the model-parallel engine takes no per-GPU slowdown; stragglers run "
                                 "with data parallelism only)"))
    d = CommunicationSpec()
    for key, name in (("first_bucket_size", "first_bucket_bytes"), ("bucketing", "bucketing")):
        if getattr(comm, name) != getattr(d, name):
            out.append(bad_value(f"communication.{key}", getattr(comm, name), "the default with tp or pp > 1 (each "
                                 "stage's gradients are cut into equal buckets of communication.bucket_size)"))
    if t.convergence_factor != 1.0:
        out.append(bad_value("training.convergence_factor", t.convergence_factor,
                             "1 with tp or pp > 1 (BSP without compression converges as the baseline)"))
    if comm.fusion_cycle_s:
        out.append(bad_value("communication.fusion_cycle", comm.fusion_cycle_s,
                             "0 with tp or pp > 1 (Horovod's fusion cycle is a data-parallel launcher)"))
    return out


def sync_issues(scenario: Scenario) -> list[Issue]:
    """asp and ssp need parameter servers; the bounds of ssp, local SGD and the convergence factor; hybrid's
    parameter servers and switch point."""
    t, comm = scenario.training, scenario.communication
    out = []
    if t.sync in (SyncMode.ASP, SyncMode.SSP) and comm.strategy != StrategyKind.PS:
        out.append(bad_value("training.sync", t.sync.value, "bsp or local_sgd with an all-reduce strategy (asp and "
                                                            "ssp need communication.strategy: ps)"))
    if t.sync == SyncMode.SSP and t.staleness < 0:
        out.append(bad_value("training.staleness", t.staleness, "a bound >= 0"))
    if t.local_steps < 1:
        out.append(bad_value("training.local_steps", t.local_steps, "a period >= 1"))
    if not t.convergence_factor > 0:
        out.append(bad_value("training.convergence_factor", t.convergence_factor, "a factor > 0"))
    if t.sync == SyncMode.HYBRID:
        out += hybrid_issues(scenario)
    return out


def hybrid_issues(scenario: Scenario) -> list[Issue]:
    """sync hybrid: an asp phase on parameter servers, then bsp from the switch iteration."""
    t, n = scenario.training, scenario.run.iterations
    out = []
    if scenario.communication.strategy != StrategyKind.PS:
        out.append(bad_value("training.sync", "hybrid", "communication.strategy: ps (the asynchronous phase is the "
                                                        "parameter server's asp)"))
    if t.hybrid_switch_iteration is not None:
        s = t.hybrid_switch_iteration
    elif t.hybrid_switch_fraction is not None:
        s = round(t.hybrid_switch_fraction * n)
    else:
        return out + [Issue("training.hybrid_switch", "sync hybrid needs training.hybrid_switch")]
    if not 0 < s < n:
        out.append(bad_value("training.hybrid_switch", s, f"an iteration strictly between 0 and run.iterations "
                                                          f"({n}) once resolved"))
    return out


def phased_issues(scenario: Scenario, timeline: bool) -> list[Issue]:
    """A phased run (sync hybrid, batch_split dynamic) counts its phases in run.iterations: no run.duration
    unless failures make it a goodput timeline (dynamic only)."""
    t = scenario.training
    if scenario.run.duration_s is None or timeline:
        return []
    if t.sync is SyncMode.HYBRID:
        return [bad_value("training.sync", "hybrid", "a steady run of run.iterations (its phases are counted in "
                          "iterations), or a failure run (failures with run.duration; dynamic only)")]
    if t.batch_split is BatchSplit.DYNAMIC and t.split_slowdowns is None:
        return [bad_value("training.batch_split", "dynamic", "a steady run of run.iterations (its phases are "
                          "counted in iterations), or a failure run (failures with run.duration; dynamic only)")]
    return []


def host_key_issues(scenario: Scenario) -> list[Issue]:
    """Scope of workload.memory_format, input_pipeline and single_gpu_throughput (each refused where it would
    not act)."""
    w, t = scenario.workload, scenario.training
    mp = is_model_parallel(scenario)
    lockstep = t.sync in (SyncMode.BSP, SyncMode.LOCAL_SGD)  # hybrid runs an asp phase, refused there
    out = []
    if w.memory_format != "native" and (mp or t.parallelism.zero):
        out.append(bad_value("workload.memory_format", w.memory_format, "native with tp, pp or ZeRO (their compute "
                                                                        "does not take the layout; a conv model runs "
                                                                        "data-parallel)"))
    for key, value in (("input_pipeline", w.input_pipeline), ("single_gpu_throughput", w.single_gpu_throughput)):
        if value is None:
            continue
        shown = value if isinstance(value, float) else "{...}"
        if mp:
            out.append(bad_value(f"workload.{key}", shown, "unset with tp or pp > 1 (the data-parallel engine "
                                                           "applies it)"))
        elif not lockstep:
            out.append(bad_value(f"workload.{key}", shown, f"unset with training.sync {t.sync.value} (only bsp and "
                                 "local_sgd have a common step to bound; hybrid runs an asp phase)"))
    if w.input_pipeline is not None:
        most = max(g.gpus_per_node for g in scenario.cluster.node_groups)
        if w.input_pipeline.host_cores <= most:
            out.append(bad_value("workload.input_pipeline.host_cores", w.input_pipeline.host_cores,
                                 f"more cores than GPUs per node ({most}): each GPU's training process keeps one "
                                 "core busy"))
    if w.single_gpu_throughput is not None:
        out += _anchor_issues(scenario)
    return out


def _anchor_issues(scenario: Scenario) -> list[Issue]:
    """workload.single_gpu_throughput: one GPU kind, no ZeRO, measured at workload.batch_per_gpu, and no more
    than the input pipeline delivers to one GPU."""
    w, t = scenario.workload, scenario.training
    out = []
    kinds = {g.gpu.key for g in scenario.cluster.node_groups}
    if len(kinds) > 1:
        out.append(bad_value("workload.single_gpu_throughput", w.single_gpu_throughput,
                             f"unset with several GPU kinds ({', '.join(sorted(kinds))}): it is measured on one"))
    if t.parallelism.zero:
        out.append(bad_value("workload.single_gpu_throughput", w.single_gpu_throughput,
                             "unset with ZeRO / FSDP (their per-layer compute is not anchored)"))
    if w.batch_per_gpu is None:
        out.append(bad_value("workload.single_gpu_throughput", w.single_gpu_throughput,
                             "used with workload.batch_per_gpu (the batch it was measured at)"))
    if w.input_pipeline is not None:
        for group in scenario.cluster.node_groups:
            alone = loader_samples_per_s(w.input_pipeline, 1, group.intra_node.key)
            if alone < w.single_gpu_throughput:
                out.append(bad_value("workload.single_gpu_throughput", w.single_gpu_throughput,
                                     f"at most what the input pipeline delivers to one GPU ({alone:.4g} samples/s), "
                                     "or a faster pipeline"))
                break
    return out


def sharded_issues(scenario: Scenario) -> list[Issue]:
    """What sharded data parallelism runs: BSP over ring (or halving-doubling) reduce_scatter/all_gather, without
    gradient compression or Horovod's fusion cycle; stage 3's units replace gradient buckets."""
    t, comm, z = scenario.training, scenario.communication, scenario.training.parallelism.zero
    if not z:
        return []
    dp = data_parallel_degree(scenario) * scenario.training.parallelism.cp  # Megatron-Core shards over dp x cp
    out = []
    if dp < 2:
        out.append(bad_value(ZERO_KEY, z, "0 on a single GPU (there is nothing to shard over dp = 1)"))
    if t.sync != SyncMode.BSP:
        out.append(bad_value("training.sync", t.sync.value, f"bsp with {ZERO_KEY} = {z} (sharded data parallelism "
                                                            "is synchronous)"))
    if comm.strategy not in SHARDED_STRATEGIES:
        out.append(bad_value("communication.strategy", comm.strategy.value, f"ring, halving_doubling or torus3d with "
                             f"{ZERO_KEY} = {z} (the strategies with reduce_scatter and all_gather schedules)"))
    elif comm.strategy == StrategyKind.HALVING_DOUBLING and dp & (dp - 1):
        out.append(bad_value("communication.strategy", comm.strategy.value, f"ring: halving-doubling reduce_scatter/"
                             f"all_gather need a power-of-two dp (got {dp}) under {ZERO_KEY} = {z}"))
    if comm.compression.method != CompressionMethod.NONE:
        out.append(bad_value("communication.compression.method", comm.compression.method.value,
                             f"none with {ZERO_KEY} = {z} (compressed sharded collectives are not modelled)"))
    if comm.fusion_cycle_s:
        out.append(bad_value("communication.fusion_cycle", comm.fusion_cycle_s,
                             f"0 with {ZERO_KEY} = {z} (Horovod's fusion cycle is not a ZeRO/FSDP setting)"))
    if z == 3:
        d = CommunicationSpec()
        for key, v, dv in (("communication.bucket_size", comm.bucket_size_bytes, d.bucket_size_bytes),
                           ("communication.first_bucket_size", comm.first_bucket_bytes, d.first_bucket_bytes),
                           ("communication.bucketing", comm.bucketing, d.bucketing)):
            if v != dv:
                out.append(bad_value(key, getattr(v, "value", v), "its default: under ZeRO-3 / FSDP the FSDP units "
                                                                  "(one per transformer block) replace gradient "
                                                                  "buckets"))
    return out


def codec_issues(spec: CompressionSpec, path: str = "communication.compression") -> list[Issue]:
    """A compression spec's parameters belong to its method: topk and randomk need a ratio in (0, 1], only they
    take one, only powersgd takes a rank (>= 1), and error feedback can be turned off only where a codec keeps a
    residual."""
    try:
        method = CompressionMethod(spec.method)
    except ValueError:  # a spec built in code (the schema admits only these names)
        return [bad_value(f"{path}.method", spec.method, "one of " + ", ".join(m.value for m in CompressionMethod))]
    out = []
    r = spec.ratio
    if method in USES_RATIO and r is None:
        out.append(Issue(f"{path}.ratio", f"is required for method {method.value!r}: the fraction of elements kept, "
                                          "in (0, 1], e.g. 0.01"))
    elif r is not None and method not in USES_RATIO:
        out.append(bad_value(f"{path}.ratio", r, f"no ratio for method {method.value!r} (only topk and randomk "
                                                 "take one)"))
    elif r is not None and (isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 < r <= 1):
        out.append(bad_value(f"{path}.ratio", r, "a fraction of elements kept in (0, 1], e.g. 0.01"))
    k = spec.rank
    if k is not None and method not in USES_RANK:
        out.append(bad_value(f"{path}.rank", k, f"no rank for method {method.value!r} (only powersgd takes one)"))
    elif k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        out.append(bad_value(f"{path}.rank", k, "an integer rank >= 1, e.g. 4"))
    if not spec.error_feedback and method not in USES_ERROR_FEEDBACK:
        out.append(bad_value(f"{path}.error_feedback", False, f"true (method {method.value!r} keeps no residual; "
                             "only onebit, topk, randomk and powersgd have error feedback to turn off)"))
    return out


def training_issues(scenario: Scenario, timeline: bool) -> list[Issue]:
    """Every support rule of a training workload (nothing for a benchmark)."""
    if scenario.workload.model is None:
        return []
    return (parallelism_issues(scenario) + sync_issues(scenario) + phased_issues(scenario, timeline)
            + host_key_issues(scenario) + sharded_issues(scenario) + codec_issues(scenario.communication.compression))
