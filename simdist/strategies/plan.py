"""One data-parallel iteration laid out before any event runs: compute times, buckets, their collectives.

Both fidelities share this plan: `simulate` plays it on the flow network, `estimate` folds it with
closed-form collective times. Everything here is per iteration and per GPU; in BSP the slowest GPU
sets each time (heterogeneous clusters and static stragglers wait for their slowest GPU), while the
asynchronous modes use each worker's own times (`IterationPlan.workers`).
"""
from __future__ import annotations

from dataclasses import dataclass

from simdist.collectives.schedule import CollectiveOp
from simdist.errors import ScenarioError
from simdist.hardware.specs import GpuSpec
from simdist.scenario import Precision, Scenario, StrategyKind, SyncMode
from simdist.strategies.buckets import Bucket, make_buckets
from simdist.strategies.stragglers import gpu_slowdowns

DTYPE_BYTES = {Precision.FP32: 4, Precision.TF32: 4, Precision.FP16: 2, Precision.BF16: 2, Precision.FP8: 1}


@dataclass(frozen=True)
class BucketComm:
    """How one bucket is communicated: when it is ready, codec costs, and the collectives on the wire."""

    bucket: Bucket
    ready_s: float  # after the start of the last micro-batch's backward
    encode_s: float
    decode_s: float
    collectives: tuple[tuple[CollectiveOp, float], ...]
    server_delay_s: float = 0.0  # PS: the server's update of its shard


@dataclass(frozen=True)
class WorkerCompute:
    """One worker's own compute per micro-batch (its GPU kind times its straggler slowdown)."""

    fwd_s: float
    bwd_s: float
    optimizer_s: float  # its local optimizer step (asynchronous PS workers skip it: the server steps)
    ready_s: tuple[float, ...]  # per bucket, after the start of the last backward (bwd_s without overlap)
    slowdown: float = 1.0


@dataclass(frozen=True)
class IterationPlan:
    fwd_s: float  # one micro-batch forward, slowest GPU
    bwd_s: float  # one micro-batch backward, slowest GPU
    micro_steps: int  # gradient accumulation: forward+backward passes per optimizer step
    optimizer_s: float
    buckets: tuple[BucketComm, ...]
    batch_per_gpu: int  # samples per GPU per micro-step
    dp: int
    tokens_per_sample: int | None
    single_gpu_samples_per_s: float  # the same GPUs with no communication (for scaling efficiency)
    overlap: bool
    fusion_cycle_s: float
    workers: tuple[WorkerCompute, ...] = ()  # per rank (GPU order)
    local_optimizer_s: float = 0.0  # slowest GPU's own optimizer step (local SGD steps locally even with PS)

    @property
    def global_batch(self) -> int:
        return self.batch_per_gpu * self.dp * self.micro_steps

    @property
    def compute_s(self) -> float:
        return self.micro_steps * (self.fwd_s + self.bwd_s)


def resolve_batch(scenario: Scenario, dp: int) -> int:
    """Samples per GPU per micro-step, from batch_per_gpu or global_batch / (dp x accumulation)."""
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
    """The data-parallel loop's scope; returns dp. Model parallelism is a later issue."""
    t = scenario.training
    p = t.parallelism
    n = scenario.cluster.num_gpus
    if p.tp != 1 or p.pp != 1:
        raise ScenarioError.bad_value("training.parallelism", {"tp": p.tp, "pp": p.pp},
                                      "tp = pp = 1 (tensor and pipeline parallelism are not implemented yet)")
    if p.zero != 0:
        raise ScenarioError.bad_value("training.parallelism.zero", p.zero, "0 (ZeRO is not implemented yet)")
    dp = p.dp if p.dp is not None else n
    if dp != n:
        raise ScenarioError.bad_value("training.parallelism.dp", dp, f"the number of GPUs ({n}) for data parallelism")
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


