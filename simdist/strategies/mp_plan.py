"""One model-parallel (dp x tp x pp) iteration laid out before any event runs: layout, stages, per-chunk work.

`training.parallelism` and `training.placement_order` give the layout (simdist.layout); the model's
transformer blocks are cut into pp x v contiguous chunks balanced by their cost on one tp rank (whole blocks,
the embedding joining the first chunk and the head the last, so every boundary carries b x s x h
activations); each chunk's forward and backward per micro-batch are compute segments separated by the
Megatron tp collectives (strategies.tensor_parallel), with full recomputation repeating the chunk's forward
(and its collectives) before its backward, and selective recomputation the attention cores only. Pipeline
sends use Megatron's scatter/gather (Narayanan et al. 2021, section 4.1): with tp > 1 each tp rank sends its
1/tp slice and the receiving tp group all_gathers it over the node's links (sequence parallelism keeps the
activations sequence-sharded, so no gather). Every stage's dp gradients are all_reduced in buckets after its
last backward micro-batch, then the optimizer steps its shard.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from simdist.collectives.schedule import CollectiveOp
from simdist.compute import ACTIVATION_BYTES, optimizer_step_time
from simdist.errors import ScenarioError
from simdist.graph.tasks import RankClass
from simdist.layout import Layout, build_layout
from simdist.memory import TransformerShape
from simdist.scenario import PipelineSchedule, Recompute, Scenario
from simdist.strategies.pipeline_schedule import Orders, balance_stages, boundary_bytes, schedule_order
from simdist.strategies.tensor_parallel import Phase, TensorParallelPlan, When, tensor_parallel_plan

_BLOCK = re.compile(r"^((?:blocks|encoder)\.\d+)\.")


@dataclass(frozen=True)
class TpCall:
    """A tensor-parallel collective one tp group runs (`size_bytes`: the full tensor, nccl-tests convention)."""

    op: CollectiveOp
    size_bytes: float
    what: str


@dataclass(frozen=True)
class Segment:
    """Compute of `compute_s` seconds (layers `name`), then the tp collective `call` (None: none)."""

    compute_s: float
    name: str
    call: TpCall | None = None
    kind: str = "forward"


@dataclass(frozen=True)
class ChunkWork:
    """What one virtual stage runs per micro-batch on one tp rank."""

    virtual_stage: int
    layers: tuple[int, int]  # [start, end) in forward order
    fwd: tuple[Segment, ...]
    bwd: tuple[Segment, ...]  # recomputation (if any) first, then the backward
    grad_bytes: float  # this tp rank's gradients of the chunk

    @property
    def fwd_s(self) -> float:
        return math.fsum(s.compute_s for s in self.fwd)

    @property
    def bwd_s(self) -> float:
        return math.fsum(s.compute_s for s in self.bwd)


@dataclass(frozen=True)
class StagePlan:
    """A pipeline stage (one rank class: its tp ranks and dp replicas): its chunks and optimizer step."""

    rank_class: RankClass
    chunks: tuple[ChunkWork, ...]  # chunk c = virtual stage c x pp + stage
    params: float  # parameters of one tp rank of the stage
    optimizer_s: float
    grad_buckets: tuple[float, ...]  # bytes of each dp all_reduce, in launch order


@dataclass(frozen=True)
class MpPlan:
    layout: Layout
    schedule: PipelineSchedule
    virtual_stages: int
    micro_batch: int
    micro_batches: int  # per pipeline per step
    orders: Orders
    stages: tuple[StagePlan, ...]
    p2p_bytes: float  # one (dp, tp) pair's activation (or gradient) send per micro-batch and boundary
    p2p_gather_bytes: float  # the tp all_gather after a receive (scatter/gather); 0 when none
    overlap: bool  # dp buckets of a chunk launch after its last backward (else after the stage's last)
    global_batch: int
    tokens_per_sample: int | None
    model_flops: float  # per step: 3 x forward FLOPs of every sample (MFU's numerator)
    hardware_flops: float  # per step, with recomputation's extra forwards (the paper's achieved FLOP/s)
    peak_flops: float  # one GPU's peak at the workload precision
    single_gpu_samples_per_s: float  # no communication, no bubble (scaling efficiency's reference)
    warnings: tuple[str, ...] = ()

    @property
    def pp(self) -> int:
        return self.layout.pp

    @property
    def tp(self) -> int:
        return self.layout.tp

    @property
    def dp(self) -> int:
        return self.layout.dp


def is_model_parallel(scenario: Scenario) -> bool:
    p = scenario.training.parallelism
    return p.tp > 1 or p.pp > 1


def transformer_shape(model) -> TransformerShape | None:
    """hidden, heads and sequence length read off the first attention core (None without one)."""
    s = model.tokens_per_sample
    core = next((x for x in model.layers if x.name.endswith("attn.core")), None)
    if core is None or not s:
        return None
    ad = core.output_elems / s  # heads x head_dim
    heads = (core.saved_elems - core.input_elems) / (s * s)  # Q, K, V and the probabilities
    if not (heads >= 1 and abs(heads - round(heads)) < 1e-9):
        heads = (core.saved_elems - core.input_elems - s * ad) / s  # flash attention: output and log-sum-exp
    proj = next(x for x in model.layers if x.name.endswith("attn.proj"))
    return TransformerShape(hidden=int(round(proj.output_elems / s)), heads=int(round(heads)), seq_len=int(s))


def units(model) -> list[tuple[int, int]]:
    """Contiguous [start, end) layer ranges the pipeline may cut between: one per block, the layers before the
    first block joined to it and those after the last joined to it."""
    starts: dict[str, int] = {}
    for i, x in enumerate(model.layers):
        m = _BLOCK.match(x.name)
        if m and m.group(1) not in starts:
            starts[m.group(1)] = i
    cuts = sorted(starts.values())
    if not cuts:
        raise ScenarioError.bad_value("training.parallelism.pp", "> 1", f"1 for {model.name}: pipeline stages "
                                      "are cut between transformer blocks")
    bounds = [0, *cuts[1:], len(model.layers)]
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def _segments(tpp: TensorParallelPlan, lo: int, hi: int, phase: Phase, names, kind: str,
              selective: bool = False) -> list[Segment]:
    """Compute cut at the tp collectives of layers lo..hi-1 in `phase` (backward runs them in reverse)."""
    out: list[Segment] = []
    acc, first = 0.0, None
    order = range(lo, hi) if phase is Phase.FWD else range(hi - 1, lo - 1, -1)
    last = None

    def flush(call):
        nonlocal acc, first
        label = f"{kind} {names[first]}..{names[last]}" if first is not None else f"{kind}"
        out.append(Segment(acc, label, call, kind))
        acc, first = 0.0, None

    for i in order:
        layer = tpp.layers[i]
        calls = [c for c in layer.collectives if c.phase is phase]
        for c in calls:
            if c.when is When.BEFORE:
                flush(TpCall(c.op, c.size_bytes, c.what))
        if first is None:
            first = i
        last = i
        acc += layer.time.fwd_s if phase is Phase.FWD else layer.time.bwd_s
        if selective and layer.role.value == "heads":
            acc += layer.time.fwd_s  # the attention core recomputed before its backward
        for c in calls:
            if c.when is When.AFTER:
                flush(TpCall(c.op, c.size_bytes, c.what))
    if first is not None or acc:
        flush(None)
    return [s for s in out if s.compute_s > 0 or s.call is not None]


def build_mp_plan(scenario: Scenario) -> MpPlan:
    """The layout, balanced chunks, per-chunk segments, p2p sizes and dp buckets of a model-parallel run."""
    from simdist.strategies.plan import DTYPE_BYTES, check_supported, resolve_batch

    dp = check_supported(scenario)
    s, t, w, comm = scenario, scenario.training, scenario.workload, scenario.communication
    model = w.model
    assert model is not None
    par = t.parallelism
    tp, pp, v = par.tp, par.pp, t.virtual_stages
    layout = build_layout(s.cluster, dp, tp, pp, t.placement_order)
    gpus = {g.gpu.key for g in s.cluster.node_groups}
    if len(gpus) > 1:
        raise ScenarioError.bad_value("cluster.nodes", sorted(gpus), "one GPU kind for tensor or pipeline "
                                      "parallelism (mixed clusters run data parallelism only)")
    gpu = s.cluster.node_groups[0].gpu
    precision = w.precision.value
    shape = transformer_shape(model)
    # Megatron-LM's DDP keeps a main_grad buffer in the gradient dtype and adds every micro-batch's weight
    # gradients into it with a separate kernel (compute.layer_times, accumulation_bytes)
    tpp = tensor_parallel_plan(model, gpu, t.micro_batch, precision, tp, t.sequence_parallel,
                               s.compute_calibration, heads=shape.heads if shape else None,
                               accumulation_bytes=DTYPE_BYTES[w.grad_dtype])
    rc = Recompute(t.recompute)
    if rc is not Recompute.NONE and shape is None:
        raise ScenarioError.bad_value("training.recompute", rc.value, "none for a model without attention blocks")
    replica = resolve_batch(s, dp) * t.grad_accumulation
    if replica % t.micro_batch:
        raise ScenarioError.bad_value("training.micro_batch", t.micro_batch,
                                      f"a divisor of the per-replica batch {replica}")
    m = replica // t.micro_batch
    orders = schedule_order(t.schedule, pp, m, v)
    names = [x.name for x in model.layers]
    cost = [x.time.total_s + (x.time.fwd_s if rc is Recompute.FULL else 0.0) for x in tpp.layers]
    us = units(model) if pp * v > 1 else [(0, len(names))]
    if pp * v > len(us):
        raise ScenarioError.bad_value("training.parallelism.pp", pp, f"pp x virtual_stages = {pp * v} at most "
                                      f"the model's {len(us)} blocks")
    ucost = [math.fsum(cost[a:b]) for a, b in us]
    ranges = [(us[a][0], us[b - 1][1]) for a, b in balance_stages(ucost, pp * v)]
    grad_bytes = DTYPE_BYTES[w.grad_dtype]
    cal = s.compute_calibration
    stages = []
    for st in range(pp):
        ranks = tuple(sorted(r for g in layout.pp_groups() for r in [g[st]]))
        rank_class = RankClass(st, ranks, 0, gpu.key, t.micro_batch)
        chunks = []
        for c in range(v):
            vs = c * pp + st
            lo, hi = ranges[vs]
            fwd = _segments(tpp, lo, hi, Phase.FWD, names, "forward")
            bwd = _segments(tpp, lo, hi, Phase.BWD, names, "backward", selective=rc is Recompute.SELECTIVE)
            if rc is Recompute.FULL:
                bwd = [Segment(x.compute_s, x.name.replace("forward", "recompute", 1), x.call, "recompute")
                       for x in fwd] + bwd
            gb = sum(tpp.layers[i].shard.params for i in range(lo, hi)) * grad_bytes
            chunks.append(ChunkWork(vs, (lo, hi), tuple(fwd), tuple(bwd), float(gb)))
        params = float(sum(tpp.layers[i].shard.params for c in chunks for i in range(*c.layers)))
        opt = optimizer_step_time(int(params), gpu, t.optimizer.value, precision, grad_dtype=w.grad_dtype.value,
                                  calibration=cal)
        stages.append(StagePlan(rank_class, tuple(chunks), params, opt, _buckets(chunks, comm.bucket_size_bytes,
                                                                                 comm.overlap)))
    act = ACTIVATION_BYTES[precision]
    p2p = gather = 0.0
    if pp > 1:
        h = shape.hidden if shape else int(model.layers[ranges[0][1] - 1].output_elems)
        seq = shape.seq_len if shape else 1
        shards = tp if tp > 1 else 1
        p2p = boundary_bytes(t.micro_batch, seq, h, act, shards)
        gather = 0.0 if (tp == 1 or t.sequence_parallel) else float(t.micro_batch * seq * h * act)
    global_batch = replica * dp
    fwd_flops = model.fwd_flops
    extra = 0.0
    if rc is Recompute.FULL:
        extra = sum(x.fwd_flops for x in model.layers if _BLOCK.match(x.name))
    elif rc is Recompute.SELECTIVE:
        extra = sum(x.fwd_flops for x in model.layers if x.name.endswith("attn.core"))
    peak = gpu.flops(precision)
    # the same GPUs with no communication and no bubble: every stage busy m micro-batches, then its step
    step_s = max(m * math.fsum(c.fwd_s + c.bwd_s for c in x.chunks) + x.optimizer_s for x in stages)
    single = global_batch / step_s if step_s > 0 else 0.0
    return MpPlan(layout, t.schedule, v, t.micro_batch, m, orders, tuple(stages), p2p, gather, comm.overlap,
                  global_batch, model.tokens_per_sample, 3.0 * fwd_flops * global_batch,
                  (3.0 * fwd_flops + extra) * global_batch, peak, single, layout.warnings)


def _buckets(chunks, bucket_size_bytes: float, overlap: bool) -> tuple[float, ...]:
    """Each chunk's gradients (last chunk first: backward finishes it first) in buckets of at most the cap."""
    out = []
    for c in reversed(chunks):
        n = max(1, math.ceil(c.grad_bytes / bucket_size_bytes - 1e-12)) if c.grad_bytes else 0
        out += [c.grad_bytes / n] * n
    return tuple(out)


def chunk_of_bucket(stage: StagePlan, bucket_size_bytes: float) -> list[int]:
    """The chunk index each of the stage's buckets belongs to (buckets are listed last chunk first)."""
    out = []
    for ci in reversed(range(len(stage.chunks))):
        g = stage.chunks[ci].grad_bytes
        n = max(1, math.ceil(g / bucket_size_bytes - 1e-12)) if g else 0
        out += [ci] * n
    return out
