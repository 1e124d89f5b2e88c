"""Time spans of an iteration's tasks, as the executor or the fold recorded them: their union, the part another
set covers, and a pipeline stage's compute, bubble and tp / dp / pp communication (over numpy arrays, so that a
stage of tens of thousands of tasks costs array time)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simdist.graph.tasks import Collective, Compute, Graph, SendRecv, Stream
from simdist.results.records import StepRecord
from simdist.topology.gcpause import gc_paused

OTHER, COMPUTE, OPTIMIZER, TP, DP, PP = range(6)  # a task's role in a stage's terms
_GROUP_ROLE = {"tp": TP, "dp": DP}  # a collective's group prefix; any other group is a pipeline transfer
_TRACK = {Stream.COMPUTE: "gpu", Stream.TP: "tp", Stream.P2P_SEND: "pp", Stream.P2P_RECV: "pp"}  # trace tracks


def union_s(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of `spans` ((start, end) pairs)."""
    if len(spans) > 64:
        arr = np.asarray(spans, dtype=float)
        return union_arrays(arr[:, 0], arr[:, 1])
    total, end = 0.0, -math.inf
    for s, e in sorted(spans):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def union_arrays(start: np.ndarray, end: np.ndarray) -> float:
    """Seconds covered by the union of the spans [start[i], end[i]]: in start order (any order among equal
    starts gives the same union), each span adds what it reaches beyond every earlier span's end."""
    if not len(start):
        return 0.0
    order = np.argsort(start)
    s, e = start[order], end[order]
    reach = np.empty_like(e)
    reach[0] = -math.inf
    np.maximum.accumulate(e[:-1], out=reach[1:])
    return float(np.sum(np.maximum(0.0, e - np.maximum(s, reach))))


def busy_s(graph: Graph, spans: dict[int, tuple[float, float]]) -> tuple[float, float]:
    """One iteration's seconds of compute-stream work (the sum of its tasks) and of communication in flight (the
    union of every other task's span, Horovod's cycle waits left out)."""
    compute = sum(e - s for t in graph.tasks if t.stream == Stream.COMPUTE for s, e in (spans[t.id],))
    comm = union_s([spans[t.id] for t in graph.tasks
                    if t.stream != Stream.COMPUTE and getattr(t, "kind", "") != "wait"])
    return compute, comm


def covered_s(spans: list[tuple[float, float]], by: list[tuple[float, float]]) -> float:
    """Seconds of the union of `spans` that the union of `by` also covers."""
    return union_s(spans) + union_s(by) - union_s(spans + by)


def roles(graph: Graph) -> np.ndarray:
    """Per task its role in the stage's terms: compute-stream work (optimizer apart), a tp, dp or pipeline
    collective (by its group's prefix), or none."""
    out = np.zeros(len(graph.tasks), dtype=np.int8)
    for t in graph.tasks:
        if isinstance(t, Compute) and t.stream == Stream.COMPUTE:
            out[t.id] = OPTIMIZER if t.kind == "optimizer" else COMPUTE
        elif isinstance(t, Collective):
            out[t.id] = _GROUP_ROLE.get(t.group.split(".")[0], PP)
    return out


@dataclass(frozen=True)
class FusedCalls:
    """The calls inside one of estimate's fused tasks, as offsets from its start: `waits`, blocking calls the
    compute waited for (tp spans, and gaps in the compute), and `beside`, transfers that ran under the compute
    (a context-parallel core's K/V exchanges while a ring step computes: tp spans only)."""

    waits: tuple[tuple[float, float], ...]
    beside: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class SpanTable:
    """One stage's iteration as arrays: each task's start and end, its role (`roles`), estimate's fused tasks
    grouped by the calls inside them (FusedCalls -> the tasks' indices) and which tasks count as communication
    in flight (`busy_s`)."""

    start: np.ndarray
    end: np.ndarray
    role: np.ndarray
    inner: dict[FusedCalls, np.ndarray]
    comm: np.ndarray

    @classmethod
    def of(cls, graph: Graph, spans: "dict[int, tuple[float, float]] | np.ndarray",
           fused: dict[int, FusedCalls] | None = None) -> "SpanTable":
        """`spans`: per task id its (start, end), or an (n, 2) array of them in task order."""
        arr = spans if isinstance(spans, np.ndarray) else np.array([spans[t.id] for t in graph.tasks], dtype=float)
        arr = arr.reshape(-1, 2)
        groups: dict[FusedCalls, list[int]] = {}
        for tid, calls in (fused or {}).items():
            if calls.waits or calls.beside:
                groups.setdefault(calls, []).append(tid)
        comm = np.array([t.stream != Stream.COMPUTE and getattr(t, "kind", "") != "wait" for t in graph.tasks],
                        dtype=bool)
        return cls(arr[:, 0], arr[:, 1], roles(graph), {k: np.array(v) for k, v in groups.items()}, comm)

    def busy_s(self) -> tuple[float, float]:
        """`busy_s` of the table: compute-stream seconds and the union of communication spans."""
        compute = float(np.sum((self.end - self.start)[(self.role == COMPUTE) | (self.role == OPTIMIZER)]))
        return compute, union_arrays(self.start[self.comm], self.end[self.comm])


