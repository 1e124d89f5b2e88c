"""Graph builder for sharded data parallelism: ZeRO stages 1-3 and FSDP (= stage 3) over the dp group.

ZeRO-1/2 (DeepSpeed): backward is cut where gradient buckets (communication.bucket_size) become ready, as
DDP's is, and each bucket is reduce_scattered on the communication stream; the optimizer steps the rank's
1/dp shard; the updated parameters are all_gathered bucket by bucket (bf16, or fp8 with fp8_param_gather)
before the iteration ends. ZeRO-3/FSDP: forward and backward run as one compute task per FSDP unit segment
(`sharding.fsdp_units`: one unit per transformer block plus a root unit of the other layers); each unit's
parameters are all_gathered before its forward and again before its backward, prefetched one ahead (gather
k + 1 is issued when the first compute that needs gather k starts), and its gradients are reduce_scattered
when its backward ends. Every collective of a rank runs on its one communication stream in issue order, as
PyTorch's ProcessGroupNCCL runs the calls of one process group on one NCCL stream.

Gradient accumulation (`training.grad_accumulation` k): stage 1 keeps full gradients, so it accumulates
locally and reduce_scatters once, in the last micro-batch's backward (as DDP under no_sync; DeepSpeed
reduces stage 1 at the accumulation boundary). Stages 2 and 3 shard gradients, so every micro-batch
reduce_scatters its gradients (DeepSpeed stage >= 2, FSDP without no_sync), and stage 3 gathers the
parameters again in every micro-batch. `training.recompute: full` recomputes each block's forward at the
start of its backward (one block in `training.recompute_every`); `selective` recomputes the attention cores,
`selective_op` torchtitan's op policy (recompute_policy). Without overlap (communication.overlap:
false) nothing is prefetched and each compute task waits for every collective issued before it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simdist.collectives.schedule import CollectiveOp
from simdist.compute import ACTIVATION_BYTES, DTYPE_BYTES, layer_times
from simdist.graph.builder import GraphBuilder
from simdist.graph.tasks import Collective, Compute, Graph, Stream
from simdist.low_precision import gathered_param_bytes
from simdist.memory import FRAMEWORK_RESERVE_BYTES, MemoryEstimate, model_state_bytes, quantized_copy_bytes
from simdist.errors import InfeasibleError
from simdist.scenario import Recompute, Scenario, StrategyKind
from simdist.strategies.async_ps import worker_payload_bytes
from simdist.strategies.data_parallel import backward_segments
from simdist.strategies.plan import ClassCompute, IterationPlan
from simdist.strategies.recompute_policy import checkpointed, kept_elems, recomputed_fraction
from simdist.strategies.sharding import _BLOCK, RING_SEND_FACTOR, ShardUnit, fsdp_units, zero3_live_param_bytes
from simdist.strategies.update_cost import update_time
from simdist.workload.lora import frozen_param_count, trainable_param_count

AG, RS = CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER


@dataclass(frozen=True)
class Segment:
    """Consecutive layers (forward order) that need one unit's gathered parameters."""

    unit: int
    layers: tuple[int, ...]


