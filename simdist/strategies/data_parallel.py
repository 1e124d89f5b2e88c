"""Graph builder for the BSP data-parallel iteration (PyTorch DDP, Horovod, synchronous PS).

Per rank class and iteration: (k-1) micro-batches without communication, then the last forward
and the backward in segments that end where a bucket becomes ready; each bucket's encode, its
collectives on the data-parallel group and its decode run on the communication stream, in bucket
order (NCCL runs the calls of one communicator in order), from the moment the bucket is ready
(after the whole backward without overlap; Horovod's fusion cycle rounds the launch up to the
next cycle tick, a 'wait' task); DDP then copies each reduced bucket into the parameters' .grad on the
compute stream, in bucket order (reducer.cpp finalize_backward), and the optimizer step follows. A collective starts
when every class has reached it, so the slowest class sets its start.
"""
from __future__ import annotations

import math

from simdist.graph.builder import GraphBuilder
from simdist.graph.tasks import Collective, Compute, Graph, Stream
from simdist.strategies.plan import ClassCompute, IterationPlan


def launch_offset(plan: IterationPlan, ready_s: float) -> float:
    """When a bucket's communication may start, after the start of the last backward: at the next fusion-cycle
    tick, once Horovod's ranks have agreed on what is ready (plan.negotiation_s)."""
    if plan.fusion_cycle_s > 0:
        return math.ceil(ready_s / plan.fusion_cycle_s - 1e-12) * plan.fusion_cycle_s + plan.negotiation_s
    return ready_s + plan.negotiation_s


def backward_segments(b: GraphBuilder, plan: IterationPlan, cc: ClassCompute, deps) -> dict[float, int]:
    """Backward as compute tasks cut where buckets become ready, each named by the layers it runs (last to
    first) and the buckets it completes: ready time -> id of the segment ending there."""
    cuts = sorted({min(r, cc.bwd_s) for r in cc.ready_s} | {cc.bwd_s})
    names = plan.layer_names
    out: dict[float, int] = {}
    start, hi = 0.0, len(names) - 1
    prev = tuple(deps)
    for cut in cuts:
        buckets = [j for j, r in enumerate(cc.ready_s) if min(r, cc.bwd_s) == cut]
        lo = 0 if cut == cc.bwd_s else min(plan.buckets[j].bucket.ready_after_layer for j in buckets)
        layers = f"{names[hi]}..{names[lo]}" if names and hi > lo else (names[lo] if names else "")
        ready = f" (bucket{buckets[0]}{'-' + str(buckets[-1]) if len(buckets) > 1 else ''} ready)" if buckets else ""
        tid = b.add(Compute, f"backward {layers}{ready}".replace("  ", " "), prev, Stream.COMPUTE,
                    duration_s=cut - start, kind="backward")
        out[cut] = tid
        prev, start, hi = (tid,), cut, lo - 1
    return out


def forward_tasks(b: GraphBuilder, plan: IterationPlan, cc: ClassCompute) -> int:
    """The k-1 accumulation micro-batches (one task) and the last forward; returns the forward's id."""
    deps = ()
    if plan.micro_steps > 1:
        deps = (b.add(Compute, f"forward+backward x{plan.micro_steps - 1}", (), Stream.COMPUTE,
                      duration_s=(plan.micro_steps - 1) * cc.step_s, kind="forward+backward"),)
    return b.add(Compute, "forward", deps, Stream.COMPUTE, duration_s=cc.fwd_s, kind="forward")


def bucket_exchange(b: GraphBuilder, plan: IterationPlan, cc: ClassCompute, j: int, deps, group: str = "dp") -> int:
    """Bucket j on the communication stream: encode, its collectives in order, decode; returns the last id."""
    bc = plan.buckets[j]
    last = None
    name = f"bucket{bc.bucket.index}"
    if cc.encode_s[j]:
        last = b.add(Compute, f"{name} encode", deps, Stream.COMM, duration_s=cc.encode_s[j], kind="encode")
    copy_s = cc.fusion_copy_s[j] if cc.fusion_copy_s else 0.0  # Horovod's fusion buffer, in and out
    if copy_s:
        last = b.add(Compute, f"{name} fusion copy in", deps if last is None else (last,), Stream.COMM,
                     duration_s=copy_s, kind="fusion_copy")
    for c, (op, size) in enumerate(bc.collectives):
        last = b.add(Collective, f"{name} {op.value}#{c} ({group})", deps if last is None else (last,), Stream.COMM,
                     group=group, op=op, size_bytes=size, server_delay_s=bc.server_delay_s, key=f"{name}/{c}")
    if copy_s:
        last = b.add(Compute, f"{name} fusion copy out", (last,), Stream.COMM, duration_s=copy_s, kind="fusion_copy")
    if cc.decode_s[j]:
        last = b.add(Compute, f"{name} decode", deps if last is None else (last,), Stream.COMM,
                     duration_s=cc.decode_s[j], kind="decode")
    return last if last is not None else (deps[-1] if deps else -1)


def grad_copy_back(b: GraphBuilder, plan: IterationPlan, cc: ClassCompute, backward_end: int, exchanged) -> int:
    """DDP's finalize_backward on the compute stream after the backward: bucket by bucket in order, wait for its
    exchange (`exchanged[j]`, its last task), then copy it into the parameters' .grad (cc.grad_copy_s[j]); returns
    the last copy's id. A bucket reduced early is copied at once; a late one holds every copy after it."""
    last = backward_end
    for j, copy_s in enumerate(cc.grad_copy_s):
        deps = (last,) if exchanged[j] < 0 else (last, exchanged[j])
        last = b.add(Compute, f"bucket{plan.buckets[j].bucket.index} copy to grad", deps, Stream.COMPUTE,
                     duration_s=copy_s, kind="grad_copy")
    return last


def bsp_graph(plan: IterationPlan, cc: ClassCompute) -> Graph:
    """One BSP iteration of one rank class."""
    b = GraphBuilder()
    fwd = forward_tasks(b, plan, cc)
    segments = backward_segments(b, plan, cc, (fwd,))
    tail = [segments[cc.bwd_s]]
    exchanged = []
    for j, ready in enumerate(cc.ready_s):
        dep = segments[min(ready, cc.bwd_s)]
        launch = launch_offset(plan, ready)
        if launch > ready:
            dep = b.add(Compute, f"bucket{plan.buckets[j].bucket.index} fusion cycle", (dep,), None,
                        duration_s=launch - ready, kind="wait")
        last = bucket_exchange(b, plan, cc, j, (dep,))
        exchanged.append(last)
        if last >= 0:
            tail.append(last)
    if cc.grad_copy_s:
        tail.append(grad_copy_back(b, plan, cc, segments[cc.bwd_s], exchanged))
    if cc.optimizer_s:
        b.add(Compute, "optimizer", tail, Stream.COMPUTE, duration_s=cc.optimizer_s, kind="optimizer")
    return b.build(cc.rank_class)


def bsp_graphs(plan: IterationPlan) -> list[Graph]:
    return [bsp_graph(plan, cc) for cc in plan.classes]
