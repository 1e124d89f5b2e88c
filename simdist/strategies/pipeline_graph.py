"""Graph builder for a dp x tp x pp iteration: one graph per pipeline stage (its tp ranks and dp replicas).

Per stage, in its schedule's order (GPipe, 1F1B, interleaved): each chunk forward or backward of a micro-batch
is compute segments on the compute stream with the tp collectives between them (group `tp.s<stage>`, which
the compute waits for: Megatron does not overlap them). A chunk's input arrives by a pipeline transfer, a
collective on the boundary's group `pp<a>><b>` whose two members are the sending and the receiving stage:
the receive is posted at the start (no dependencies), the send follows the producing compute on the send
stream, so the transfer starts when the producer is done (Megatron's p2p pairs a send with a posted receive;
the producer goes on computing). With Megatron's scatter/gather the receiving tp group then all_gathers the
activation. After a chunk's last backward (or the stage's last, without overlap) its gradients are
all_reduced over the stage's dp groups (group `dp.s<stage>`) in buckets on the communication stream, then
the optimizer steps.
"""
from __future__ import annotations

from simdist.collectives.schedule import CollectiveOp
from simdist.graph.builder import GraphBuilder
from simdist.graph.tasks import Collective, Compute, Graph, Stream
from simdist.strategies.mp_plan import MpPlan, StagePlan, chunk_of_bucket
from simdist.strategies.pipeline_schedule import TaskKind

P2P_OP = CollectiveOp.BROADCAST  # a point-to-point copy (one source); the schedule is built per boundary


def tp_group(stage: int) -> str:
    return f"tp.s{stage}"


def dp_group(stage: int) -> str:
    return f"dp.s{stage}"


def pp_group(src: int, dst: int) -> str:
    return f"pp{src}>{dst}"


def boundary_pairs(plan: MpPlan) -> list[tuple[int, int]]:
    """Every (sending stage, receiving stage) pair the schedule uses."""
    p, v = plan.pp, plan.virtual_stages
    out: set[tuple[int, int]] = set()
    for vs in range(p * v - 1):
        a, b = vs % p, (vs + 1) % p
        out |= {(a, b), (b, a)}
    return sorted(out)


def _chunk(b: GraphBuilder, plan: MpPlan, st: StagePlan, kind: TaskKind, micro: int, chunk: int,
           after: int | None) -> int:
    """One chunk forward/backward of one micro-batch with its receive, tp collectives and send; returns the
    id of its last compute segment."""
    p, stage = plan.pp, st.rank_class.index
    work = st.chunks[chunk]
    vs = work.virtual_stage
    last_vs = p * plan.virtual_stages - 1
    fwd = kind is TaskKind.FWD
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
    last = None
    for i, seg in enumerate(work.fwd if fwd else work.bwd):
        if seg.compute_s > 0:
            last = b.add(Compute, f"{tag} {seg.name}", deps, Stream.COMPUTE, duration_s=seg.compute_s,
                         kind=seg.kind)
            deps = [last]
        if seg.call is not None:
            deps = [b.add(Collective, f"{tag} {seg.call.op.value} {seg.call.what} ({tp_group(stage)})", deps,
                          Stream.TP, group=tp_group(stage), op=seg.call.op, size_bytes=seg.call.size_bytes,
                          key=f"{tag}.{i}")]
    if last is None or deps[-1] != last:  # a trailing collective: the chunk ends when it does
        last = b.add(Compute, f"{tag} end", deps, Stream.COMPUTE, duration_s=0.0, kind="forward" if fwd
                     else "backward")
    dst_vs = vs + 1 if fwd else vs - 1
    if 0 <= dst_vs <= last_vs:
        dst = dst_vs % p
        b.add(Collective, f"{tag} send {'activations' if fwd else 'gradients'} to stage {dst} "
              f"({pp_group(stage, dst)})", (last,), Stream.P2P_SEND, group=pp_group(stage, dst), op=P2P_OP,
              size_bytes=plan.p2p_bytes, key=f"{'f' if fwd else 'b'}{micro}.{vs}")
    return last


def stage_graph(plan: MpPlan, st: StagePlan, bucket_size_bytes: float) -> Graph:
    """One iteration of one pipeline stage."""
    b = GraphBuilder()
    order = plan.orders[st.rank_class.index]
    last_bwd = {}
    for k, task in enumerate(order):
        if task.kind is TaskKind.BWD:
            last_bwd[task.chunk] = k
    prev = None
    chunk_done: dict[int, int] = {}
    for k, task in enumerate(order):
        prev = _chunk(b, plan, st, task.kind, task.micro, task.chunk, prev)
        if task.kind is TaskKind.BWD and last_bwd.get(task.chunk) == k:
            chunk_done[task.chunk] = prev
    tail = [prev] if prev is not None else []
    if plan.dp > 1:
        owners = chunk_of_bucket(st, bucket_size_bytes)
        for j, (size, ci) in enumerate(zip(st.grad_buckets, owners)):
            dep = chunk_done[ci] if plan.overlap else prev
            tail.append(b.add(Collective, f"bucket{j} all_reduce ({dp_group(st.rank_class.index)})", (dep,),
                              Stream.COMM, group=dp_group(st.rank_class.index), op=CollectiveOp.ALL_REDUCE,
                              size_bytes=size, key=f"g{j}"))
    b.add(Compute, "optimizer", tail, Stream.COMPUTE, duration_s=st.optimizer_s, kind="optimizer")
    return b.build(st.rank_class)


def pipeline_graphs(plan: MpPlan, bucket_size_bytes: float) -> list[Graph]:
    return [stage_graph(plan, st, bucket_size_bytes) for st in plan.stages]
