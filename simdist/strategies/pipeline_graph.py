"""Graph builder for a dp x tp x pp iteration: one graph per pipeline stage (its tp ranks and dp replicas).

Per stage, in its schedule's order (GPipe, 1F1B, interleaved): each chunk forward or backward of a micro-batch
is compute segments on the compute stream with the tp collectives between them (group `tp.s<stage>`, which
the compute waits for: Megatron does not overlap them). With `training.tp_comm_overlap` the block GEMMs'
sequence-parallel collectives run beside them instead (`_overlapped`): ring exchanges of 1/tp of the tensor
(group `tp.s<stage>.x`) beside tp GEMM chunks, or a whole collective beside a whole GEMM (bulk); compute and
communication then interfere as the executor models. A chunk's input arrives by a pipeline transfer, a
collective on the boundary's group `pp<a>><b>` whose two members are the sending and the receiving stage:
the receive is posted at the start (no dependencies), the send follows the producing compute on the send
stream, so the transfer starts when the producer is done (Megatron's p2p pairs a send with a posted receive;
the producer goes on computing). With Megatron's scatter/gather the receiving tp group then all_gathers the
activation.

Gradients go over the stage's dp groups (group `dp.s<stage>`) on the communication stream, by ZeRO stage:
0 all_reduces each chunk's buckets after its last backward micro-batch (or the stage's last, without
overlap); 1 reduce_scatters them there instead and all_gathers the updated parameters after the optimizer
step on the 1/dp shard (Megatron's distributed optimizer); 2 reduce_scatters every micro-batch's buckets
(the gradients are sharded, so nothing accumulates locally); 3 also all_gathers each unit (block) before
its forward and again before its backward of every micro-batch, prefetched one ahead, and reduce_scatters
each unit's gradients after its backward, with no gather after the step. With context parallelism an
attention core is its ring (`_cp_attention`: step k's compute beside the K/V transfer to the ring successor on
`tp.s<stage>.cpx`, the next step waiting for both) or its blocking all_gathers / all_to_alls on
`tp.s<stage>.cp`; the gradients then go over dp x cp ranks.
"""
from __future__ import annotations

from simdist.collectives.schedule import CollectiveOp
from simdist.graph.builder import GraphBuilder
from simdist.graph.spans import FusedCalls
from simdist.graph.tasks import Collective, Compute, Graph, Stream
from simdist.layout import Axis
from simdist.strategies.expert_layout import edp_group, expert_group
from simdist.strategies.expert_parallel import EpCollective
from simdist.strategies.mp_plan import MpPlan, Overlap, StagePlan, chunk_of_bucket
from simdist.strategies.pipeline_schedule import TaskKind
from simdist.topology.gcpause import gc_paused

P2P_OP = CollectiveOp.BROADCAST  # a point-to-point copy (one source); the schedule is built per boundary
AG, RS = CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER


def tp_group(stage: int) -> str:
    return f"tp.s{stage}"


def tp_exchange_group(stage: int) -> str:
    """The stage's tp groups as rings of neighbour copies (tp_comm_overlap's exchange steps)."""
    return f"tp.s{stage}.x"


def cp_group(stage: int) -> str:
    """The stage's cp groups (context parallelism's all_gathers, reduce_scatters, all_to_alls); named under
    tp so that the breakdown counts them with the stage's other model-parallel collectives."""
    return f"tp.s{stage}.cp"


def cp_exchange_group(stage: int) -> str:
    """The stage's cp groups as rings of neighbour copies (context parallelism's K/V transfers)."""
    return f"tp.s{stage}.cpx"


def dp_group(stage: int) -> str:
    return f"dp.s{stage}"


def call_group(stage: int, call) -> str:
    """The group a segment's blocking call runs on: an MoE layer's on its expert groups, the rest on tp."""
    return expert_group(stage, call.axis) if isinstance(call, EpCollective) else tp_group(stage)


def pp_group(src: int, dst: int) -> str:
    return f"pp{src}>{dst}"


RING_EXCHANGE = "tp_exchange"  # group kind of ring exchange steps: every rank copies to its ring successor


