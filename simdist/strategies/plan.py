"""One data-parallel iteration laid out before any event runs: rank classes, compute times, buckets.

Both fidelities and every sync mode build their execution graphs from this plan. Ranks with the
same node group (hence GPU and network interior), micro-batch and straggler slowdown form one
`RankClass` with its own compute times; the slowest class's figures are what the iteration-level
properties (`fwd_s`, `bwd_s`, `compute_s`) report.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from simdist.collectives.schedule import CollectiveOp
from simdist.errors import ScenarioError
from simdist.graph.tasks import RankClass
from simdist.scenario import Precision, Scenario, StrategyKind, SyncMode
from simdist.strategies.batch_split import observed_slowdowns, split_batches
from simdist.strategies.buckets import Bucket, make_buckets
from simdist.strategies.stragglers import gpu_slowdowns

DTYPE_BYTES = {Precision.FP32: 4, Precision.TF32: 4, Precision.FP16: 2, Precision.BF16: 2, Precision.FP8: 1}


@dataclass(frozen=True)
class BucketComm:
    """How one bucket is communicated: its collectives on the wire and the PS servers' update."""

    bucket: Bucket
    collectives: tuple[tuple[CollectiveOp, float], ...]
    server_delay_s: float = 0.0  # PS: the server's update of its shard


@dataclass(frozen=True)
class ClassCompute:
    """One rank class's own compute per micro-batch on its GPU (times its straggler slowdown)."""

    rank_class: RankClass
    fwd_s: float
    bwd_s: float
    optimizer_s: float  # its own optimizer step (a PS worker under BSP/asp/ssp skips it: the servers step)
    local_optimizer_s: float  # its own step even with PS (local SGD steps locally)
    ready_s: tuple[float, ...]  # per bucket, after the start of the last backward (bwd_s without overlap)
    encode_s: tuple[float, ...]  # per bucket, the codec on this class's GPU
    decode_s: tuple[float, ...]

    @property
    def step_s(self) -> float:
        """Forward + backward of one micro-batch (accumulation multiplies it)."""
        return self.fwd_s + self.bwd_s


@dataclass(frozen=True)
class IterationPlan:
    classes: tuple[ClassCompute, ...]
    micro_steps: int  # gradient accumulation: forward+backward passes per optimizer step
    buckets: tuple[BucketComm, ...]
    dp: int
    tokens_per_sample: int | None
    single_gpu_samples_per_s: float  # the same GPUs with no communication (for scaling efficiency)
    overlap: bool
    fusion_cycle_s: float
    global_batch: int  # samples per optimizer step over all ranks
    class_by_rank: tuple[int, ...] = ()  # rank -> index of its class
    layer_names: tuple[str, ...] = ()  # the model's layers in forward order (names of the trace's tasks)

    @property
    def slowest(self) -> ClassCompute:
        return max(self.classes, key=lambda c: (self.micro_steps * c.step_s + c.optimizer_s, -c.rank_class.index))

    @property
    def fwd_s(self) -> float:
        return max(c.fwd_s for c in self.classes)

    @property
    def bwd_s(self) -> float:
        return max(c.bwd_s for c in self.classes)

    @property
    def optimizer_s(self) -> float:
        return max(c.optimizer_s for c in self.classes)

    @property
    def compute_s(self) -> float:
        return max(self.micro_steps * c.step_s for c in self.classes)

    @property
    def batch_per_gpu(self) -> int:
        """The micro-batch of the first class (all classes under an equal split)."""
        return self.classes[0].rank_class.batch

    def class_of(self) -> tuple[int, ...]:
        """Rank -> index of its class."""
        return self.class_by_rank

    def rank_samples(self) -> list[float]:
        """Samples every rank processes per optimizer step (rank order)."""
        per_class = [c.rank_class.batch * self.micro_steps for c in self.classes]
        return [per_class[c] for c in self.class_by_rank]