def stage_terms(graph: Graph, spans: dict[int, tuple[float, float]], period_s: float,
                fused: dict[int, FusedCalls] | None = None) -> dict[str, float]:
    """Per stage: compute, optimizer, tp, dp (and their exposed parts), pp transfer time and the bubble
    (`fused`: the calls inside estimate's fused tasks)."""
    return table_terms(SpanTable.of(graph, spans, fused), period_s)


def table_terms(table: SpanTable, period_s: float) -> dict[str, float]:
    """`stage_terms` of a SpanTable: a fused task counts as the unfused chain it replaced (its calls as tp spans,
    the compute between the calls it waited for as compute-stream spans)."""
    start, end, role = table.start, table.end, table.role
    plain = (role == COMPUTE) | (role == OPTIMIZER)
    compute = float(np.sum((end - start)[role == COMPUTE]))
    tp_parts = [(start[role == TP], end[role == TP])]
    busy_parts = []
    for calls, ids in table.inner.items():
        s, e = start[ids][:, None], end[ids][:, None]
        if calls.waits:
            plain[ids] = False
            a, b = np.array(calls.waits).T
            compute -= len(ids) * math.fsum(y - x for x, y in calls.waits)
            tp_parts.append(((s + a).ravel(), (s + b).ravel()))
            busy_parts.append((np.hstack([s, s + b]).ravel(), np.hstack([s + a, e]).ravel()))  # between the waits
        if calls.beside:
            a, b = np.array(calls.beside).T
            tp_parts.append(((s + a).ravel(), (s + b).ravel()))
    busy = _joined([(start[plain], end[plain])] + busy_parts)
    tp = _joined(tp_parts)
    dp = (start[role == DP], end[role == DP])
    pp = (start[role == PP], end[role == PP])
    opt = float(np.sum((end - start)[role == OPTIMIZER]))

    def union(*parts):
        return union_arrays(*_joined(parts))

    # exposed: communication the compute stream does not hide (tp_comm_overlap's exchanges and bulk
    # collectives run beside their GEMMs; dp buckets beside backward; ZeRO's gathers beside the previous unit)
    tp_u, dp_u, busy_u, tp_busy = union(tp), union(dp), union(busy), union(busy, tp)
    exposed_tp = tp_u - (tp_u + busy_u - tp_busy)
    exposed_dp = dp_u - (dp_u + tp_busy - union(dp, busy, tp))
    bubble = max(0.0, period_s - compute - opt - exposed_tp - exposed_dp)
    return {"compute": compute, "optimizer": opt, "tp": tp_u, "tp_exposed": exposed_tp, "dp": dp_u,
            "dp_exposed": exposed_dp, "pp": union(pp), "bubble": bubble, "comm": union(tp, dp, pp)}


def _joined(parts) -> tuple[np.ndarray, np.ndarray]:
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def network_calls(graphs: list[Graph], spans: dict[int, dict[int, tuple[float, float]]]) -> list[tuple]:
    """Every call of one iteration that moves bytes on the network, with its span: each collective once for its
    group (its member classes share one span) and each send/recv between two endpoints, grouped by what they run
    (a collective's group, op and size; a transfer's ends, size and shard): (a task, its graph, the starts and the
    ends of those calls as arrays)."""
    found: dict[tuple, tuple] = {}
    seen = set()
    for g in graphs:
        mine = spans[g.rank_class.index]
        for t in g.tasks:
            if isinstance(t, Collective):
                if (t.group, t.key) in seen:
                    continue
                seen.add((t.group, t.key))
                what = (t.group, t.op, t.size_bytes, t.server_delay_s)
            elif isinstance(t, SendRecv) and t.src != t.dst:
                what = (t.src, t.dst, t.size_bytes, t.kind, t.shard)
            else:
                continue
            found.setdefault(what, (t, g, []))[2].append(mine[t.id])
    return [(t, g, *np.array(got, dtype=float).reshape(-1, 2).T) for t, g, got in found.values()]


def class_records(graph: Graph, it: int, spans, max_tracked: int) -> list[StepRecord]:
    """Trace records of one iteration of a class: its representative's tasks and those of its ranks below
    `max_tracked`, a track per rank and stream."""
    ranks = graph.rank_class.ranks
    tracked = [r for r in ranks if r < max_tracked]
    if ranks[0] not in tracked:
        tracked.insert(0, ranks[0])
    out = []
    with gc_paused():  # a record per task, all surviving (topology/gcpause.py)
        for t in graph.tasks:
            if getattr(t, "kind", "") == "wait":
                continue
            s, e = spans[t.id]
            prefix = _TRACK.get(t.stream, "comm")
            out += [StepRecord(f"{prefix}:{r}", t.name, s, e, it) for r in tracked]
    return out


def run_records(graphs: list[Graph], spans: dict[int, dict], max_tracked: int) -> list[StepRecord]:
    """Every class's records of iteration 0 from its spans (by class index), which last the run."""
    with gc_paused(lasts_the_run=True):  # topology/gcpause.py
        return [r for g in graphs for r in class_records(g, 0, spans[g.rank_class.index], max_tracked)]