@dataclass(frozen=True)
class ShardedPlan:
    """The data-parallel plan with sharded compute (recompute, 1/dp optimizer) and the stage's units."""

    plan: IterationPlan  # classes carry the sharded figures: optimizer on the shard, recompute in backward
    zero: int
    units: tuple[ShardUnit, ...]
    segments: tuple[Segment, ...]
    seg_fwd_s: tuple[tuple[float, ...], ...]  # per class, per segment
    seg_bwd_s: tuple[tuple[float, ...], ...]
    param_bytes: float  # bytes per gathered parameter (low_precision.gathered_param_bytes)
    grad_bytes: int  # bytes per reduced gradient element (workload.grad_dtype)
    # per unit, its trainable parameters: the gradients it reduce_scatters (all of them but LoRA's frozen base,
    # whose weights are gathered and never reduced: FSDP2's per-parameter sharding, PEFT's own wrap of adapters)
    unit_grad_elems: tuple[int, ...] = ()

    def collectives(self) -> list[tuple[CollectiveOp, float]]:
        """(op, full size in bytes) of every dp collective of one iteration, in issue order per kind."""
        k, out = self.plan.micro_steps, []
        if self.zero == 3:
            per = [(AG, u.params * self.param_bytes) for u in self.units] * 2 + \
                  [(RS, n * self.grad_bytes) for n in self.unit_grad_elems if n]
            return per * k
        rs = [(RS, bc.bucket.elems * self.grad_bytes) for bc in self.plan.buckets]
        out += rs * (k if self.zero == 2 else 1)
        out += [(AG, bc.bucket.elems * self.param_bytes) for bc in self.plan.buckets]
        return out

    def payload_bytes(self) -> float:
        """`sync.wire_bytes_per_iteration`: each worker's payload of every collective (its full gradient into a
        reduce_scatter, its 1/dp shard into an all_gather), as for DDP's codecs."""
        return sum(worker_payload_bytes(op, size, self.plan.dp) for op, size in self.collectives())

    def ring_send_bytes_per_rank(self) -> float:
        """Bytes each rank sends per iteration with ring algorithms: (n - 1) / n of every collective's size."""
        n = self.plan.dp
        return math.fsum(RING_SEND_FACTOR[op](n) * size for op, size in self.collectives()) if n > 1 else 0.0


def segments_of(model, units: tuple[ShardUnit, ...]) -> tuple[Segment, ...]:
    """Runs of layers owned by one unit; layers without a unit (parameter-free, outside blocks) join the run
    before them (the first ones the run after)."""
    owner: list[int | None] = [None] * len(model.layers)
    for j, u in enumerate(units):
        for i in u.layers:
            owner[i] = j
    runs: list[list] = []
    pending: list[int] = []
    for i, o in enumerate(owner):
        if o is None:
            (runs[-1][1] if runs else pending).append(i)
        elif runs and runs[-1][0] == o:
            runs[-1][1].append(i)
        else:
            runs.append([o, pending + [i]])
            pending = []
    return tuple(Segment(o, tuple(ls)) for o, ls in runs)


def block_units(model, units: tuple[ShardUnit, ...]) -> list[ShardUnit]:
    return [u for u in units if _BLOCK.match(model.layers[u.layers[0]].name)]


def checkpointed_blocks(model, units: tuple[ShardUnit, ...], recompute: Recompute, every: int) -> list[ShardUnit]:
    """The block units that training.recompute (and recompute_every) checkpoints, in forward order."""
    return [u for position, u in enumerate(block_units(model, units), start=1)
            if checkpointed(position, recompute, every)]


def _times(scenario: Scenario, units, cc: ClassCompute) -> tuple[list[float], list[float]]:
    """Per-layer forward and backward seconds of one class, backward with its recomputation."""
    w, rc = scenario.workload, scenario.training.recompute
    gpu = scenario.cluster.node_groups[cc.rank_class.node_group].gpu
    x = cc.rank_class.slowdown
    times = layer_times(w.model, gpu, cc.rank_class.batch, w.precision.value, calibration=scenario.compute_calibration)
    fwd, bwd = [t.fwd_s * x for t in times], [t.bwd_s * x for t in times]
    for u in checkpointed_blocks(w.model, units, rc, scenario.training.recompute_every):
        redo = recomputed_fraction(w.model, u.layers, rc)  # recompute_policy: what each mode redoes
        if rc is Recompute.SELECTIVE:  # each attention core again, just before its own backward
            for i, f in redo.items():
                bwd[i] += fwd[i] * f
        else:  # the checkpointed region is recomputed when the block's backward starts
            bwd[u.layers[-1]] += math.fsum(fwd[i] * f for i, f in redo.items())
    return fwd, bwd