def resolve_batch(scenario: Scenario, dp: int) -> int:
    """Samples per GPU per micro-step (equal split), from batch_per_gpu or global_batch / (dp x accumulation)."""
    w, k = scenario.workload, scenario.training.grad_accumulation
    if w.batch_per_gpu is not None:
        return w.batch_per_gpu
    if w.global_batch is not None:
        if w.global_batch % (dp * k):
            raise ScenarioError.bad_value("workload.global_batch", w.global_batch,
                                          f"a multiple of dp x grad_accumulation = {dp * k}")
        return w.global_batch // (dp * k)
    raise ScenarioError("set workload.batch_per_gpu or workload.global_batch", "workload")


def check_supported(scenario: Scenario) -> int:
    """The scope of the training engine; returns dp. tp and pp run as BSP with an all-reduce strategy
    (strategies.mp_plan), with ZeRO over each stage's dp group when set (strategies.sharded_dp.check_sharded)."""
    t = scenario.training
    p = t.parallelism
    n = scenario.cluster.num_gpus
    mp = p.tp != 1 or p.pp != 1
    dp = p.dp if p.dp is not None else n // (p.tp * p.pp)
    if dp * p.tp * p.pp != n:
        raise ScenarioError.bad_value("training.parallelism", {"dp": dp, "tp": p.tp, "pp": p.pp},
                                      f"dp x tp x pp = the number of GPUs ({n})")
    if mp:
        if t.sync != SyncMode.BSP:
            raise ScenarioError.bad_value("training.sync", t.sync.value, "bsp with tp or pp > 1")
        if scenario.communication.strategy == StrategyKind.PS:
            raise ScenarioError.bad_value("communication.strategy", "ps", "an all-reduce strategy with tp or pp > 1")
        if scenario.communication.compression.method.value != "none":
            raise ScenarioError.bad_value("communication.compression", scenario.communication.compression.method.value,
                                          "none with tp or pp > 1 (gradient codecs run with data parallelism only)")
        if t.batch_split.value != "equal":
            raise ScenarioError.bad_value("training.batch_split", t.batch_split.value, "equal with tp or pp > 1")
        if scenario.failures is not None:
            raise ScenarioError.bad_value("failures", "...", "none with tp or pp > 1 (failures and stragglers run "
                                          "with data parallelism only)")
        from simdist.scenario import CommunicationSpec

        d = CommunicationSpec()
        for key, name in (("first_bucket_size", "first_bucket_bytes"), ("bucketing", "bucketing")):
            if getattr(scenario.communication, name) != getattr(d, name):
                raise ScenarioError.bad_value(f"communication.{key}", getattr(scenario.communication, name),
                                              "the default with tp or pp > 1 (each stage's gradients are cut into "
                                              "equal buckets of communication.bucket_size)")
        if t.convergence_factor != 1.0:
            raise ScenarioError.bad_value("training.convergence_factor", t.convergence_factor,
                                          "1 with tp or pp > 1 (BSP without compression converges as the baseline)")
        if scenario.communication.fusion_cycle_s:
            raise ScenarioError.bad_value("communication.fusion_cycle", scenario.communication.fusion_cycle_s,
                                          "0 with tp or pp > 1 (Horovod's fusion cycle is a data-parallel launcher)")
    check_host_keys(scenario, mp)
    if p.zero != 0:
        from simdist.strategies.sharded_dp import check_sharded

        check_sharded(scenario, dp)
    if t.sync in (SyncMode.ASP, SyncMode.SSP) and scenario.communication.strategy != StrategyKind.PS:
        raise ScenarioError.bad_value("training.sync", t.sync.value,
                                      "bsp or local_sgd with an all-reduce strategy (asp and ssp need "
                                      "communication.strategy: ps)")
    if t.sync == SyncMode.SSP and t.staleness < 0:
        raise ScenarioError.bad_value("training.staleness", t.staleness, "a bound >= 0")
    if t.local_steps < 1:
        raise ScenarioError.bad_value("training.local_steps", t.local_steps, "a period >= 1")
    if not t.convergence_factor > 0:
        raise ScenarioError.bad_value("training.convergence_factor", t.convergence_factor, "a factor > 0")
    return dp