def stage_groups(stage: int, cp: int = 1) -> list[tuple[tuple[Axis, ...], str, str]]:
    """The stage's collective groups as (layout axes their ranks differ in, name, kind): tp; dp, which is
    Megatron-Core's data-parallel group with cp (dp x cp ranks hold the same dense weights); with cp > 1 the
    cp groups for all_gathers / all_to_alls and as rings for the K/V transfers."""
    out = [((Axis.TP,), tp_group(stage), "tp"), ((Axis.DP, Axis.CP), dp_group(stage), "dp")]
    if cp > 1:
        out += [((Axis.CP,), cp_group(stage), "cp"), ((Axis.CP,), cp_exchange_group(stage), RING_EXCHANGE)]
    return out


def boundary_pairs(plan: MpPlan) -> list[tuple[int, int]]:
    """Every (sending stage, receiving stage) pair the schedule uses."""
    p, v = plan.pp, plan.virtual_stages
    out: set[tuple[int, int]] = set()
    for vs in range(p * v - 1):
        a, b = vs % p, (vs + 1) % p
        out |= {(a, b), (b, a)}
    return sorted(out)


class _Dp:
    """The stage's dp collectives as the graph is built: ZeRO-3's unit gathers in order of first use, each
    issued (with overlap) when the first compute needing the previous one starts, and what compute must
    wait for without overlap (every dp collective issued before it, as sharded_dp does)."""

    def __init__(self, b: GraphBuilder, plan: MpPlan, st: StagePlan) -> None:
        self.b, self.plan, self.st = b, plan, st
        self.group = dp_group(st.rank_class.index)
        self.overlap = plan.overlap
        self.last: int | None = None  # the last dp collective issued
        self.tail: list[int] = []  # every gradient collective (the optimizer waits for them)
        self.keys: list[tuple] = []
        self.index: dict[tuple, int] = {}
        self.ids: dict[tuple, int] = {}
        if plan.zero == 3:
            for task in plan.orders[st.rank_class.index]:
                fwd = task.kind is TaskKind.FWD
                work = st.chunks[task.chunk]
                for seg in work.fwd if fwd else work.bwd:
                    key = (task.micro, "fwd" if fwd else "bwd", seg.unit)
                    used = seg.compute_s > 0 or seg.overlap is not Overlap.NONE  # as _chunk asks `before`
                    if seg.unit >= 0 and used and key not in self.index:
                        self.index[key] = len(self.keys)
                        self.keys.append(key)
            if self.overlap and self.keys:
                self._gather(0, ())

    def _gather(self, n: int, deps) -> int:
        m, ph, u = self.keys[n]
        unit = self.st.units[u]
        self.ids[self.keys[n]] = self.last = self.b.add(
            Collective, f"{unit.name} parameters all_gather ({ph}, micro-batch {m}, {self.group})", deps,
            Stream.COMM, group=self.group, op=AG, size_bytes=unit.params * self.plan.param_bytes,
            key=f"ag/{m}/{ph}/{u}")
        return self.ids[self.keys[n]]

    def before(self, micro: int, phase: str, unit: int, prev: int | None) -> list[int]:
        """What a compute of `unit` (-1: none) must wait for besides its data."""
        deps: list[int] = []
        if unit >= 0 and self.plan.zero == 3:
            key = (micro, phase, unit)
            n = self.index[key]
            if key not in self.ids:  # no overlap: gathered when needed
                self._gather(n, [d for d in (prev, self.last) if d is not None])
            elif self.overlap and n + 1 < len(self.keys) and self.keys[n + 1] not in self.ids:
                self._gather(n + 1, [d for d in (prev, self.ids[key]) if d is not None])  # prefetch one ahead
            deps.append(self.ids[key])
        if not self.overlap and self.last is not None:
            deps.append(self.last)
        return deps

    def reduce(self, op: CollectiveOp, size_bytes: float, name: str, deps: tuple[int, ...], key: str) -> None:
        self.last = self.b.add(Collective, f"{name} ({self.group})", deps, Stream.COMM, group=self.group, op=op,
                               size_bytes=size_bytes, key=key)
        self.tail.append(self.last)