def build_sharded_plan(scenario: Scenario, plan: IterationPlan) -> ShardedPlan:
    """Sharded figures of every class of `plan` (built by strategies.plan.build_plan for the same scenario)."""
    model, w, t = scenario.workload.model, scenario.workload, scenario.training
    units = fsdp_units(model)
    assert units, "io.rules_parallel: ZeRO needs parameters to shard"
    assert t.recompute is Recompute.NONE or block_units(model, units), "io.rules_parallel: recompute needs blocks"
    segs = segments_of(model, units)
    dp = plan.dp
    if scenario.communication.strategy is StrategyKind.HALVING_DOUBLING and dp & (dp - 1):  # a failure state's
        raise InfeasibleError(f"halving-doubling reduce_scatter / all_gather over {dp} GPUs: a power of two is needed "
                              "(io.rules refuses it in a scenario; a cluster that lost nodes cannot run it)")
    classes, seg_f, seg_b = [], [], []
    for cc in plan.classes:
        fwd, bwd = _times(scenario, units, cc)
        gpu = scenario.cluster.node_groups[cc.rank_class.node_group].gpu
        shard = update_time(math.ceil(trainable_param_count(model) / dp), gpu, scenario)
        shard *= cc.rank_class.slowdown
        total_b = math.fsum(bwd)
        done_after, acc = [0.0] * len(bwd), 0.0
        for i in range(len(bwd) - 1, -1, -1):
            acc += bwd[i]
            done_after[i] = acc
        ready = tuple(done_after[bc.bucket.ready_after_layer] if plan.overlap else total_b for bc in plan.buckets)
        classes.append(replace(cc, fwd_s=math.fsum(fwd), bwd_s=total_b, optimizer_s=shard, local_optimizer_s=shard,
                               ready_s=ready))
        seg_f.append(tuple(math.fsum(fwd[i] for i in s.layers) for s in segs))
        seg_b.append(tuple(math.fsum(bwd[i] for i in s.layers) for s in segs))
    p = w.precision.value
    k = plan.micro_steps  # scaling efficiency's reference: the same per-GPU work (recompute, shard step), no comm
    single = sum(len(c.rank_class.ranks) * c.rank_class.batch * k / (k * c.step_s + c.optimizer_s) for c in classes)
    plan = replace(plan, classes=tuple(classes), single_gpu_samples_per_s=single)
    return ShardedPlan(plan, t.parallelism.zero, units, segs, tuple(seg_f),
                       tuple(seg_b), gathered_param_bytes(p, t.fp8_param_gather), DTYPE_BYTES[w.grad_dtype],
                       unit_grad_elems(model, units))


def unit_grad_elems(model, units) -> tuple[int, ...]:
    """Per unit, the parameters that take gradients (a frozen layer's take none)."""
    return tuple(sum(model.layers[i].params for i in u.layers if not model.layers[i].frozen) for u in units)


# ----------------------------------------------------------------------------- graphs


def _zero12_graph(sp: ShardedPlan, c: int) -> Graph:
    """ZeRO-1/2: micro-batches, bucket reduce_scatters in backward, the shard's step, parameter all_gathers."""
    plan, cc = sp.plan, sp.plan.classes[c]
    b = GraphBuilder()
    k = plan.micro_steps
    prev: tuple[int, ...] = ()
    tail: list[int] = []
    reduced = range(k) if sp.zero == 2 else [k - 1]  # stage 1 accumulates locally until the last micro-batch
    if sp.zero == 1 and k > 1:
        prev = (b.add(Compute, f"forward+backward x{k - 1}", (), Stream.COMPUTE,
                      duration_s=(k - 1) * cc.step_s, kind="forward+backward"),)
    for m in reduced:
        tag = f" (micro-batch {m})" if k > 1 and sp.zero == 2 else ""
        fwd = b.add(Compute, f"forward{tag}", prev, Stream.COMPUTE, duration_s=cc.fwd_s, kind="forward")
        cuts = backward_segments(b, plan, cc, (fwd,))
        for j, ready in enumerate(cc.ready_s):
            bc = plan.buckets[j]
            tail.append(b.add(Collective, f"bucket{bc.bucket.index} reduce_scatter{tag} (dp)",
                              (cuts[min(ready, cc.bwd_s)],), Stream.COMM, group="dp", op=RS,
                              size_bytes=bc.bucket.elems * sp.grad_bytes, key=f"rs/{m}/{j}"))
        prev = (cuts[cc.bwd_s],) if plan.overlap else (cuts[cc.bwd_s], *tail[-1:])  # no overlap: wait for them
    opt = b.add(Compute, "optimizer (shard)", [*prev, *tail[-1:]], Stream.COMPUTE, duration_s=cc.optimizer_s,
                kind="optimizer")
    for j, bc in enumerate(plan.buckets):
        b.add(Collective, f"bucket{bc.bucket.index} parameters all_gather (dp)", (opt,), Stream.COMM, group="dp",
              op=AG, size_bytes=bc.bucket.elems * sp.param_bytes, key=f"ag/{j}")
    return b.build(cc.rank_class)