def build_plan(scenario: Scenario) -> IterationPlan:
    """Compute per-layer times on every GPU kind, pack buckets, and give each bucket its collectives."""
    from simdist.compression import make_codec
    from simdist.compute import layer_times, optimizer_step_time

    model = scenario.workload.model
    assert model is not None
    dp = check_supported(scenario)
    batch = resolve_batch(scenario, dp)
    w, comm, t = scenario.workload, scenario.communication, scenario.training
    precision = w.precision.value
    grad_bytes = DTYPE_BYTES[w.grad_dtype]
    buckets = make_buckets(model, comm.bucket_size_bytes, grad_bytes, comm.first_bucket_bytes, rule=comm.bucketing.value)
    cal = scenario.compute_calibration  # a profile's kind factors etc. (None: the documented defaults)
    method = getattr(comm.compression.method, "value", comm.compression.method)
    codec = make_codec(comm.compression, cal.codec_cost_factor(str(method)) if cal else 1.0)
    is_ps = comm.strategy == StrategyKind.PS

    fwd = bwd = opt = 0.0
    ready = [0.0] * len(buckets)
    single = 0.0
    gpus = _gpu_kinds(scenario)
    slowdowns = gpu_slowdowns(scenario)
    gpu_keys = [g.key for g in scenario.cluster.gpu_specs()]
    k = t.grad_accumulation
    per_kind: dict[str, tuple[float, float, float, list[float]]] = {}
    for gpu, count in gpus:
        times = layer_times(model, gpu, batch, precision, calibration=cal)
        f = sum(x.fwd_s for x in times)
        b = sum(x.bwd_s for x in times)
        o = optimizer_step_time(model.params, gpu, t.optimizer.value, precision, grad_dtype=w.grad_dtype.value,
                                calibration=cal)
        # backward runs from the last layer to the first: time until layer i's gradients exist
        done_after = [0.0] * len(times)
        acc = 0.0
        for i in range(len(times) - 1, -1, -1):
            acc += times[i].bwd_s
            done_after[i] = acc
        bucket_done = [done_after[bucket.ready_after_layer] for bucket in buckets]
        per_kind[gpu.key] = (f, b, o, bucket_done)
        slow = [x for key, x in zip(gpu_keys, slowdowns) if key == gpu.key and x != 1.0]
        for x in [1.0] + slow:  # the nominal GPUs, then each straggler of this kind
            for j in range(len(buckets)):
                ready[j] = max(ready[j], bucket_done[j] * x)
            fwd, bwd, opt = max(fwd, f * x), max(bwd, b * x), max(opt, o * x)
        single += (count - len(slow)) * batch * k / (k * (f + b) + o)
        single += sum(batch * k / (x * (k * (f + b) + o)) for x in slow)
    workers = []
    for key, x in zip(gpu_keys, slowdowns):
        f, b, o, bucket_done = per_kind[key]
        workers.append(WorkerCompute(fwd_s=f * x, bwd_s=b * x, optimizer_s=o * x, slowdown=x,
                                     ready_s=tuple(d * x if comm.overlap else b * x for d in bucket_done)))

    server_gpu = gpus[0][0]  # a PS server is modelled as a machine of the cluster's first kind
    if comm.ps_server == "cpu":  # ... or its update streams through host memory (communication.ps.server)
        from simdist.hardware.specs import HOST_CPU_SERVER

        server_gpu = HOST_CPU_SERVER
    comms = []
    for j, bucket in enumerate(buckets):
        comm_plan = codec.plan(bucket.shapes, grad_bytes, dp)
        server_delay = 0.0
        if is_ps:  # servers apply the update to their shard; workers then skip their own step
            shard = bucket.elems / max(1, comm.ps_servers)
            server_delay = optimizer_step_time(int(shard), server_gpu, t.optimizer.value, precision,
                                               grad_dtype=w.grad_dtype.value, calibration=cal)
        comms.append(BucketComm(
            bucket=bucket,
            ready_s=ready[j] if comm.overlap else bwd,
            encode_s=max(codec.encode_time_s(bucket.shapes, g, grad_bytes, dp) for g, _ in gpus),
            decode_s=max(codec.decode_time_s(bucket.shapes, g, dp, grad_bytes) for g, _ in gpus),
            collectives=tuple(comm_plan.collectives),
            server_delay_s=server_delay,
        ))
    return IterationPlan(
        fwd_s=fwd, bwd_s=bwd, micro_steps=t.grad_accumulation, optimizer_s=0.0 if is_ps else opt,
        buckets=tuple(comms), batch_per_gpu=batch, dp=dp, tokens_per_sample=model.tokens_per_sample,
        single_gpu_samples_per_s=single, overlap=comm.overlap, fusion_cycle_s=comm.fusion_cycle_s,
        workers=tuple(workers), local_optimizer_s=opt,
    )


def _gpu_kinds(scenario: Scenario) -> list[tuple[GpuSpec, int]]:
    """Each distinct GPU model with how many of it the cluster has, in group order."""
    kinds: dict[str, tuple[GpuSpec, int]] = {}
    for g in scenario.cluster.node_groups:
        spec, count = kinds.get(g.gpu.key, (g.gpu, 0))
        kinds[g.gpu.key] = (spec, count + g.count * g.gpus_per_node)
    return list(kinds.values())