def _overlapped(b: GraphBuilder, plan: MpPlan, stage: int, tag: str, i: int, seg, deps: list[int]) -> tuple[
        int, list[int]]:
    """One segment whose tp collective runs beside its compute; returns (last compute id, what follows waits
    for). Ring: tp GEMM chunks and tp - 1 exchanges of 1/tp of the tensor, exchange k beside chunk k (an
    all_gather's piece k arrives while chunk k - 1 computes; a reduce_scatter sends chunk k - 1's partial
    sums while chunk k computes). Bulk: the whole collective beside the whole compute."""
    call, n = seg.call, plan.tp
    grp = tp_group(stage)
    if seg.overlap is Overlap.BULK:
        gemm = b.add(Compute, f"{tag} {seg.name}", deps, Stream.COMPUTE, duration_s=seg.compute_s, kind=seg.kind)
        comm = b.add(Collective, f"{tag} {call.op.value} {call.what} beside {seg.name} ({grp})", deps, Stream.TP,
                     group=grp, op=call.op, size_bytes=call.size_bytes, key=f"{tag}.{i}")
        return gemm, [gemm, comm]
    grp = tp_exchange_group(stage)
    piece, chunk_s = call.size_bytes / n, seg.compute_s / n
    gemm = comm = None
    for k in range(n):
        if seg.overlap is Overlap.RING_AG:
            if k < n - 1:  # forward the piece received last (the first is this rank's own shard)
                cdeps = deps if comm is None else [comm]
                comm_next = b.add(Collective, f"{tag} {call.what} exchange {k + 1}/{n - 1} ({grp})", cdeps,
                                  Stream.TP, group=grp, op=call.op, size_bytes=piece, key=f"{tag}.{i}.x{k}")
            gdeps = deps if gemm is None else [gemm, comm]
            gemm = b.add(Compute, f"{tag} {seg.name} chunk {k + 1}/{n}", gdeps, Stream.COMPUTE,
                         duration_s=chunk_s, kind=seg.kind)
            if k < n - 1:
                comm = comm_next
        else:
            gdeps = deps if gemm is None else [gemm]
            prev_gemm = gemm
            gemm = b.add(Compute, f"{tag} {seg.name} chunk {k + 1}/{n}", gdeps, Stream.COMPUTE,
                         duration_s=chunk_s, kind=seg.kind)
            if k > 0:  # chunk k - 1's partial sums (plus those received) go on beside chunk k
                comm = b.add(Collective, f"{tag} {call.what} exchange {k}/{n - 1} ({grp})",
                             [prev_gemm] + ([comm] if comm is not None else []), Stream.TP, group=grp,
                             op=call.op, size_bytes=piece, key=f"{tag}.{i}.x{k}")
    after = [gemm] if seg.overlap is Overlap.RING_AG else [gemm, comm]
    return gemm, after


def _cp_attention(b: GraphBuilder, stage: int, tag: str, i: int, seg, deps: list[int]) -> tuple[int, list[int]]:
    """One attention core under context parallelism; returns (last compute id, what follows waits for).
    Blocking calls before, the ring steps (transfer k beside step k's compute; step k + 1 and transfer k + 1
    wait for both: TE reuses the buffer step k reads), blocking calls after."""
    att = seg.cp
    grp, ring = cp_group(stage), cp_exchange_group(stage)
    for j, c in enumerate(att.before):
        deps = [b.add(Collective, f"{tag} {c.what} ({grp})", deps, Stream.TP, group=grp, op=c.op,
                      size_bytes=c.size_bytes, key=f"{tag}.{i}.b{j}")]
    last = None
    for k, c in enumerate(att.steps_s):
        step = deps
        last = b.add(Compute, f"{tag} {seg.name} step {k + 1}/{len(att.steps_s)}", step, Stream.COMPUTE,
                     duration_s=c, kind=seg.kind)
        deps = [last]
        if k < len(att.exchanges):
            deps.append(b.add(Collective, f"{tag} K/V transfer {k + 1} to the ring successor ({ring})", step,
                              Stream.TP, group=ring, op=P2P_OP, size_bytes=att.exchanges[k], key=f"{tag}.{i}.x{k}"))
    for j, c in enumerate(att.after):
        deps = [b.add(Collective, f"{tag} {c.what} ({grp})", deps, Stream.TP, group=grp, op=c.op,
                      size_bytes=c.size_bytes, key=f"{tag}.{i}.a{j}")]
    return last, deps