def _zero3_graph(sp: ShardedPlan, c: int) -> Graph:
    """ZeRO-3/FSDP: per micro-batch, segment computes with unit all_gathers prefetched one ahead and
    reduce_scatters after each unit's backward."""
    plan, cc = sp.plan, sp.plan.classes[c]
    overlap = plan.overlap
    segs = sp.segments
    # the compute uses of one iteration in order: (micro-batch, phase, segment index)
    uses = [(m, ph, s) for m in range(plan.micro_steps)
            for ph, order in (("fwd", range(len(segs))), ("bwd", range(len(segs) - 1, -1, -1))) for s in order]
    gathers: list[tuple[int, str, int]] = []  # (micro-batch, phase, unit) in order of first use
    first_use: list[int] = []
    last_bwd_use: dict[tuple[int, int], int] = {}
    for i, (m, ph, s) in enumerate(uses):
        g = (m, ph, segs[s].unit)
        if g not in gathers:
            gathers.append(g)
            first_use.append(i)
        if ph == "bwd":
            last_bwd_use[(m, segs[s].unit)] = i
    b = GraphBuilder()
    gid: dict[tuple[int, str, int], int] = {}
    last_coll: int | None = None
    prev: int | None = None  # the previous compute task

    def gather(n: int, deps) -> None:
        nonlocal last_coll
        m, ph, u = gathers[n]
        tag = f", micro-batch {m}" if plan.micro_steps > 1 else ""
        gid[gathers[n]] = last_coll = b.add(
            Collective, f"{sp.units[u].name} parameters all_gather ({ph}{tag}, dp)", deps, Stream.COMM,
            group="dp", op=AG, size_bytes=sp.units[u].params * sp.param_bytes, key=f"ag/{m}/{ph}/{u}")

    issued = 0
    if overlap:
        gather(0, ())
        issued = 1
    for i, (m, ph, s) in enumerate(uses):
        unit = segs[s].unit
        if overlap:
            if issued < len(gathers) and i == first_use[issued - 1]:  # prefetch: issued as the use of the last starts
                gather(issued, [d for d in (prev, gid[gathers[issued - 1]]) if d is not None])
                issued += 1
        elif issued < len(gathers) and first_use[issued] == i:  # no prefetch: gathered when needed
            gather(issued, [prev] if prev is not None else [])
            issued += 1
        need = gid[(m, ph, unit)]
        deps = [d for d in (prev, need, None if overlap else last_coll) if d is not None]
        layers = segs[s].layers
        names = plan.layer_names
        label = f"{names[layers[0]]}..{names[layers[-1]]}" if len(layers) > 1 else names[layers[0]]
        tag = f" (micro-batch {m})" if plan.micro_steps > 1 else ""
        dur = sp.seg_fwd_s[c][s] if ph == "fwd" else sp.seg_bwd_s[c][s]
        prev = b.add(Compute, f"{'forward' if ph == 'fwd' else 'backward'} {label}{tag}", deps, Stream.COMPUTE,
                     duration_s=dur, kind="forward" if ph == "fwd" else "backward")
        if ph == "bwd" and last_bwd_use[(m, unit)] == i and sp.unit_grad_elems[unit]:
            last_coll = b.add(Collective, f"{sp.units[unit].name} gradients reduce_scatter{tag} (dp)", (prev,),
                              Stream.COMM, group="dp", op=RS, size_bytes=sp.unit_grad_elems[unit] * sp.grad_bytes,
                              key=f"rs/{m}/{unit}")
    deps = [d for d in (prev, last_coll) if d is not None]
    b.add(Compute, "optimizer (shard)", deps, Stream.COMPUTE, duration_s=cc.optimizer_s, kind="optimizer")
    return b.build(cc.rank_class)


