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
from simdist.compression import make_codec
from simdist.compression.placement import bucket_codec_cost, codec_path, ps_pushers
from simdist.compute import (DTYPE_BYTES, launch_overhead_s, layer_times, memory_bandwidth_Bps,
                             optimizer_step_time)
from simdist.graph.tasks import RankClass
from simdist.hardware.specs import HOST_CPU_SERVER
from simdist.input_pipeline import loader_samples_per_s
from simdist.scenario import Scenario, StrategyKind, SyncMode
from simdist.strategies.batch_split import observed_slowdowns, split_batches
from simdist.strategies.buckets import (Bucket, bucket_prescale_s, fusion_copy_s, grad_copy_back_s, make_buckets,
                                        negotiation_s, shifted_by_prescale)
from simdist.strategies.stragglers import gpu_slowdowns
from simdist.strategies.update_cost import micro_batch_processing_time, update_time
from simdist.workload.lora import trainable_param_count


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
    fusion_copy_s: tuple[float, ...] = ()  # per bucket, Horovod's fusion-buffer copy, each way (buckets.fusion_copy_s)
    grad_copy_s: tuple[float, ...] = ()  # per bucket, DDP's copy back into .grad after its exchange (grad_copy_back_s)

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
    negotiation_s: float = 0.0  # Horovod's per-cycle cache agreement before a fused launch (buckets.negotiation_s)

    @property
    def slowest(self) -> ClassCompute:
        return max(self.classes, key=lambda c: (self.micro_steps * c.step_s + c.optimizer_s, -c.rank_class.index))

    @property
    def codec_s(self) -> float:
        """The slowest class's encode and decode seconds per iteration."""
        return sum(self.slowest.encode_s) + sum(self.slowest.decode_s)

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


def _fusion_copies(scenario: Scenario, buckets, plans, gpu) -> tuple[float, ...]:
    """Horovod's fusion-buffer copy of each bucket on `gpu`, each way (bucketing fusion: Horovod's tensor fusion;
    DDP's buckets are the gradients' own storage: none). The buffer holds what the bucket's collectives carry."""
    if scenario.communication.bucketing.value != "fusion":
        return ()
    cal = scenario.compute_calibration
    bw, launch = memory_bandwidth_Bps(gpu, cal), launch_overhead_s(cal)
    return tuple(fusion_copy_s(bk, sum(size for _, size in p.collectives), bw, launch) for bk, p in zip(buckets, plans))


def is_model_parallel(scenario: Scenario) -> bool:
    """Whether tp, pp, cp or ep is above 1 (the model-parallel plan, strategies/mp_plan.py, runs it)."""
    p = scenario.training.parallelism
    return p.tp > 1 or p.pp > 1 or p.cp > 1 or p.ep > 1


def no_ddp_reducer(scenario: Scenario) -> str | None:
    """Why PyTorch DDP's reducer (its buckets, their copies back into .grad) does not run in `scenario`, or None
    where it does: bsp data parallelism over more than one rank with bucketing ddp on an all-reduce strategy.
    The one rule for the copies (`_grad_copies`) and for io.rules_ddp's refusal of gradient_as_bucket_view."""
    t, comm = scenario.training, scenario.communication
    if scenario.workload.benchmark is not None:
        return "a benchmark has no gradient buckets"
    if is_model_parallel(scenario):
        return "tp, pp, cp or ep > 1 runs Megatron-Core's DDP, whose gradients already live in its contiguous buffer"
    if t.parallelism.zero:
        return "ZeRO / FSDP reduce-scatter their own flat gradient buffers, not DDP's buckets"
    if comm.strategy is StrategyKind.PS:
        return "parameter servers are not DDP's reducer"
    if str(comm.bucketing) != "ddp":
        return f"bucketing '{comm.bucketing}' is Horovod's fusion buffer, not DDP's reducer"
    if t.sync is not SyncMode.BSP:
        return f"training.sync {t.sync.value} is modelled without DDP's reducer (bsp only)"
    if str(comm.compression.method) == "onebit":
        return "DeepSpeed's 1-bit all-reduce runs in its optimizer, not DDP's reducer"
    if any(g.gpu.is_tpu for g in scenario.cluster.node_groups):
        return "XLA reduces a TPU's gradients in place; DDP's reducer does not run"
    if data_parallel_degree(scenario) <= 1:
        return "one data-parallel rank trains without DDP"
    return None