def _chunk(b: GraphBuilder, plan: MpPlan, st: StagePlan, kind: TaskKind, micro: int, chunk: int,
           after: int | None, dp: _Dp, fuse: "_Fuse | None" = None) -> int:
    """One chunk forward/backward of one micro-batch with its receive, tp collectives, ZeRO-3 gathers and
    reduce_scatters and send; returns the id of its last compute segment."""
    p, stage = plan.pp, st.rank_class.index
    work = st.chunks[chunk]
    vs = work.virtual_stage
    last_vs = p * plan.virtual_stages - 1
    fwd = kind is TaskKind.FWD
    phase = "fwd" if fwd else "bwd"
    tag = f"{'F' if fwd else 'B'}{micro}.v{vs}"
    deps: list[int] = [] if after is None else [after]
    src_vs = vs - 1 if fwd else vs + 1
    if 0 <= src_vs <= last_vs:  # the input comes from another stage
        src = src_vs % p
        what = "activations" if fwd else "gradients"
        recv = b.add(Collective, f"{tag} recv {what} from stage {src} ({pp_group(src, stage)})", (), None,
                     group=pp_group(src, stage), op=P2P_OP, size_bytes=plan.p2p_bytes,
                     key=f"{'f' if fwd else 'b'}{micro}.{src_vs}")
        deps.append(recv)
        if plan.p2p_gather_bytes:
            deps = [b.add(Collective, f"{tag} all_gather {what} ({tp_group(stage)})", deps, Stream.TP,
                          group=tp_group(stage), op=CollectiveOp.ALL_GATHER, size_bytes=plan.p2p_gather_bytes,
                          key=f"{tag}.gather")]
    segs = work.fwd if fwd else work.bwd
    if fuse is not None and plan.zero != 3 and fuse.fusable((stage, chunk, fwd), segs):
        last, deps = fuse.chain(b, tag, stage, (chunk, fwd), segs, deps + dp.before(micro, phase, -1, after))
        segs = ()
    unit_done = {} if fwd or plan.zero != 3 else {s.unit: j for j, s in enumerate(segs) if s.unit >= 0}
    last = None
    for i, seg in enumerate(segs):
        if seg.compute_s > 0 or seg.overlap is not Overlap.NONE:
            deps = deps + dp.before(micro, phase, seg.unit, last if last is not None else after)
        if seg.cp is not None:
            last, deps = _cp_attention(b, stage, tag, i, seg, deps)
        elif seg.overlap is not Overlap.NONE:
            last, deps = _overlapped(b, plan, stage, tag, i, seg, deps)
        else:
            if seg.compute_s > 0:
                last = b.add(Compute, f"{tag} {seg.name}", deps, Stream.COMPUTE, duration_s=seg.compute_s,
                             kind=seg.kind)
                deps = [last]
            if seg.call is not None:
                grp = call_group(stage, seg.call)
                deps = [b.add(Collective, f"{tag} {seg.call.op.value} {seg.call.what} ({grp})", deps,
                              Stream.TP, group=grp, op=seg.call.op, size_bytes=seg.call.size_bytes,
                              key=f"{tag}.{i}")]
        if unit_done.get(seg.unit) == i and last is not None and st.units[seg.unit].trainable > 0:
            unit = st.units[seg.unit]  # (a unit of frozen weights only, under LoRA, has no gradients)
            dp.reduce(RS, unit.trainable * plan.grad_elem_bytes, f"{tag} {unit.name} gradients reduce_scatter",
                      (last,), f"rs/{micro}/{seg.unit}")
    if last is None or deps != [last]:  # a trailing collective: the chunk ends when it does
        last = b.add(Compute, f"{tag} end", deps, Stream.COMPUTE, duration_s=0.0, kind="forward" if fwd
                     else "backward")
    dst_vs = vs + 1 if fwd else vs - 1
    if 0 <= dst_vs <= last_vs:
        dst = dst_vs % p
        b.add(Collective, f"{tag} send {'activations' if fwd else 'gradients'} to stage {dst} "
              f"({pp_group(stage, dst)})", (last,), Stream.P2P_SEND, group=pp_group(stage, dst), op=P2P_OP,
              size_bytes=plan.p2p_bytes, key=f"{'f' if fwd else 'b'}{micro}.{vs}")
    return last