def check_host_keys(scenario: Scenario, mp: bool) -> None:
    """Scope of workload.input_pipeline and workload.single_gpu_throughput (each refused where it would not act)."""
    w, t = scenario.workload, scenario.training
    lockstep = t.sync in (SyncMode.BSP, SyncMode.LOCAL_SGD)  # hybrid runs an asp phase, refused there
    if w.memory_format != "native" and (mp or t.parallelism.zero):
        raise ScenarioError.bad_value("workload.memory_format", w.memory_format, "native with tp, pp or ZeRO (their "
                                      "compute does not take the layout; a conv model runs data-parallel)")
    for key, value in (("input_pipeline", w.input_pipeline), ("single_gpu_throughput", w.single_gpu_throughput)):
        if value is None:
            continue
        shown = value if isinstance(value, float) else "{...}"
        if mp:
            raise ScenarioError.bad_value(f"workload.{key}", shown, "unset with tp or pp > 1 (the data-parallel "
                                          "engine applies it)")
        if not lockstep:
            raise ScenarioError.bad_value(f"workload.{key}", shown, f"unset with training.sync {t.sync.value} (only "
                                          "bsp and local_sgd have a common step to bound; hybrid runs an asp phase)")
    if w.input_pipeline is not None:
        most = max(g.gpus_per_node for g in scenario.cluster.node_groups)
        if w.input_pipeline.host_cores <= most:
            raise ScenarioError.bad_value("workload.input_pipeline.host_cores", w.input_pipeline.host_cores,
                                          f"more cores than GPUs per node ({most}): each GPU's training process "
                                          "keeps one core busy")
    if w.single_gpu_throughput is not None:
        kinds = {g.gpu.key for g in scenario.cluster.node_groups}
        if len(kinds) > 1:
            raise ScenarioError.bad_value("workload.single_gpu_throughput", w.single_gpu_throughput,
                                          f"unset with several GPU kinds ({', '.join(sorted(kinds))}): it is "
                                          "measured on one")
        if t.parallelism.zero:
            raise ScenarioError.bad_value("workload.single_gpu_throughput", w.single_gpu_throughput,
                                          "unset with ZeRO / FSDP (their per-layer compute is not anchored)")


def anchor_scale(scenario: Scenario, group: int) -> float:
    """workload.single_gpu_throughput: the factor on node group `group`'s GPU compute (layers and optimizer) that
    makes its single-GPU step at the scenario's batch_per_gpu take batch / the measured throughput (1.0 unset)."""
    w = scenario.workload
    if w.single_gpu_throughput is None:
        return 1.0
    from simdist.compute import layer_times
    from simdist.strategies.update_cost import micro_batch_processing_time, update_time

    if w.batch_per_gpu is None:
        raise ScenarioError.bad_value("workload.single_gpu_throughput", w.single_gpu_throughput,
                                      "used with workload.batch_per_gpu (the batch it was measured at)")
    gpu, cal = scenario.cluster.node_groups[group].gpu, scenario.compute_calibration
    times = layer_times(w.model, gpu, w.batch_per_gpu, w.precision.value, calibration=cal,
                        memory_format=w.memory_format)
    o = update_time(w.model.params, gpu, scenario)
    k = scenario.training.grad_accumulation
    predicted = k * (sum(x.total_s for x in times) + micro_batch_processing_time(w.model.params, gpu, scenario)) + o
    measured = k * w.batch_per_gpu / w.single_gpu_throughput
    pipeline = w.input_pipeline
    if pipeline is not None:
        from simdist.input_pipeline import loader_samples_per_s

        alone = loader_samples_per_s(pipeline, 1, scenario.cluster.node_groups[group].intra_node.key)
        if alone < w.single_gpu_throughput:
            raise ScenarioError.bad_value("workload.single_gpu_throughput", w.single_gpu_throughput,
                                          f"at most what the input pipeline delivers to one GPU ({alone:.4g} "
                                          "samples/s), or a faster pipeline")
    return measured / predicted