def _grad_copies(scenario: Scenario, buckets, grad_bytes: float, gpu) -> tuple[float, ...]:
    """DDP's copy of each reduced bucket back into the parameters' .grad on the compute stream, after the backward
    (PyTorch's reducer, buckets.grad_copy_back_s, with or without a comm hook), wherever the reducer runs
    (`no_ddp_reducer`): not on one GPU (trained without DDP: the single-GPU baseline) nor where another framework
    reduces. None either with communication.gradient_as_bucket_view: each .grad is a view of its bucket."""
    if scenario.communication.gradient_as_bucket_view or no_ddp_reducer(scenario) is not None:
        return ()
    cal = scenario.compute_calibration
    bw, launch = memory_bandwidth_Bps(gpu, cal), launch_overhead_s(cal)
    return tuple(grad_copy_back_s(bk, grad_bytes, bw, launch) for bk in buckets)


def _with_prescale(scenario: Scenario, buckets, grad_bytes: float, gpu, ready: list[float]
                   ) -> tuple[tuple[float, ...], float]:
    """Bucket-ready times and extra backward time of DDP's per-bucket average (communication.ddp_average
    per_bucket: a division kernel on the compute stream as each bucket fills, buckets.bucket_prescale_s); none with
    in_copy (the division rides on each gradient's copy into its bucket)."""
    if scenario.communication.ddp_average.value != "per_bucket":
        return tuple(ready), 0.0
    cal = scenario.compute_calibration
    bw, launch = memory_bandwidth_Bps(gpu, cal), launch_overhead_s(cal)
    return shifted_by_prescale(ready, [bucket_prescale_s(bk.size_bytes(grad_bytes), bw, launch) for bk in buckets])


def _negotiation(scenario: Scenario, dp: int) -> float:
    """Horovod's per-cycle agreement (bucketing fusion on an all-reduce strategy): its controller's messages
    between nodes take the NIC's latency (the slowest group's); inside one node they are shared-memory messages
    of about a microsecond, not charged."""
    comm, cluster = scenario.communication, scenario.cluster
    if comm.bucketing.value != "fusion" or comm.strategy == StrategyKind.PS or cluster.num_nodes <= 1:
        return 0.0
    return negotiation_s(dp, max(g.nic.link.latency_s for g in cluster.node_groups))


def resolve_batch(scenario: Scenario, dp: int) -> int:
    """Samples per GPU per micro-step (equal split), from batch_per_gpu or global_batch / (dp x accumulation)."""
    w, k = scenario.workload, scenario.training.grad_accumulation
    if w.batch_per_gpu is not None:
        return w.batch_per_gpu
    if w.global_batch is not None:
        assert w.global_batch % (dp * k) == 0, "io.rules_training: global_batch a multiple of dp x accumulation"
        return w.global_batch // (dp * k)
    raise AssertionError("io.rules_training: a batch per GPU or a global batch")


def data_parallel_degree(scenario: Scenario) -> int:
    """dp: training.parallelism.dp, or the GPUs left over by tp x cp x pp (io.resolve checks dp x tp x cp x pp
    covers the cluster and what each parallelism runs with)."""
    p = scenario.training.parallelism
    return p.dp if p.dp is not None else scenario.cluster.num_gpus // (p.tp * p.cp * p.pp)