class _Fuse:
    """`estimate` only: a chunk's compute segments and blocking tp collectives form a chain nothing else joins
    (the tp group is the stage's own class, the compute waits for each call), so all but its last tp call fold
    into one compute task of their summed closed-form times, exactly; the last call stays a task so that the
    TP stream orders the next chunk's gather behind it, as before. The fused task keeps where its tp calls lie
    (offsets from its start: `Compute.waits`, and `tp_spans` for the breakdown). With compute-communication
    interference (`interference`) the fusion stays exact: the executor slows only the compute between the
    waits, and a context-parallel core, whose compute runs beside its K/V transfers, stays unfused."""

    def __init__(self, tp_time, interference: bool = False) -> None:
        self.tp_time = tp_time  # (group, op, size_bytes) -> seconds on the idle fabric
        self.interference = interference
        self.tp_spans: dict[int, FusedCalls] = {}
        self.folded: dict[tuple[int, int, bool], tuple] = {}  # (stage, chunk, forward) -> _fold's answer
        self.plain: dict[tuple[int, int, bool], bool] = {}  # (stage, chunk, forward) -> fusable's answer

    def fusable(self, key: tuple[int, int, bool], segs) -> bool:
        """Whether the chain (`key`: its stage, chunk and direction, which fix its segments) has no tp
        collective overlapped with compute; asked once per key."""
        if key not in self.plain:
            self.plain[key] = all(x.overlap is Overlap.NONE for x in segs)
        return self.plain[key]

    def _fold(self, stage: int, segs) -> tuple[list, list]:
        """The chain's fused parts before its last tp call ((duration, tp spans) each, or a context-parallel
        segment left unfused) and the items after them. Every micro-batch of a chunk and phase has the same
        segments, so a stage folds each once."""
        items = []  # (compute seconds or None, call or None); a context-parallel core is (None, its segment)
        for seg in segs:
            if seg.cp is not None:
                items.append((None, seg))
                continue
            if seg.compute_s > 0:
                items.append((seg.compute_s, None))
            if seg.call is not None:
                items.append((None, seg.call))
        lastcall = max((k for k, (_, c) in enumerate(items) if c is not None and not hasattr(c, "cp")),
                       default=len(items))
        parts, t, spans, beside, n = [], 0.0, [], [], 0
        for sec, call in items[:lastcall]:
            if call is None:
                t += sec
            elif hasattr(call, "cp") and self.interference:  # its compute beside its transfers: not a chain
                parts += [(t, FusedCalls(tuple(spans), tuple(beside)))] * (n > 0) + [call]
                t, spans, beside, n = 0.0, [], [], -1
            elif hasattr(call, "cp"):  # a cp core: its steps and calls alone on the fabric
                d, waits, under = call.cp.timeline(lambda x: self.tp_time(cp_exchange_group(stage), P2P_OP, x),
                                                   lambda op, x: self.tp_time(cp_group(stage), op, x))
                spans += [(t + a, t + z) for a, z in waits]
                beside += [(t + a, t + z) for a, z in under]
                t += d
            else:
                d = self.tp_time(call_group(stage, call), call.op, call.size_bytes)
                spans.append((t, t + d))
                t += d
            n += 1
        parts += [(t, FusedCalls(tuple(spans), tuple(beside)))] * (n > 0)
        return parts, items[lastcall:]

    def chain(self, b: GraphBuilder, tag: str, stage: int, key: tuple[int, bool], segs,
              deps: list[int]) -> tuple[int | None, list[int]]:
        """Add one chunk's chain (`key`: its chunk and direction, which fix its segments on this stage)."""
        memo = (stage, *key)
        if memo not in self.folded:
            self.folded[memo] = self._fold(stage, segs)
        parts, rest = self.folded[memo]
        last = None
        for k, part in enumerate(parts):
            if hasattr(part, "cp"):
                last, deps = _cp_attention(b, stage, tag, -100 - k, part, deps)
                continue
            head_s, calls = part
            last = b.add(Compute, f"{tag} {segs[0].name} .. (fused)", deps, Stream.COMPUTE, duration_s=head_s,
                         kind=segs[0].kind, waits=calls.waits)
            self.tp_spans[last] = calls
            deps = [last]
        for k, (sec, call) in enumerate(rest):
            if call is not None and hasattr(call, "cp"):
                last, deps = _cp_attention(b, stage, tag, -1 - k, call, deps)
            elif call is None:
                last = b.add(Compute, f"{tag} {segs[-1].name} ({k})", deps, Stream.COMPUTE, duration_s=sec,
                             kind=segs[-1].kind)
                deps = [last]
            else:
                grp = call_group(stage, call)
                deps = [b.add(Collective, f"{tag} {call.op.value} {call.what} ({grp})", deps, Stream.TP, group=grp,
                              op=call.op, size_bytes=call.size_bytes, key=f"{tag}.last")]
        return last, deps


