"""`estimate` of a lockstep iteration: the executor's rules folded over the graphs, with no events.

Each task starts at the latest end of its dependencies and of the previous task on its stream; a collective
starts when every member class has reached it and lasts its schedule's time alone on the fabric. Without
contention this is what the executor computes on the flow network (simulate replays it: network/replay.py).

With compute-communication interference (`slowdown`), compute-stream work progresses at 1 / (1 + s)
while collectives of its class run, so a compute task's end depends on collectives that begin while it
runs, which may wait on work that this task delays (on another pipeline stage, say). That is a run in
time order, not a fold: the one `Executor` runs the iteration, each collective and send/recv lasting its
closed-form time (`ClosedFormTimes`), so estimate and simulate share every rule of interference. (A fold
iterated to its fixed point converges slowly: docs/model-parallel.md, benchmarks/fold.py.)
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np
import simpy

import simdist.graph.periodic as periodic  # lazy (simdist.LAZY_MODULES), as pipeline_schedule: pipelines only
import simdist.strategies.pipeline_schedule as pipeline_schedule
from simdist.engine.executor import Executor
from simdist.graph.spans import SpanTable, busy_s
from simdist.graph.tasks import Collective, Compute, Graph, HostWork, ProcessGroup, SendRecv, Task
from simdist.topology.gcpause import gc_paused


@dataclass
class Folded:
    """One iteration from time 0: its end, and per class the compute and communication busy seconds."""

    end_s: float
    class_end_s: dict[int, float]
    class_compute_busy_s: dict[int, float]
    class_comm_busy_s: dict[int, float]
    spans: dict[int, dict[int, tuple[float, float]]]
    tables: tuple[SpanTable, ...] = ()  # fold_pipeline: per class (graph order) its tasks' spans as arrays
    waits_ran: dict[int, dict[int, tuple]] = field(default_factory=dict)  # Executor.waits_ran (interference)


def fold(graphs: list[Graph], time_of: Callable[[Task, Graph], float], groups: dict[str, ProcessGroup],
         slowdown: Callable[[int, str], float] | None = None) -> Folded:
    """Start and end of every task of one iteration of every class (`time_of` times collectives and
    send/recvs; `slowdown(class, op)`: compute-communication interference, run on the executor).

    Tasks are resolved in data-flow order (a worklist over dependencies, stream predecessors and the
    member arrivals of each collective), not in each graph's list order: a pipeline rank's receive,
    listed early, waits for a send that its neighbour lists after a receive of its own, as on the real
    cluster. Without interference the order among ready tasks is immaterial.
    """
    times: dict[tuple[int, int], float] = {}

    def cached(t: Task, g: Graph) -> float:
        k = (g.rank_class.index, t.id)
        if k not in times:
            times[k] = time_of(t, g)
        return times[k]

    if slowdown is None:
        with gc_paused(lasts_the_run=True):  # a span per task, all surviving (topology/gcpause.py)
            return _folded(graphs, _Worklist(graphs, cached, groups).run())
    ex = Executor(simpy.Environment(), ClosedFormTimes(cached), lambda task, graph: (task, graph), groups,
                  record=False, slowdown=slowdown)
    ex.run(graphs, 1, steady_skip=False)
    folded = _folded(graphs, ex.last_spans)
    folded.waits_ran = ex.waits_ran
    return folded


def fold_pipeline(graphs_for: Callable, plan, time_of: Callable[[Task, Graph], float],
                  groups: dict[str, ProcessGroup], slowdown: Callable[[int, str], float] | None = None) -> Folded:
    """`fold` of a pipeline plan's stage graphs (`graphs_for(m)`: the graphs and their fused tp spans for m
    micro-batches): a shorter run's steady state repeated where it repeats exactly (graph/periodic.py), else
    the whole graphs folded."""
    def spans_of(graphs: list[Graph], fused: list[dict]) -> tuple[list[np.ndarray], list[dict]]:
        folded = fold(graphs, time_of, groups, slowdown)
        got, ran = folded.spans, folded.waits_ran  # interference stretched the compute between some tp calls
        return ([np.array([got[g.rank_class.index][t.id] for t in g.tasks]).reshape(-1, 2) for g in graphs],
                [{**f, **{t: replace(f[t], waits=w) for t, w in ran.get(g.rank_class.index, {}).items()}}
                 for g, f in zip(graphs, fused)])

    sizes = pipeline_schedule.steady_sizes(plan.schedule, plan.pp, plan.micro_batches, plan.virtual_stages)
    found = periodic.fold_repeated(graphs_for, plan.micro_batches, sizes, spans_of, slowdown)
    if found is None:
        graphs, fused = graphs_for(plan.micro_batches)
        found = graphs, [SpanTable.of(g, s, f) for g, s, f in zip(graphs, *spans_of(graphs, fused))]
    classes = [g.rank_class.index for g in found[0]]
    ends = {c: float(t.end.max(initial=0.0)) for c, t in zip(classes, found[1])}
    busy = {c: t.busy_s() for c, t in zip(classes, found[1])}
    return Folded(max(ends.values(), default=0.0), ends, {c: b[0] for c, b in busy.items()},
                  {c: b[1] for c, b in busy.items()}, {}, tuple(found[1]))


class ClosedFormTimes:
    """The executor's network model for `fold`: a call (task, graph) lasts its closed-form time."""

    def __init__(self, time_of: Callable[[Task, Graph], float]) -> None:
        self.time_of = time_of

    def run(self, env: simpy.Environment, call: tuple[Task, Graph]):
        yield env.timeout(self.time_of(*call))