def sharded_graphs(sp: ShardedPlan) -> list[Graph]:
    """One iteration per rank class."""
    build = _zero3_graph if sp.zero == 3 else _zero12_graph
    return [build(sp, c) for c in range(len(sp.plan.classes))]


# ----------------------------------------------------------------------------- memory


def sharded_memory(model, gpu, batch: int, precision: str, optimizer: str, grad_dtype: str, zero: int, dp: int,
                   recompute: Recompute = Recompute.NONE, bucket_bytes: float = 25e6, recompute_every: int = 1,
                   fp8_param_gather: bool = False):
    """Peak memory of one rank under ZeRO stage `zero` (Rajbhandari et al. 2020, section 5: mixed-precision Adam
    keeps 2Ψ + 2Ψ + 12Ψ/Nd at stage 1, 2Ψ + 14Ψ/Nd at stage 2, 16Ψ/Nd at stage 3; memory.model_state_bytes).

    Activations: every layer's saved elements, or with full recomputation only each block's input (a
    checkpointed block keeps its input), with selective the attention cores' inputs; the block being
    recomputed holds its full activations (workspace). Buffers: stage 1/2 one gradient bucket being reduced;
    stage 3 the unit's unsharded gradients before their reduce_scatter. Workspace adds, at stage 3, the
    gathered parameters of the unit in use and of the one prefetched (sharding.zero3_live_param_bytes) and
    of the root unit, which FSDP keeps gathered from the embedding to the head.
    """

    run = gpu.runs_as(str(precision))  # a Transformer Engine recipe keeps bf16 weights and cached quantized copies
    weights, grads, states = model_state_bytes(trainable_param_count(model), run, optimizer, grad_dtype, zero, dp,
                                               quantized_copy_bytes(model.layers, run, gpu), frozen_param_count(model))
    a = ACTIVATION_BYTES[str(precision)]
    g = DTYPE_BYTES[str(grad_dtype)]
    p = gathered_param_bytes(run, fp8_param_gather)
    units = fsdp_units(model)
    blocks = checkpointed_blocks(model, units, Recompute(recompute), recompute_every)
    saved = [x.saved_elems for x in model.layers]
    transient = 0.0
    for u in blocks:
        full = math.fsum(saved[i] for i in u.layers)
        for i, kept in kept_elems(model, u.layers, Recompute(recompute)).items():
            saved[i] = kept
        transient = max(transient, full - math.fsum(saved[i] for i in u.layers))
    activations = math.fsum(saved) * batch * a
    live = max((x.input_elems + x.output_elems for x in model.layers), default=0.0)
    workspace = FRAMEWORK_RESERVE_BYTES + (live + transient) * batch * a
    if zero == 3:  # the root unit wraps the whole model, so it stays gathered while the blocks come and go
        rooted = len(units) > 1 and units[0].name == "root"
        workspace += zero3_live_param_bytes(units[1:] if rooted else units, p) + (units[0].params * p if rooted else 0)
        buffers = max(unit_grad_elems(model, units)) * g
    else:
        buffers = min(float(bucket_bytes), trainable_param_count(model) * g)
    return MemoryEstimate(weights, grads, states, activations, float(buffers), workspace, gpu.memory_bytes, gpu.key)