def stage_graph(plan: MpPlan, st: StagePlan, bucket_size_bytes: float, fuse: _Fuse | None = None) -> Graph:
    """One iteration of one pipeline stage (`fuse`: estimate's exact fusion of tp chains)."""
    b = GraphBuilder()
    index = st.rank_class.index
    order = plan.orders[index]
    last_bwd = {}
    for k, task in enumerate(order):
        if task.kind is TaskKind.BWD:
            last_bwd[task.chunk] = k
    dp = _Dp(b, plan, st)
    owners = chunk_of_bucket(st, bucket_size_bytes) if plan.grad_dp > 1 else []
    grad_op = CollectiveOp.ALL_REDUCE if plan.zero == 0 else RS
    what = "all_reduce" if plan.zero == 0 else "reduce_scatter"
    prev = None
    chunk_done: dict[int, int] = {}
    for k, task in enumerate(order):
        prev = _chunk(b, plan, st, task.kind, task.micro, task.chunk, prev, dp, fuse)
        if task.kind is not TaskKind.BWD:
            continue
        if last_bwd.get(task.chunk) == k:
            chunk_done[task.chunk] = prev
        if plan.zero == 2 and plan.grad_dp > 1:  # sharded gradients: every micro-batch's buckets reduce_scatter
            for j, (size, ci) in enumerate(zip(st.grad_buckets, owners)):
                if ci == task.chunk:
                    dp.reduce(RS, size, f"B{task.micro}.c{ci} bucket{j} reduce_scatter", (prev,),
                              f"g{j}/{task.micro}")
    tail = [prev] if prev is not None else []
    # without overlap the gradients are reduced once the schedule has returned, which waits for the stage's
    # pipeline sends (Megatron-Core's p2p_communication waits on each request, then synchronises the device)
    flushed = tuple(tail) + tuple(t.id for t in b.tasks if t.stream is Stream.P2P_SEND)[-1:]
    if plan.grad_dp > 1 and plan.zero in (0, 1):
        for j, (size, ci) in enumerate(zip(st.grad_buckets, owners)):
            dp.reduce(grad_op, size, f"bucket{j} {what}", (chunk_done[ci],) if plan.overlap else flushed, f"g{j}")
    experts = st.expert_buckets if plan.expert_groups and plan.edp > 1 else ()
    for j, (size, ci) in enumerate(experts):  # the routed experts' gradients over edp (zero 0 or 1: the rules)
        deps = (chunk_done[ci],) if plan.overlap else flushed
        dp.tail.append(b.add(Collective, f"experts bucket{j} {what} ({edp_group(index)})", deps, Stream.COMM,
                             group=edp_group(index), op=grad_op, size_bytes=size, key=f"e{j}"))
    opt = b.add(Compute, "optimizer" if plan.zero == 0 else "optimizer (shard)", tail + dp.tail,
                Stream.COMPUTE, duration_s=st.optimizer_s, kind="optimizer")
    if plan.grad_dp > 1 and plan.zero in (1, 2):  # the updated shards back to every dp rank
        for j, size in enumerate(st.grad_buckets):
            b.add(Collective, f"bucket{j} parameters all_gather ({dp.group})", (opt,), Stream.COMM, group=dp.group,
                  op=AG, size_bytes=size / plan.grad_elem_bytes * plan.param_bytes, key=f"ag/{j}")
    if plan.zero == 1:
        for j, (size, _) in enumerate(experts):
            b.add(Collective, f"experts bucket{j} parameters all_gather ({edp_group(index)})", (opt,), Stream.COMM,
                  group=edp_group(index), op=AG, size_bytes=size / plan.grad_elem_bytes * plan.param_bytes,
                  key=f"eag/{j}")
    return b.build(st.rank_class)


def pipeline_graphs(plan: MpPlan, bucket_size_bytes: float) -> list[Graph]:
    with gc_paused(lasts_the_run=True):  # hundreds of thousands of tasks that all survive (topology/gcpause.py)
        return [stage_graph(plan, st, bucket_size_bytes) for st in plan.stages]


def fused_pipeline_graphs(plan: MpPlan, bucket_size_bytes: float, tp_time,
                          interference: bool = False) -> tuple[list[Graph], list[dict]]:
    """estimate's graphs with each chunk's tp chain fused (`_Fuse`) and, per graph, the tp spans inside its
    fused tasks (task id -> offsets)."""
    graphs, spans = [], []
    with gc_paused(lasts_the_run=True):
        for st in plan.stages:
            fuse = _Fuse(tp_time, interference)
            graphs.append(stage_graph(plan, st, bucket_size_bytes, fuse))
            spans.append(fuse.tp_spans)
    return graphs, spans
