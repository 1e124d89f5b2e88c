"""The one executor: runs the execution graphs of every rank class on a network model with simpy.

A task starts when its dependencies are done and the previous task on its stream is done; compute and host work take
their duration (compute re-timed while collectives interfere with it); a collective runs once for its process group,
when every member class has reached it, and every member waits for it; a send/recv runs its point-to-point schedule.
`barrier=True` (BSP, local SGD) starts iteration i + 1 of every class when all have finished iteration i, and, when
`steady_skip`, stops simulating once two consecutive iterations are identical (the fabric is idle at every boundary,
so the rest repeat exactly and are inferred); `barrier=False` (asynchronous PS) lets each class loop on its own
under a sync policy's gates. Processes are generator functions taking env first; the log holds plain StepRecords.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Generator, Protocol

import simpy

from simdist.graph.spans import busy_s, class_records
from simdist.graph.tasks import Collective, Compute, Graph, HostWork, ProcessGroup, SendRecv, Stream, Task
from simdist.progress import Progress
from simdist.results.records import StepRecord

MAX_TRACKED_RANKS = 64  # ranks drawn in the trace besides each class's representative


class SyncPolicy(Protocol):
    """Hooks of a sync mode that gates tasks (SSP's bound, a PS shard's read)."""

    def before_iteration(self, env, graph: Graph, it: int) -> Generator: ...

    def after_iteration(self, graph: Graph, it: int) -> None: ...

    def before(self, env, graph: Graph, task: Task, it: int) -> Generator: ...

    def after(self, graph: Graph, task: Task, it: int) -> None: ...


@dataclass
class ExecLog:
    """What the executor measured: per iteration (barrier mode) and per class."""

    times: list[float] = field(default_factory=list)  # barrier mode: iteration durations
    class_end_s: dict[int, list[float]] = field(default_factory=dict)  # per class: iteration end times
    class_comm_busy_s: dict[int, list[float]] = field(default_factory=dict)
    class_compute_busy_s: dict[int, list[float]] = field(default_factory=dict)
    records: list[StepRecord] = field(default_factory=list)
    simulated: int = 0
    inferred: int = 0


def same_time(a: float, b: float) -> bool:
    """Equal up to the rounding that absolute simulation time adds (relative 1e-9)."""
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-12)


class Executor:
    """Runs graphs on `network`; `schedule_of(task, graph)` gives a collective's or send/recv's Schedule."""

    def __init__(self, env: simpy.Environment, network, schedule_of: Callable, groups: dict[str, ProcessGroup],
                 policy: SyncPolicy | None = None, record: bool = True, critical_class: int = 0,
                 record_classes: set[int] | None = None, max_tracked: int = MAX_TRACKED_RANKS,
                 slowdown: Callable[[int, str], float] | None = None) -> None:
        self.env, self.network, self.schedule_of, self.groups = env, network, schedule_of, groups
        self.policy, self.record, self.critical = policy, record, critical_class
        self.record_classes = record_classes  # None: every class
        self.max_tracked = max_tracked  # ranks below this are drawn besides each class's representative
        self._members: dict[str, int] = {}
        self._pending: dict[tuple, list] = {}
        # compute-communication interference: slowdown(class index, collective op) -> s; compute-stream work
        # of a class runs at 1 / (1 + max s) while collectives of its groups run (see _work)
        self.slowdown = slowdown
        self._group_classes: dict[str, list[int]] = {}
        self._slows: dict[tuple, tuple] = {}  # (group, op) -> its member classes' positive slowdowns, once
        self._comm_on: dict[int, list[float]] = {}
        self._computing: dict[int, set] = {}
        self._orders: dict[int, tuple] = {}  # per class: Graph.prerequisites()
        self.log = ExecLog()
        self.last_spans: dict[int, dict[int, tuple[float, float]]] = {}  # per class: its latest iteration
        self.waits_ran: dict[int, dict[int, tuple]] = {}  # per class: its slowed tasks' Compute.waits as they ran

    # ---- running
    def run(self, graphs: list[Graph], iterations: int | None, duration_s: float | None = None,
            barrier: bool = True, steady_skip: bool = True) -> ExecLog:
        """Run until `iterations` iterations (or, with `duration_s`, until that simulated time) are done."""
        for name, g in self.groups.items():
            ranks = set(g.ranks)
            self._members[name] = sum(1 for gr in graphs if ranks & set(gr.rank_class.ranks))
            self._group_classes[name] = [gr.rank_class.index for gr in graphs if ranks & set(gr.rank_class.ranks)]
        for gr in graphs:
            for d in (self.log.class_end_s, self.log.class_comm_busy_s, self.log.class_compute_busy_s):
                d[gr.rank_class.index] = []
        if barrier:
            self.env.process(self._lockstep(self.env, graphs, iterations, duration_s, steady_skip))
        else:
            for gr in graphs:
                self.env.process(self._free(self.env, gr, iterations, duration_s))
        self.env.run()
        return self.log

    def _more(self, it: int, iterations: int | None, duration_s: float | None) -> bool:
        if duration_s is not None:
            return it == 0 or self.env.now < duration_s
        return it < (iterations or 0)

    def _repeats(self) -> bool:
        t, c = self.log.times, self.log.class_comm_busy_s[self.critical]
        return len(t) >= 2 and same_time(t[-2], t[-1]) and same_time(c[-2], c[-1])

    def _lockstep(self, env, graphs, iterations, duration_s, steady_skip) -> Generator:
        bar = Progress(iterations or 1, label="iterations", delay_s=1.0)  # large clusters: seconds per iteration
        it = 0
        try:
            while self._more(it, iterations, duration_s):
                if steady_skip and self._repeats():
                    self._infer(it, iterations, duration_s)
                    bar.note = f"the last {self.log.inferred} repeat the steady state (not simulated)"
                    bar.advance(max(0, bar.total - bar.done))
                    return
                start = env.now
                yield env.all_of([env.process(self._iteration(env, gr, it)) for gr in graphs])
                self.log.times.append(env.now - start)
                self.log.simulated += 1
                it += 1
                bar.advance()
        finally:
            bar.close()

    def _infer(self, it: int, iterations: int | None, duration_s: float | None) -> None:
        """The remaining iterations repeat the last one exactly: append them without events."""
        period = self.log.times[-1]
        if duration_s is not None:
            rest = max(0, math.ceil((duration_s - self.env.now) / period - 1e-9)) if period > 0 else 0
        else:
            rest = iterations - it
        self.log.times += [period] * rest
        for d in (self.log.class_comm_busy_s, self.log.class_compute_busy_s):
            for v in d.values():
                v += [v[-1]] * rest
        for v in self.log.class_end_s.values():
            v += [v[-1] + period * (i + 1) for i in range(rest)]
        self.log.inferred = rest

    def _free(self, env, graph: Graph, iterations, duration_s) -> Generator:
        it = 0
        while self._more(it, iterations, duration_s):
            if self.policy is not None:
                yield from self.policy.before_iteration(env, graph, it)
            yield env.process(self._iteration(env, graph, it))
            if self.policy is not None:
                self.policy.after_iteration(graph, it)
            it += 1
        self.log.simulated = max(self.log.simulated, it)

    def _iteration(self, env, graph: Graph, it: int) -> Generator:
        """One iteration of a class, ending with its last task: each task starts once its dependencies and its
        stream's previous task have ended, in the process of the task whose end readied it first, else its own."""
        idx = graph.rank_class.index
        if idx not in self._orders:  # built once per class
            self._orders[idx] = graph.prerequisites()
        after, waiting, _ = self._orders[idx]
        spans: dict[int, tuple[float, float]] = {}
        left, done, unfinished = list(waiting), env.event(), [len(graph.tasks)]  # prerequisites and tasks to go

        def finished(tid: int) -> Task | None:  # the first task tid's end readies; the others start now
            here = None
            for nxt in after[tid]:
                left[nxt] -= 1
                if left[nxt] == 0 and here is None:
                    here = graph.tasks[nxt]
                elif left[nxt] == 0:
                    env.process(self._task(env, graph, it, graph.tasks[nxt], spans, finished))
            unfinished[0] -= 1
            if unfinished[0] == 0:
                done.succeed()
            return here

        for t in graph.tasks:
            if waiting[t.id] == 0:
                env.process(self._task(env, graph, it, t, spans, finished))
        if graph.tasks:
            yield done
        self.last_spans[idx] = spans
        self.log.class_end_s[idx].append(env.now)
        compute, comm = busy_s(graph, spans)
        self.log.class_compute_busy_s[idx].append(compute)
        self.log.class_comm_busy_s[idx].append(comm)
        if self.record and (self.record_classes is None or idx in self.record_classes):
            self.log.records += class_records(graph, it, spans, self.max_tracked)

    def _task(self, env, graph: Graph, it: int, task: Task | None, spans, finished: Callable) -> Generator:
        """Run `task`, then the first task its end readies, and so on: a chain of tasks is one process."""
        while task is not None:
            t0 = env.now
            if self.policy is not None:
                yield from self.policy.before(env, graph, task, it)
            if isinstance(task, (Compute, HostWork)):
                if self.slowdown is not None and isinstance(task, Compute) and task.stream == Stream.COMPUTE:
                    yield from self._work(env, graph, task)
                elif task.duration_s > 0:  # nothing re-times it (_work's loop, once)
                    yield env.timeout(task.duration_s)
            elif isinstance(task, Collective) and self._members.get(task.group, 1) == 1:
                t0 = env.now  # no other class to wait for: it starts now, in this process
                yield from self._collective(env, graph, task)
            elif isinstance(task, Collective):
                done, started = self._join(env, graph, task, it)
                yield done
                t0 = started[0]
            elif isinstance(task, SendRecv) and task.src != task.dst:
                yield from self.network.run(env, self.schedule_of(task, graph))
            if self.policy is not None:
                self.policy.after(graph, task, it)
            spans[task.id] = (t0, env.now)
            task = finished(task.id)

    def _join(self, env, graph: Graph, task: Collective, it: int):
        """Arrive at a group collective; the last member class to arrive starts it for all."""
        key = (task.group, task.key, it)
        entry = self._pending.get(key)
        if entry is None:
            entry = self._pending[key] = [0, env.event(), [0.0]]
        entry[0] += 1
        if entry[0] == self._members.get(task.group, 1):
            del self._pending[key]
            entry[2][0] = env.now
            env.process(self._collective(env, graph, task, entry[1]))
        return entry[1], entry[2]

    def _collective(self, env, graph: Graph, task: Collective, done: simpy.Event | None = None) -> Generator:
        on = self._interfere(task, True) if self.slowdown is not None else ()
        yield from self.network.run(env, self.schedule_of(task, graph))
        if on:
            self._interfere(task, False, on)
        if done is not None:
            done.succeed()

    def _work(self, env, graph: Graph, task: Compute) -> Generator:
        """Compute-stream work under interference: it progresses at 1 / (1 + s) while its class has collectives
        running (s: the largest slowdown of those running), re-timed (an Interrupt) whenever that changes."""
        proc, c = env.active_process, graph.rank_class.index
        computing = self._computing.setdefault(c, set())
        computing.add(proc)
        done, t0, reached = 0.0, env.now, {0.0: 0.0}  # seconds of work done at the full rate; when each part ended
        try:
            while done < task.duration_s:
                upto, fixed = task.segment_at(done)
                t, rate = env.now, 1.0 if fixed else self._rate(c)  # a fused tp call's wait runs at its own time
                try:
                    yield env.timeout((upto - done) / rate)
                    done = upto
                except simpy.Interrupt:  # the rate changed: the rest of the work at the new one
                    done = min(upto, done + (env.now - t) * rate)
                if done == upto:
                    reached[upto] = env.now - t0
        finally:
            computing.discard(proc)
        if task.waits and not same_time(env.now - t0, task.duration_s):  # slowed between its waits
            self.waits_ran.setdefault(c, {})[task.id] = tuple((reached[a], reached[a] + b - a) for a, b in task.waits)

    def _rate(self, c: int) -> float:
        """Compute rate of class c: 1 / (1 + the largest slowdown of its running collectives)."""
        on = self._comm_on.get(c)
        return 1.0 / (1.0 + max(on)) if on else 1.0

    def _interfere(self, task: Collective, start: bool, slows: tuple = ()) -> tuple:
        """A collective starts (or ends) on every member class: note its slowdown, re-time their compute (only
        called with interference: `slowdown` set)."""
        if start and (task.group, task.op) not in self._slows:
            per_class = ((c, self.slowdown(c, str(task.op))) for c in self._group_classes.get(task.group, ()))
            self._slows[task.group, task.op] = tuple((c, s) for c, s in per_class if s > 0)
        if start:
            slows = self._slows[task.group, task.op]
        for c, s in slows:
            on = self._comm_on.setdefault(c, [])
            before = self._rate(c)
            if start:
                on.append(s)
            else:
                on.remove(s)
            if self._rate(c) == before:  # the largest slowdown is unchanged: the compute keeps its rate
                continue
            for proc in tuple(self._computing.get(c, ())):
                if proc.is_alive:
                    proc.interrupt()
        return slows