class _Kinds:
    """Per (node group, batch): forward, backward, optimizer step and per-layer gradient times, computed once."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario, self._cache = scenario, {}
        self._anchors: dict[int, float] = {}  # node group -> workload.single_gpu_throughput's compute factor

    def _anchor(self, group: int) -> float:
        if group not in self._anchors:
            self._anchors[group] = anchor_scale(self.scenario, group)
        return self._anchors[group]

    def step_s(self, group: int, batch: int) -> float:
        f, b, _, _ = self.get(group, batch)
        return f + b

    def get(self, group: int, batch: int) -> tuple[float, float, float, list[float]]:
        """(forward, backward, optimizer step, per layer (forward index) when its gradients exist after the
        start of the backward)."""
        key = (group, batch)
        if key not in self._cache:
            from simdist.compute import layer_times
            from simdist.strategies.update_cost import micro_batch_processing_time, update_time

            s = self.scenario
            w, cal = s.workload, s.compute_calibration
            gpu = s.cluster.node_groups[group].gpu
            times = layer_times(w.model, gpu, batch, w.precision.value, calibration=cal, memory_format=w.memory_format)
            o = update_time(w.model.params, gpu, s)
            # per_micro_batch clipping / unscaling runs after each micro-batch's backward and needs all of its
            # gradients (the global norm): no gradient is ready for exchange before it ends
            tail = micro_batch_processing_time(w.model.params, gpu, s)
            # backward runs from the last layer to the first: time until layer i's gradients exist
            done_after = [0.0] * len(times)
            acc = 0.0
            for i in range(len(times) - 1, -1, -1):
                acc += times[i].bwd_s
                done_after[i] = acc
            a = self._anchor(group)
            bwd = sum(x.bwd_s for x in times) + tail
            ready = [bwd] * len(done_after) if tail else done_after
            self._cache[key] = (a * sum(x.fwd_s for x in times), a * bwd, a * o, [a * d for d in ready])
        return self._cache[key]


def rank_groups(scenario: Scenario) -> list[int]:
    """Node group index of every rank (GPU order)."""
    return [i for i, g in enumerate(scenario.cluster.node_groups) for _ in range(g.count * g.gpus_per_node)]


def rank_batches(scenario: Scenario, dp: int | None = None, kinds: "_Kinds | None" = None) -> list[int]:
    """Micro-batch of every rank under `training.batch_split`."""
    dp = check_supported(scenario) if dp is None else dp
    batch = resolve_batch(scenario, dp)
    groups = rank_groups(scenario)
    if kinds is None:
        kinds = _Kinds(scenario)
    return split_batches(scenario.training.batch_split, batch, [str(g) for g in groups],
                         lambda key, b: kinds.step_s(int(key), b), observed_slowdowns(scenario))


def single_gpu_rate(scenario: Scenario, samples: float, step_s: float, group: int = 0) -> float:
    """Samples/s of one GPU training alone (the scaling-efficiency baseline): its step, or its input pipeline
    with the whole node's CPU cores (node group `group`'s CPU) when that is slower (simdist.input_pipeline)."""
    rate = samples / step_s
    pipeline = scenario.workload.input_pipeline
    if pipeline is not None:
        from simdist.input_pipeline import loader_samples_per_s

        rate = min(rate, loader_samples_per_s(pipeline, 1, scenario.cluster.node_groups[group].intra_node.key))
    return rate


def fusion_cycles(scenario: Scenario, kinds: _Kinds, members: dict[tuple, list[int]]) -> list[int] | None:
    """Horovod's tensor fusion with a cycle (communication.bucketing fusion, fusion_cycle > 0, overlap): per layer,
    the cycle tick after the start of the backward that picks its gradients up, once every rank has them (the
    slowest class's time). None where buckets are cut by size alone (no cycle, DDP's rule, or no overlap: every
    gradient is ready at once)."""
    comm = scenario.communication
    if not (comm.fusion_cycle_s > 0 and comm.bucketing.value == "fusion" and comm.overlap):
        return None
    per_class = [[x * d for d in kinds.get(g, b)[3]] for g, b, x in members]
    return [math.ceil(max(times) / comm.fusion_cycle_s - 1e-12) for times in zip(*per_class)]


def build_plan(scenario: Scenario, codec_spec=None) -> IterationPlan:
    """Rank classes with their compute, buckets, and each bucket's collectives after compression
    (`codec_spec` replaces the scenario's compression, e.g. none for the uncompressed baseline)."""
    from simdist.compression import make_codec
    from simdist.compute import optimizer_step_time

    model = scenario.workload.model
    assert model is not None
    dp = check_supported(scenario)
    w, comm, t = scenario.workload, scenario.communication, scenario.training
    precision = w.precision.value
    grad_bytes = DTYPE_BYTES[w.grad_dtype]
    cal = scenario.compute_calibration  # a profile's kind factors etc. (None: the documented defaults)
    spec = comm.compression if codec_spec is None else codec_spec
    method = getattr(spec.method, "value", spec.method)
    codec = make_codec(spec, cal.codec_cost_factor(str(method)) if cal else 1.0)
    is_ps = comm.strategy == StrategyKind.PS
    kinds = _Kinds(scenario)
    batches = rank_batches(scenario, dp, kinds)
    groups = rank_groups(scenario)
    slowdowns = gpu_slowdowns(scenario)
    members: dict[tuple, list[int]] = {}
    for r in range(dp):
        members.setdefault((groups[r], batches[r], slowdowns[r]), []).append(r)
    buckets = make_buckets(model, comm.bucket_size_bytes, grad_bytes, comm.first_bucket_bytes,
                           rule=comm.bucketing.value, cycle_of_layer=fusion_cycles(scenario, kinds, members))
    index = {key: i for i, key in enumerate(members)}
    by_rank = [index[(groups[r], batches[r], slowdowns[r])] for r in range(dp)]
    k = t.grad_accumulation
    plans = [codec.plan(bk.shapes, grad_bytes, dp) for bk in buckets]
    codec_s: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {}
    classes = []
    single = 0.0
    for idx, ((g, b, x), ranks) in enumerate(members.items()):
        f, bw, o, layer_done = kinds.get(g, b)
        bucket_done = [layer_done[bk.ready_after_layer] for bk in buckets]
        gpu = scenario.cluster.node_groups[g].gpu
        if gpu.key not in codec_s:  # a dense fallback runs no kernels
            codec_s[gpu.key] = (
                tuple(codec.encode_time_s(bk.shapes, gpu, grad_bytes, dp) if p.compressed else 0.0
                      for bk, p in zip(buckets, plans)),
                tuple(codec.decode_time_s(bk.shapes, gpu, dp, grad_bytes) if p.compressed else 0.0
                      for bk, p in zip(buckets, plans)))
        rc = RankClass(idx, tuple(ranks), g, gpu.key, b, x)
        classes.append(ClassCompute(
            rank_class=rc, fwd_s=f * x, bwd_s=bw * x, optimizer_s=0.0 if is_ps else o * x, local_optimizer_s=o * x,
            ready_s=tuple(d * x if comm.overlap else bw * x for d in bucket_done),
            encode_s=codec_s[gpu.key][0], decode_s=codec_s[gpu.key][1]))
        single += len(ranks) * single_gpu_rate(scenario, b * k, x * (k * (f + bw) + o), g)
    server_gpu = scenario.cluster.node_groups[0].gpu  # a PS server is modelled as a machine of the first group
    if comm.ps_server == "cpu":  # ... or its update streams through host memory (communication.ps.server)
        from simdist.hardware.specs import HOST_CPU_SERVER

        server_gpu = HOST_CPU_SERVER
    comms = []
    for bucket in buckets:
        server_delay = 0.0
        if is_ps:  # servers apply the update to their shard; workers then skip their own step
            shard = bucket.elems / max(1, comm.ps_servers)
            server_delay = optimizer_step_time(int(shard), server_gpu, t.optimizer.value, precision,
                                                kernels=t.optimizer_kernels.value,
                                                grad_dtype=w.grad_dtype.value, calibration=cal)
        comms.append(BucketComm(bucket, tuple(plans[len(comms)].collectives), server_delay))
    return IterationPlan(classes=tuple(classes), micro_steps=k, buckets=tuple(comms), dp=dp,
                         tokens_per_sample=model.tokens_per_sample, single_gpu_samples_per_s=single,
                         overlap=comm.overlap, fusion_cycle_s=comm.fusion_cycle_s, global_batch=sum(batches) * k,
                         class_by_rank=tuple(by_rank), layer_names=tuple(x.name for x in model.layers))
