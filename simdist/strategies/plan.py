"""One data-parallel iteration laid out before any event runs: compute times, buckets, their collectives.

Both fidelities share this plan: `simulate` plays it on the flow network, `estimate` folds it with
closed-form collective times. Everything here is per iteration and per GPU; in BSP the slowest GPU
sets each time (heterogeneous clusters wait for their slowest group).
"""
from __future__ import annotations

from dataclasses import dataclass

from simdist.collectives.schedule import CollectiveOp
from simdist.errors import ScenarioError
from simdist.hardware.specs import GpuSpec
from simdist.scenario import Precision, Scenario, StrategyKind, SyncMode
from simdist.strategies.buckets import Bucket, make_buckets

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
    """The data-parallel loop's scope; returns dp. Model parallelism and async modes are later issues."""
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
    if t.sync != SyncMode.BSP:
        raise ScenarioError.bad_value("training.sync", t.sync.value, "bsp (asp, ssp and local_sgd are not implemented yet)")
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
    buckets = make_buckets(model, comm.bucket_size_bytes, grad_bytes)
    codec = make_codec(comm.compression)
    is_ps = comm.strategy == StrategyKind.PS

    fwd = bwd = opt = 0.0
    ready = [0.0] * len(buckets)
    single = 0.0
    gpus = _gpu_kinds(scenario)
    for gpu, count in gpus:
        times = layer_times(model, gpu, batch, precision)
        f = sum(x.fwd_s for x in times)
        b = sum(x.bwd_s for x in times)
        o = optimizer_step_time(model.params, gpu, t.optimizer.value, precision, grad_dtype=w.grad_dtype.value)
        # backward runs from the last layer to the first: time until layer i's gradients exist
        done_after = [0.0] * len(times)
        acc = 0.0
        for i in range(len(times) - 1, -1, -1):
            acc += times[i].bwd_s
            done_after[i] = acc
        for j, bucket in enumerate(buckets):
            ready[j] = max(ready[j], done_after[bucket.ready_after_layer])
        fwd, bwd, opt = max(fwd, f), max(bwd, b), max(opt, o)
        k = t.grad_accumulation
        single += count * batch * k / (k * (f + b) + o)

    server_gpu = gpus[0][0]  # a PS server is modelled as a machine of the cluster's first kind
    comms = []
    for j, bucket in enumerate(buckets):
        comm_plan = codec.plan(bucket.shapes, grad_bytes, dp)
        server_delay = 0.0
        if is_ps:  # servers apply the update to their shard; workers then skip their own step
            shard = bucket.elems / max(1, comm.ps_servers)
            server_delay = optimizer_step_time(int(shard), server_gpu, t.optimizer.value, precision,
                                               grad_dtype=w.grad_dtype.value)
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
    )


def _gpu_kinds(scenario: Scenario) -> list[tuple[GpuSpec, int]]:
    """Each distinct GPU model with how many of it the cluster has, in group order."""
    kinds: dict[str, tuple[GpuSpec, int]] = {}
    for g in scenario.cluster.node_groups:
        spec, count = kinds.get(g.gpu.key, (g.gpu, 0))
        kinds[g.gpu.key] = (spec, count + g.count * g.gpus_per_node)
    return list(kinds.values())