def anchor_scale(scenario: Scenario, group: int) -> float:
    """workload.single_gpu_throughput: the factor on node group `group`'s GPU compute (layers and optimizer) that
    makes its single-GPU step at the scenario's batch_per_gpu take batch / the measured throughput (1.0 unset)."""
    w = scenario.workload
    if w.single_gpu_throughput is None:
        return 1.0
    assert w.batch_per_gpu is not None, "io.rules_training: single_gpu_throughput is measured at batch_per_gpu"
    gpu, cal = scenario.cluster.node_groups[group].gpu, scenario.compute_calibration
    times = layer_times(w.model, gpu, w.batch_per_gpu, w.precision.value, calibration=cal,
                        memory_format=w.memory_format)
    trainable = trainable_param_count(w.model)
    o = update_time(trainable, gpu, scenario)
    k = scenario.training.grad_accumulation
    predicted = k * (sum(x.total_s for x in times) + micro_batch_processing_time(trainable, gpu, scenario)) + o
    measured = k * w.batch_per_gpu / w.single_gpu_throughput
    pipeline = w.input_pipeline
    if pipeline is not None:
        alone = loader_samples_per_s(pipeline, 1, scenario.cluster.node_groups[group].intra_node.key)
        assert alone >= w.single_gpu_throughput, "io.rules_training: the input pipeline feeds one GPU's throughput"
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
            s = self.scenario
            w, cal = s.workload, s.compute_calibration
            gpu = s.cluster.node_groups[group].gpu
            times = layer_times(w.model, gpu, batch, w.precision.value, calibration=cal, memory_format=w.memory_format)
            trainable = trainable_param_count(w.model)  # LoRA: the adapters only (workload.lora)
            o = update_time(trainable, gpu, s)
            # per_micro_batch clipping / unscaling runs after each micro-batch's backward and needs all of its
            # gradients (the global norm): no gradient is ready for exchange before it ends
            tail = micro_batch_processing_time(trainable, gpu, s)
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
    dp = data_parallel_degree(scenario) if dp is None else dp
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
    model = scenario.workload.model
    assert model is not None
    dp = data_parallel_degree(scenario)
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
    # each GPU kind's codec work per bucket, where its framework runs it (compression/placement.py)
    codec_cost: dict[str, list] = {}
    classes = []
    single = 0.0
    for idx, ((g, b, x), ranks) in enumerate(members.items()):
        f, bw, o, layer_done = kinds.get(g, b)
        bucket_done = [layer_done[bk.ready_after_layer] for bk in buckets]
        gpu = scenario.cluster.node_groups[g].gpu
        if gpu.key not in codec_cost:
            path = codec_path(codec.method, gpu, is_ps)
            codec_cost[gpu.key] = [bucket_codec_cost(codec, bk.shapes, gpu, grad_bytes, dp, path, comm.ps_servers,
                                                     ps_pushers(scenario, dp)) for bk in buckets]
        rc = RankClass(idx, tuple(ranks), g, gpu.key, b, x)
        ready, prescale = _with_prescale(scenario, buckets, grad_bytes, gpu,
                                         [d * x if comm.overlap else bw * x for d in bucket_done])
        classes.append(ClassCompute(
            rank_class=rc, fwd_s=f * x, bwd_s=bw * x + prescale, optimizer_s=0.0 if is_ps else o * x,
            local_optimizer_s=o * x, ready_s=ready,
            encode_s=tuple(c.encode_s for c in codec_cost[gpu.key]),
            decode_s=tuple(c.decode_s for c in codec_cost[gpu.key]),
            fusion_copy_s=_fusion_copies(scenario, buckets, plans, gpu),
            grad_copy_s=_grad_copies(scenario, buckets, grad_bytes, gpu)))
        single += len(ranks) * single_gpu_rate(scenario, b * k, x * (k * (f + bw) + o), g)
    server_gpu = scenario.cluster.node_groups[0].gpu  # a PS server is modelled as a machine of the first group
    if comm.ps_server == "cpu":  # ... or its update streams through host memory (communication.ps.server)
        server_gpu = HOST_CPU_SERVER
    comms = []
    first_costs = next(iter(codec_cost.values()))
    for bucket in buckets:
        server_delay = 0.0
        if is_ps:  # servers apply the update to their shard; workers then skip their own step
            shard = bucket.elems / max(1, comm.ps_servers)
            server_delay = optimizer_step_time(int(shard), server_gpu, t.optimizer.value, precision,
                                                kernels=t.optimizer_kernels.value,
                                                grad_dtype=w.grad_dtype.value, calibration=cal)
        collectives = tuple(plans[len(comms)].collectives)
        cost = first_costs[len(comms)]
        if cost.ps_payload_bytes is not None:  # BytePS: compressed push and pull; the server re-codes
            collectives = ((CollectiveOp.ALL_REDUCE, cost.ps_payload_bytes),)
            server_delay += cost.server_s
        comms.append(BucketComm(bucket, collectives, server_delay))
    return IterationPlan(classes=tuple(classes), micro_steps=k, buckets=tuple(comms), dp=dp,
                         tokens_per_sample=model.tokens_per_sample, single_gpu_samples_per_s=single,
                         overlap=comm.overlap, fusion_cycle_s=comm.fusion_cycle_s,
                         negotiation_s=_negotiation(scenario, dp), global_batch=sum(batches) * k,
                         class_by_rank=tuple(by_rank), layer_names=tuple(x.name for x in model.layers))
