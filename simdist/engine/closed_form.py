"""`estimate` of a lockstep iteration: the executor's rules folded over the graphs, with no events.

Each task starts at the latest end of its dependencies and of the previous task on its stream; a
collective starts when every member class has reached it and lasts its schedule's closed-form time
on the analytical network (it alone on the fabric). Without contention this is exactly what the
executor computes on the flow network, which is why estimate equals simulate there (1e-6).

With compute-communication interference (`slowdown`), compute-stream work progresses at 1 / (1 + s)
while collectives of its class run, as in the executor. Collectives listed after the compute they
overlap (DDP's buckets follow the whole backward in graph order) are not placed yet when that compute
is, so the fold is repeated with the previous pass's collective intervals until the spans stop moving
(each pass moves them by a fraction s / (1 + s) of the last move).
"""
from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass
from typing import Callable

from simdist.engine.executor import _union_s
from simdist.graph.tasks import Collective, Compute, Graph, HostWork, ProcessGroup, SendRecv, Stream, Task


@dataclass
class Folded:
    """One iteration from time 0: its end, and per class the compute and communication busy seconds."""

    end_s: float
    class_end_s: dict[int, float]
    class_compute_busy_s: dict[int, float]
    class_comm_busy_s: dict[int, float]
    spans: dict[int, dict[int, tuple[float, float]]]


MAX_PASSES = 100  # interference fixed point: passes before giving up (converges geometrically, ~15 at s = 0.19)
TOLERANCE = 1e-12  # relative change of every span between passes that ends the iteration


def fold(graphs: list[Graph], time_of: Callable[[Task, Graph], float], groups: dict[str, ProcessGroup],
         slowdown: Callable[[int, str], float] | None = None) -> Folded:
    """Start and end of every task of one iteration of every class (`time_of` times collectives and
    send/recvs; `slowdown(class, op)`: compute-communication interference, as in the executor).

    Tasks are resolved in data-flow order (`_fold`: a worklist over dependencies, stream predecessors and
    the member arrivals of each collective), not in each graph's list order: a pipeline rank's receive,
    listed early, waits for a send that its neighbour lists after a receive of its own, as on the real cluster.
    """
    times: dict[tuple[int, int], float] = {}

    def cached(t: Task, g: Graph) -> float:
        k = (g.rank_class.index, t.id)
        if k not in times:
            times[k] = time_of(t, g)
        return times[k]

    prior: dict[int, list[tuple[float, float, float]]] = {}
    out = _fold(graphs, cached, groups, prior)
    if slowdown is None:
        return out
    for _ in range(MAX_PASSES):
        busy = _comm_intervals(graphs, out, slowdown)
        if not any(busy.values()):
            return out
        nxt = _fold(graphs, cached, groups, busy)
        if _same_spans(out, nxt):
            return nxt
        out = nxt
    return out


def _comm_intervals(graphs: list[Graph], f: Folded, slowdown: Callable[[int, str], float]):
    """Per class: (start, end, slowdown) of each collective it takes part in, from a fold's spans."""
    busy: dict[int, list[tuple[float, float, float]]] = {}
    for g in graphs:
        c = g.rank_class.index
        rows = []
        for t in g.tasks:
            if isinstance(t, Collective):
                s, e = f.spans[c][t.id]
                x = slowdown(c, str(t.op))
                if x > 0 and e > s:
                    rows.append((s, e, x))
        busy[c] = rows
    return busy


def _same_spans(a: Folded, b: Folded) -> bool:
    scale = max(a.end_s, b.end_s, 1e-30)
    return all(abs(x[0] - y[0]) <= TOLERANCE * scale and abs(x[1] - y[1]) <= TOLERANCE * scale
               for c, sp in a.spans.items() for i, x in sp.items() for y in (b.spans[c][i],))


class BusyProfile:
    """A class's busy intervals as sorted breakpoints and the largest slowdown on each elementary segment
    [points[i], points[i + 1]), built once per fold pass so that stretching a compute task costs a bisect
    and the segments it crosses rather than a scan of every interval (O(B^2) per task before)."""

    def __init__(self, busy: list[tuple[float, float, float]]) -> None:
        self.points = sorted({p for b, e, _ in busy for p in (b, e)})
        by_start = sorted(busy)
        heap: list[tuple[float, float]] = []
        self.slow: list[float] = []
        j = 0
        for p in self.points:  # active at p: begin <= p < end; the largest slowdown of those (lazy max-heap)
            while j < len(by_start) and by_start[j][0] <= p:
                heapq.heappush(heap, (-by_start[j][2], by_start[j][1]))
                j += 1
            while heap and heap[0][1] <= p:
                heapq.heappop(heap)
            self.slow.append(-heap[0][0] if heap else 0.0)

    def stretched_end(self, start: float, work_s: float) -> float:
        if work_s <= 0 or not self.points:
            return start + work_s
        pts, slow = self.points, self.slow
        i = bisect.bisect_right(pts, start)  # the first breakpoint after start
        s_now = slow[i - 1] if i > 0 else 0.0
        t, left = start, work_s
        while i < len(pts):
            p = pts[i]
            rate = 1.0 / (1.0 + s_now)
            if left <= (p - t) * rate:
                return t + left / rate
            left -= (p - t) * rate
            t, s_now = p, slow[i]
            i += 1
        return t + left


