"""`estimate` of a lockstep iteration: the executor's rules folded over the graphs, with no events.

Each task starts at the latest end of its dependencies and of the previous task on its stream; a
collective starts when every member class has reached it and lasts its schedule's closed-form time
on the analytical network (it alone on the fabric). Without contention this is exactly what the
executor computes on the flow network, which is why estimate equals simulate there (1e-6).
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


def fold(graphs: list[Graph], time_of: Callable[[Task, Graph], float], groups: dict[str, ProcessGroup]) -> Folded:
    """Start and end of every task of one iteration of every class (`time_of` times collectives and
    send/recvs)."""
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
