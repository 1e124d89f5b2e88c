"""`estimate` of a lockstep iteration: the executor's rules folded over the graphs, with no events.

Each task starts at the latest end of its dependencies and of the previous task on its stream; a
collective starts when every member class has reached it and lasts its schedule's closed-form time
on the analytical network (it alone on the fabric). Without contention this is exactly what the
executor computes on the flow network, which is why estimate equals simulate there (1e-6).

With compute-communication interference (`slowdown`), compute-stream work progresses at 1 / (1 + s)
while collectives of its class run (s: the largest of those running), as in the executor. A compute
task's end then depends on collectives that begin while it runs, and those may wait on work that this
task delays (on another pipeline stage, say). The fold resolves that in one pass in time order
(`_Pass._timed`): tasks start in order of start time, and a compute task's remaining work is re-timed
whenever a collective of its class begins or ends before it finishes, as the executor's events do, so
every task is timed only from what happened before it. The spans are then the fixed point "every compute
task stretched by the collectives of these same spans". Iterating that fixed point instead, with the
previous pass's collective intervals, converges slowly: a compute task that ends later than in the
previous pass runs into the stale interval of the tp call that waits for it and is slowed by it, so on
interleaved pipelines each pass carried the interference one dependency step down the chains (100
passes and still moving; docs/model-parallel.md, benchmarks/fold.py).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
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


def fold(graphs: list[Graph], time_of: Callable[[Task, Graph], float], groups: dict[str, ProcessGroup],
         slowdown: Callable[[int, str], float] | None = None) -> Folded:
    """Start and end of every task of one iteration of every class (`time_of` times collectives and
    send/recvs; `slowdown(class, op)`: compute-communication interference, as in the executor).

    Tasks are resolved in data-flow order (a worklist over dependencies, stream predecessors and the
    member arrivals of each collective), not in each graph's list order: a pipeline rank's receive,
    listed early, waits for a send that its neighbour lists after a receive of its own, as on the real
    cluster. Without interference the order among ready tasks is immaterial; with it, it is time order.
    """
    times: dict[tuple[int, int], float] = {}

    def cached(t: Task, g: Graph) -> float:
        k = (g.rank_class.index, t.id)
        if k not in times:
            times[k] = time_of(t, g)
        return times[k]

    return _Pass(graphs, cached, groups, slowdown).run()


@dataclass
class _Running:
    """A compute-stream task in progress on a class: `left` seconds of work at the full rate remain as of
    `since`, progressing at `rate`; `version`: the sequence number of its current end event (unique in
    the pass, so that a superseded end event, of this task or of an earlier one, is told apart)."""

    tid: int
    start: float
    left: float
    since: float
    rate: float
    version: int = 0


_END, _COMM_END, _START = 0, 1, 2  # event kinds, in this order at equal times (work done, then rates, then starts)


@dataclass
class _Pass:
    """One fold of the graphs (see `fold`). Without `slowdown` ready tasks are resolved from a stack (their
    spans do not depend on the order); with it, from a heap of events in time order (`_timed`)."""

    graphs: list[Graph]
    time_of: Callable[[Task, Graph], float]
    groups: dict[str, ProcessGroup]
    slowdown: Callable[[int, str], float] | None
    done: list[list[tuple[float, float] | None]] = field(default_factory=list)
    waiting: list[list[int]] = field(default_factory=list)  # per class and task: prerequisites not resolved
    after: list[list[list[int]]] = field(default_factory=list)  # per class and task: its waiting successors
    prev_on: list[list[int]] = field(default_factory=list)  # per class and task: previous on its stream (-1)

    def __post_init__(self) -> None:
        self.members = {name: sum(1 for g in self.graphs if set(pg.ranks) & set(g.rank_class.ranks))
                        for name, pg in self.groups.items()}
        self.classes = [g.rank_class.index for g in self.graphs]
        self.arrivals: dict[str, list[tuple[int, int, float]]] = {}
        self.ready: list = []  # (k, task id) on a stack, or events (time, kind, seq, payload) on a heap
        self.seq = 0
        self.on: list[list[float]] = [[] for _ in self.graphs]  # per class: slowdowns of running collectives
        self.running: list[_Running | None] = [None] * len(self.graphs)
        self.roots: list[tuple[int, int]] = []
        for k, g in enumerate(self.graphs):
            n = len(g.tasks)
            self.done.append([None] * n)
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
                    self.roots.append((k, t.id))
            self.waiting.append(w)
            self.after.append(a)
            self.prev_on.append(prev)

    # ---- readiness
    def start_of(self, k: int, tid: int) -> float:
        """When task `tid` of class k can start: the latest end of its dependencies and stream predecessor."""
        mine = self.done[k]
        start = max((mine[d][1] for d in self.graphs[k].tasks[tid].deps), default=0.0)  # type: ignore[index]
        p = self.prev_on[k][tid]
        if p >= 0 and mine[p][1] > start:  # type: ignore[index]
            start = mine[p][1]  # type: ignore[index]
        return start

    def push(self, k: int, tid: int) -> None:
        if self.slowdown is None:
            self.ready.append((k, tid))
        else:
            self.event(self.start_of(k, tid), _START, (k, tid))

    def event(self, time_s: float, kind: int, payload) -> None:
        self.seq += 1
        heapq.heappush(self.ready, (time_s, kind, self.seq, payload))

    def resolve(self, k: int, tid: int, span: tuple[float, float]) -> None:
        self.done[k][tid] = span
        w = self.waiting[k]
        for nxt in self.after[k][tid]:
            w[nxt] -= 1
            if w[nxt] == 0:
                self.push(k, nxt)

    # ---- the passes
    def run(self) -> Folded:
        for k, tid in self.roots:
            self.push(k, tid)
        if self.slowdown is None:
            while self.ready:
                k, tid = self.ready.pop()
                self.begin(k, tid, self.start_of(k, tid))
        else:
            self._timed()
        return self.folded()

    def _timed(self) -> None:
        """Events in time order: task starts, ends of re-timed compute work, ends of collectives (rates)."""
        while self.ready:
            now, kind, _, payload = heapq.heappop(self.ready)
            if kind == _START:
                self.begin(payload[0], payload[1], now)
            elif kind == _END:
                k, version = payload
                run = self.running[k]
                if run is not None and run.version == version:
                    self.running[k] = None
                    self.resolve(k, run.tid, (run.start, now))
            else:
                for k, s in payload:
                    self.on[k].remove(s)
                    self.retime(k, now)

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
            if self.slowdown is not None:
                slows = [(kk, s) for kk, _, _ in got for s in (self.slowdown(self.classes[kk], str(t.op)),) if s > 0]
                for kk, s in slows:
                    self.on[kk].append(s)
                    self.retime(kk, begin)
                if slows:
                    self.event(span[1], _COMM_END, slows)
            for kk, tt, _ in got:
                self.resolve(kk, tt, span)
            return
        if isinstance(t, SendRecv):
            span = (start, start + (self.time_of(t, g) if t.src != t.dst else 0.0))
        elif isinstance(t, Compute) and t.stream == Stream.COMPUTE and self.slowdown is not None and t.duration_s > 0:
            if self.running[k] is not None:  # the compute stream orders its tasks: one at a time
                raise RuntimeError(f"{t.name} starts while {g.tasks[self.running[k].tid].name} runs")
            run = self.running[k] = _Running(tid, start, t.duration_s, start, self.rate(k))
            self.end_event(k, run, start)
            return
        elif isinstance(t, (Compute, HostWork)):
            span = (start, start + t.duration_s)
        else:
            raise TypeError(f"unknown task {t!r}")
        self.resolve(k, tid, span)

    def rate(self, k: int) -> float:
        """Compute rate of class k: 1 / (1 + the largest slowdown of its running collectives)."""
        on = self.on[k]
        return 1.0 / (1.0 + max(on)) if on else 1.0

    def retime(self, k: int, now: float) -> None:
        """The collectives running on class k changed at `now`: its compute work continues at the new rate."""
        run = self.running[k]
        rate = self.rate(k)
        if run is None or rate == run.rate:
            return
        run.left = max(0.0, run.left - (now - run.since) * run.rate)
        run.since, run.rate = now, rate
        self.end_event(k, run, now)

    def end_event(self, k: int, run: _Running, now: float) -> None:
        """(Re-)schedule the end of class k's running compute: its work left at its current rate."""
        run.version = self.seq + 1
        self.event(now + run.left / run.rate, _END, (k, run.version))

    def folded(self) -> Folded:
        graphs, classes = self.graphs, self.classes
        spans: dict[int, dict[int, tuple[float, float]]] = {
            c: {i: x for i, x in enumerate(e) if x is not None} for c, e in zip(classes, self.done)}
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