def stretched_end(start: float, work_s: float, busy: list[tuple[float, float, float]]) -> float:
    """End of `work_s` seconds of compute from `start` when it runs at 1 / (1 + s) inside each busy
    interval [begin, end) with slowdown s (the largest where they overlap)."""
    if work_s <= 0 or not busy:
        return start + work_s
    return BusyProfile(busy).stretched_end(start, work_s)


def _fold(graphs: list[Graph], time_of: Callable[[Task, Graph], float], groups: dict[str, ProcessGroup],
          busy: dict[int, list[tuple[float, float, float]]]) -> Folded:
    """One pass in data-flow order; compute of a class with `busy` intervals is stretched inside them."""
    profiles = {c: BusyProfile(v) for c, v in busy.items() if v}
    members = {name: sum(1 for g in graphs if set(pg.ranks) & set(g.rank_class.ranks)) for name, pg in groups.items()}
    classes = [g.rank_class.index for g in graphs]
    done: list[list[tuple[float, float] | None]] = []
    waiting: list[list[int]] = []  # per class and task: prerequisites not yet resolved
    after: list[list[list[int]]] = []  # per class and task: the tasks of that class waiting on it
    prev_on: list[list[int]] = []  # per class and task: the previous task on its stream (-1: none)
    ready: list[tuple[int, int]] = []
    for k, g in enumerate(graphs):
        n = len(g.tasks)
        done.append([None] * n)
        w, a, prev = [0] * n, [[] for _ in range(n)], [-1] * n
        last: dict[Stream, int] = {}
        for t in g.tasks:
            pre = set(t.deps)
            if t.stream is not None:
                if t.stream in last:
                    prev[t.id] = last[t.stream]
                    pre.add(last[t.stream])
                last[t.stream] = t.id
            w[t.id] = len(pre)
            for d in pre:
                a[d].append(t.id)
            if not pre:
                ready.append((k, t.id))
        waiting.append(w)
        after.append(a)
        prev_on.append(prev)
    arrivals: dict[str, list[tuple[int, int, float]]] = {}

    def resolve(k: int, tid: int, span: tuple[float, float]) -> None:
        done[k][tid] = span
        w = waiting[k]
        for nxt in after[k][tid]:
            w[nxt] -= 1
            if w[nxt] == 0:
                ready.append((k, nxt))

    while ready:
        k, tid = ready.pop()
        g = graphs[k]
        t = g.tasks[tid]
        mine = done[k]
        start = max((mine[d][1] for d in t.deps), default=0.0)  # type: ignore[index]
        p = prev_on[k][tid]
        if p >= 0 and mine[p][1] > start:  # type: ignore[index]
            start = mine[p][1]  # type: ignore[index]
        if isinstance(t, Collective):
            key = f"{t.group}/{t.key}"
            got = arrivals.setdefault(key, [])
            got.append((k, tid, start))
            if len(got) < members.get(t.group, 1):
                continue
            begin = max(x[2] for x in got)
            span = (begin, begin + time_of(t, g))
            for kk, tt, _ in got:
                resolve(kk, tt, span)
            continue
        if isinstance(t, SendRecv):
            span = (start, start + (time_of(t, g) if t.src != t.dst else 0.0))
        elif isinstance(t, Compute) and t.stream == Stream.COMPUTE and classes[k] in profiles:
            span = (start, profiles[classes[k]].stretched_end(start, t.duration_s))
        elif isinstance(t, (Compute, HostWork)):
            span = (start, start + t.duration_s)
        else:
            raise TypeError(f"unknown task {t!r}")
        resolve(k, tid, span)
    spans: dict[int, dict[int, tuple[float, float]]] = {
        c: {i: x for i, x in enumerate(e) if x is not None} for c, e in zip(classes, done)}
    stuck = [next(t.name for t in g.tasks if t.id not in spans[g.rank_class.index]) for g in graphs
             if len(spans[g.rank_class.index]) < len(g.tasks)]
    if stuck:
        raise RuntimeError(f"graphs deadlock at {stuck}")
    ends = {c: max((e for _, e in s.values()), default=0.0) for c, s in spans.items()}
    compute = {g.rank_class.index: sum(e - s for t in g.tasks if t.stream == Stream.COMPUTE
                                       for s, e in [spans[g.rank_class.index][t.id]]) for g in graphs}
    comm = {g.rank_class.index: _union_s([spans[g.rank_class.index][t.id] for t in g.tasks
                                          if t.stream != Stream.COMPUTE and getattr(t, "kind", "") != "wait"])
            for g in graphs}
    return Folded(max(ends.values(), default=0.0), ends, compute, comm, spans)