class _Worklist:
    """One fold of the graphs without interference: ready tasks resolved from a stack (their spans do not
    depend on the order in which they are resolved)."""

    def __init__(self, graphs: list[Graph], time_of: Callable[[Task, Graph], float],
                 groups: dict[str, ProcessGroup]) -> None:
        self.graphs, self.time_of = graphs, time_of
        self.members = {name: sum(1 for g in graphs if set(pg.ranks) & set(g.rank_class.ranks))
                        for name, pg in groups.items()}
        self.arrivals: dict[str, list[tuple[int, int, float]]] = {}
        self.ready: list[tuple[int, int]] = []
        self.done: list[list[tuple[float, float] | None]] = []
        self.waiting: list[list[int]] = []  # per class and task: prerequisites not resolved
        self.after: list[list[list[int]]] = []  # per class and task: its waiting successors
        self.prev_on: list[list[int]] = []  # per class and task: previous on its stream (-1)
        for k, g in enumerate(graphs):
            a, w, prev = g.prerequisites()
            self.done.append([None] * len(g.tasks))
            self.ready += [(k, tid) for tid, n in enumerate(w) if n == 0]
            self.waiting.append(list(w))
            self.after.append(a)
            self.prev_on.append(prev)

    def start_of(self, k: int, tid: int) -> float:
        """When task `tid` of class k can start: the latest end of its dependencies and stream predecessor."""
        mine = self.done[k]
        start = max((mine[d][1] for d in self.graphs[k].tasks[tid].deps), default=0.0)  # type: ignore[index]
        p = self.prev_on[k][tid]
        if p >= 0 and mine[p][1] > start:  # type: ignore[index]
            start = mine[p][1]  # type: ignore[index]
        return start

    def resolve(self, k: int, tid: int, span: tuple[float, float]) -> None:
        self.done[k][tid] = span
        w = self.waiting[k]
        for nxt in self.after[k][tid]:
            w[nxt] -= 1
            if w[nxt] == 0:
                self.ready.append((k, nxt))

    def run(self) -> dict[int, dict[int, tuple[float, float]]]:
        while self.ready:
            k, tid = self.ready.pop()
            self.begin(k, tid, self.start_of(k, tid))
        return {g.rank_class.index: {i: x for i, x in enumerate(e) if x is not None}
                for g, e in zip(self.graphs, self.done)}

    def begin(self, k: int, tid: int, start: float) -> None:
        """Task `tid` of class k reaches its start: time it (a collective once all members arrived)."""
        g = self.graphs[k]
        t = g.tasks[tid]
        if isinstance(t, Collective):
            key = f"{t.group}/{t.key}"
            got = self.arrivals.setdefault(key, [])
            got.append((k, tid, start))
            if len(got) < self.members.get(t.group, 1):
                return
            del self.arrivals[key]
            begin = max(x[2] for x in got)
            span = (begin, begin + self.time_of(t, g))
            for kk, tt, _ in got:
                self.resolve(kk, tt, span)
            return
        if isinstance(t, SendRecv):
            span = (start, start + (self.time_of(t, g) if t.src != t.dst else 0.0))
        elif isinstance(t, (Compute, HostWork)):
            span = (start, start + t.duration_s)
        else:
            raise TypeError(f"unknown task {t!r}")
        self.resolve(k, tid, span)


def _folded(graphs: list[Graph], spans: dict[int, dict[int, tuple[float, float]]]) -> Folded:
    """The iteration's figures from every task's span (a graph left unfinished deadlocks)."""
    stuck = [next(t.name for t in g.tasks if t.id not in spans.get(g.rank_class.index, {})) for g in graphs
             if len(spans.get(g.rank_class.index, {})) < len(g.tasks)]
    if stuck:
        raise RuntimeError(f"graphs deadlock at {stuck}")
    ends = {c: max((e for _, e in s.values()), default=0.0) for c, s in spans.items()}
    busy = {g.rank_class.index: busy_s(g, spans[g.rank_class.index]) for g in graphs}
    return Folded(max(ends.values(), default=0.0), ends, {c: b[0] for c, b in busy.items()},
                  {c: b[1] for c, b in busy.items()}, spans)
