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
    send/recvs; `slowdown(class, op)`: compute-communication interference, as in the executor)."""
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


def stretched_end(start: float, work_s: float, busy: list[tuple[float, float, float]]) -> float:
    """End of `work_s` seconds of compute from `start` when it runs at 1 / (1 + s) inside each busy
    interval [begin, end) with slowdown s (the largest where they overlap)."""
    if work_s <= 0 or not busy:
        return start + work_s
    points = sorted({p for b, e, _ in busy for p in (b, e) if p > start})
    t, left = start, work_s
    for p in points:
        slow = max((x for b, e, x in busy if b <= t < e), default=0.0)
        rate = 1.0 / (1.0 + slow)
        if left <= (p - t) * rate:
            return t + left / rate
        left -= (p - t) * rate
        t = p
    return t + left


def _fold(graphs: list[Graph], time_of: Callable[[Task, Graph], float], groups: dict[str, ProcessGroup],
          busy: dict[int, list[tuple[float, float, float]]]) -> Folded:
    members = {name: sum(1 for g in graphs if set(pg.ranks) & set(g.rank_class.ranks)) for name, pg in groups.items()}
    spans: dict[int, dict[int, tuple[float, float]]] = {g.rank_class.index: {} for g in graphs}
    pos = {g.rank_class.index: 0 for g in graphs}
    last_on: dict[int, dict[Stream, float]] = {g.rank_class.index: {} for g in graphs}
    arrivals: dict[str, list[float]] = {}
    ready: dict[str, tuple[float, float]] = {}
    arrived: set[tuple[int, str]] = set()
    progressed = True
    while progressed:
        progressed = False
        for g in graphs:
            c = g.rank_class.index
            while pos[c] < len(g.tasks):
                t = g.tasks[pos[c]]
                start = max([spans[c][d][1] for d in t.deps] + [last_on[c].get(t.stream, 0.0)], default=0.0)
                if isinstance(t, Collective):
                    key = f"{t.group}/{t.key}"
                    if key not in ready:
                        got = arrivals.setdefault(key, [])
                        if (c, key) not in arrived:
                            got.append(start)
                            arrived.add((c, key))
                        if len(got) < members.get(t.group, 1):
                            break
                        begin = max(got)
                        ready[key] = (begin, begin + time_of(t, g))
                    span = ready[key]
                elif isinstance(t, SendRecv):
                    span = (start, start + (time_of(t, g) if t.src != t.dst else 0.0))
                elif isinstance(t, Compute) and t.stream == Stream.COMPUTE and busy.get(c):
                    span = (start, stretched_end(start, t.duration_s, busy[c]))
                elif isinstance(t, (Compute, HostWork)):
                    span = (start, start + t.duration_s)
                else:
                    raise TypeError(f"unknown task {t!r}")
                spans[c][t.id] = span
                if t.stream is not None:
                    last_on[c][t.stream] = span[1]
                pos[c] += 1
                progressed = True
    stuck = [g.tasks[pos[g.rank_class.index]].name for g in graphs if pos[g.rank_class.index] < len(g.tasks)]
    if stuck:
        raise RuntimeError(f"graphs deadlock at {stuck}")
    ends = {c: max((e for _, e in s.values()), default=0.0) for c, s in spans.items()}
    compute = {g.rank_class.index: sum(e - s for t in g.tasks if t.stream == Stream.COMPUTE
                                       for s, e in [spans[g.rank_class.index][t.id]]) for g in graphs}
    comm = {g.rank_class.index: _union_s([spans[g.rank_class.index][t.id] for t in g.tasks
                                          if t.stream != Stream.COMPUTE and getattr(t, "kind", "") != "wait"])
            for g in graphs}
    return Folded(max(ends.values(), default=0.0), ends, compute, comm, spans)
