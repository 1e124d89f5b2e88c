"""Pipeline parallelism as data: stage balancing, the task order of GPipe, 1F1B and interleaved 1F1B, the
point-to-point transfers between stages, and a small list scheduler that times an order.

A schedule is, per pipeline rank, the list of tasks it runs in order: (fwd|bwd, micro-batch, chunk), where the
chunk is the rank's virtual stage (0 unless interleaved). Virtual stage `chunk x p + rank` holds the
`chunk x p + rank`-th contiguous slice of the layers (Narayanan et al. 2021, "Efficient Large-Scale Language
Model Training on GPU Clusters Using Megatron-LM", section 2.2). The timer is the oracle the event simulation
is checked against: tasks start when their rank is free and their inputs have arrived; p2p time is a constant.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Callable, Sequence

from simdist.scenario import PipelineSchedule


class TaskKind(StrEnum):
    FWD = "fwd"
    BWD = "bwd"


@dataclass(frozen=True)
class PipeTask:
    kind: TaskKind
    micro: int
    chunk: int = 0


Orders = tuple[tuple[PipeTask, ...], ...]  # per pipeline rank


# ----------------------------------------------------------------------------- balancing


def _greedy(prefix: list[float], stages: int, limit: float) -> list[int] | None:
    """Cut points packing layers left to right under `limit`, leaving one layer for every later stage."""
    n = len(prefix) - 1
    cuts, start = [], 0
    for k in range(stages - 1):
        # the furthest end e with sum(start:e) <= limit that leaves stages-k-1 layers
        e = bisect.bisect_right(prefix, prefix[start] + limit, lo=start + 1) - 1
        e = min(e, n - (stages - k - 1))
        if e <= start:
            return None
        cuts.append(e)
        start = e
    return cuts if prefix[n] - prefix[start] <= limit else None


def balance_stages(costs: Sequence[float], stages: int) -> tuple[tuple[int, int], ...]:
    """Contiguous [start, end) layer ranges, one per stage, minimising the most expensive stage.

    Exact up to float rounding: a bisection on the bottleneck with a greedy feasibility test, then the greedy
    partition at the smallest feasible bound (its slowest stage is the optimum).
    """
    n = len(costs)
    assert isinstance(stages, int) and 1 <= stages <= n, f"io.rules_parallel: 1 <= pp stages ({stages}) <= layers ({n})"
    if any(c < 0 or not math.isfinite(c) for c in costs):
        raise ValueError("layer costs must be finite and >= 0")
    prefix = [0.0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    lo, hi = max(costs, default=0.0), prefix[-1]
    if _greedy(prefix, stages, lo) is not None:
        hi = lo
    for _ in range(200):
        if hi - lo <= 1e-15 * max(hi, 1e-300):
            break
        mid = (lo + hi) / 2
        if _greedy(prefix, stages, mid) is None:
            lo = mid
        else:
            hi = mid
    cuts = _greedy(prefix, stages, hi)
    assert cuts is not None
    bounds = [0, *cuts, n]
    return tuple((bounds[i], bounds[i + 1]) for i in range(stages))


def stage_costs(costs: Sequence[float], ranges: Sequence[tuple[int, int]]) -> list[float]:
    return [math.fsum(costs[a:b]) for a, b in ranges]


# ----------------------------------------------------------------------------- orders


def _check(p: int, m: int, v: int, schedule: PipelineSchedule) -> None:
    """What io.rules_parallel and io.resolve guarantee: positive counts, chunks only interleaved, and interleaved
    micro-batches in groups of pp."""
    assert all(isinstance(x, int) and x >= 1 for x in (p, m, v)), (p, m, v)
    assert schedule is PipelineSchedule.INTERLEAVED or v == 1, f"virtual_stages {v} with schedule {schedule.value}"
    assert schedule is not PipelineSchedule.INTERLEAVED or m % p == 0, f"{m} micro-batches, pp {p}, interleaved"


def gpipe(p: int, m: int) -> Orders:
    """All forwards, then all backwards in reverse micro-batch order (Huang et al. 2019)."""
    _check(p, m, 1, PipelineSchedule.GPIPE)
    one = tuple(PipeTask(TaskKind.FWD, i) for i in range(m)) + \
        tuple(PipeTask(TaskKind.BWD, i) for i in reversed(range(m)))
    return tuple(one for _ in range(p))


def one_f_one_b(p: int, m: int) -> Orders:
    """PipeDream-Flush: rank r warms up with p - r - 1 forwards, alternates, then drains (Narayanan et al. 2021)."""
    _check(p, m, 1, PipelineSchedule.ONE_F_ONE_B)
    out = []
    for r in range(p):
        w = min(p - r - 1, m)
        order = [PipeTask(TaskKind.FWD, i) for i in range(w)]
        for i in range(m - w):
            order += [PipeTask(TaskKind.FWD, w + i), PipeTask(TaskKind.BWD, i)]
        order += [PipeTask(TaskKind.BWD, i) for i in range(m - w, m)]
        out.append(tuple(order))
    return tuple(out)


def interleaved(p: int, m: int, v: int) -> Orders:
    """Megatron-LM's interleaved 1F1B: each rank holds v chunks; micro-batches advance in groups of p.

    Rank r's k-th forward is chunk (k // p) % v of micro-batch (k // (p v)) p + k % p, its k-th backward the
    same with chunks in reverse; warm-up is 2 (p - r - 1) + (v - 1) p forwards.
    """
    _check(p, m, v, PipelineSchedule.INTERLEAVED)
    total = m * v

    def task(kind: TaskKind, k: int) -> PipeTask:
        chunk = (k // p) % v
        return PipeTask(kind, (k // (p * v)) * p + k % p, chunk if kind is TaskKind.FWD else v - 1 - chunk)

    out = []
    for r in range(p):
        w = min(2 * (p - r - 1) + (v - 1) * p, total)
        order = [task(TaskKind.FWD, k) for k in range(w)]
        for k in range(total - w):
            order += [task(TaskKind.FWD, w + k), task(TaskKind.BWD, k)]
        order += [task(TaskKind.BWD, k) for k in range(total - w, total)]
        out.append(tuple(order))
    return tuple(out)


SCHEDULES: dict[PipelineSchedule, Callable[[int, int, int], Orders]] = {
    PipelineSchedule.GPIPE: lambda p, m, v: gpipe(p, m),
    PipelineSchedule.ONE_F_ONE_B: lambda p, m, v: one_f_one_b(p, m),
    PipelineSchedule.INTERLEAVED: interleaved,
}


def schedule_order(schedule: "PipelineSchedule | str", p: int, m: int, v: int = 1) -> Orders:
    """The task order of every pipeline rank for `schedule` with p ranks, m micro-batches, v chunks per rank."""
    kind = PipelineSchedule(schedule)  # the schema admits only these names
    _check(p, m, v, kind)
    return SCHEDULES[kind](p, m, v)


def with_micro_batches(plan, m: int):
    """The same pipeline plan (strategies.mp_plan.MpPlan) with m micro-batches per step and its schedule's orders
    for them: what the stage graphs of a shorter run are built from (engine/closed_form.fold_pipeline)."""
    return replace(plan, micro_batches=m, orders=schedule_order(plan.schedule, plan.pp, m, plan.virtual_stages))


def steady_sizes(schedule: "PipelineSchedule | str", p: int, m: int, v: int = 1) -> list[tuple[int, int]]:
    """Shorter runs of the same pipeline, (m_short, m_short + d) micro-batches, smallest first, whose steady
    state repeats a block of d micro-batches per stage (1F1B: d = 1; interleaved: pp, its micro-batch groups;
    GPipe has no steady state): the first leaves every rank 3 blocks after its warm-up (the longer run 4: the
    inserted one, the window of graph/periodic.py and one to settle), the second 9 (a steady state that settles
    late); each at most half of m, so that building and folding them (and the whole graphs, where they do not
    repeat) costs at most about what folding the whole graphs does."""
    kind = PipelineSchedule(schedule)
    if kind is PipelineSchedule.GPIPE:
        return []
    d = p if kind is PipelineSchedule.INTERLEAVED else 1
    warm = -(-(2 * (p - 1) + (v - 1) * p if kind is PipelineSchedule.INTERLEAVED else p - 1) // v)
    out = []
    for blocks in (3, 9):
        short = -(-(warm + blocks * d) // d) * d
        if 2 * (short + d) <= m:
            out.append((short, short + d))
    return out


# ----------------------------------------------------------------------------- p2p transfers


@dataclass(frozen=True)
class P2PTransfer:
    """One point-to-point send between pipeline ranks (indices in the pp group)."""

    src: int
    dst: int
    micro: int
    boundary: int  # virtual stage boundary: between virtual stages `boundary` and `boundary + 1`
    kind: TaskKind  # fwd: activations downstream; bwd: their gradients upstream
    size_bytes: float


def boundary_bytes(micro_batch: int, seq_len: int, hidden: int, dtype_bytes: int, shards: int = 1) -> float:
    """Activation (and its gradient) bytes one rank sends across a stage boundary per micro-batch:
    b x s x h x dtype, divided by `shards` when the tensor is split over the tp group (sequence parallelism
    leaves each tp rank its s / tp tokens, and each sends only those to its peer in the next stage)."""
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise ValueError(f"shards: got {shards!r}; expected a positive integer")
    return float(micro_batch * seq_len * hidden * dtype_bytes) / shards


def p2p_transfers(p: int, m: int, v: int, size_bytes: float) -> tuple[P2PTransfer, ...]:
    """Every send of one step: per micro-batch and virtual stage boundary, activations forward, gradients back."""
    out = []
    for i in range(m):
        for s in range(p * v - 1):
            a, b = s % p, (s + 1) % p
            out.append(P2PTransfer(a, b, i, s, TaskKind.FWD, size_bytes))
            out.append(P2PTransfer(b, a, i, s, TaskKind.BWD, size_bytes))
    return tuple(out)


# ----------------------------------------------------------------------------- list scheduler (test oracle)


@dataclass(frozen=True)
class ScheduleTiming:
    """When each task ran: starts[rank][j], ends[rank][j] for orders[rank][j]."""

    orders: Orders
    starts: tuple[tuple[float, ...], ...]
    ends: tuple[tuple[float, ...], ...]

    @property
    def makespan_s(self) -> float:
        return max((e[-1] for e in self.ends if e), default=0.0)

    def busy_s(self, rank: int) -> float:
        return math.fsum(e - s for s, e in zip(self.starts[rank], self.ends[rank]))

    def bubble_fraction(self, rank: int | None = None) -> float:
        """Idle share of the makespan on `rank` (default: averaged over ranks)."""
        ranks = range(len(self.orders)) if rank is None else [rank]
        t = self.makespan_s
        return 1.0 - math.fsum(self.busy_s(r) for r in ranks) / (t * len(ranks))

    def peak_in_flight(self, rank: int) -> int:
        """Most chunk-micro-batches whose forward has run and backward has not (activations held)."""
        live = peak = 0
        for task in self.orders[rank]:
            live += 1 if task.kind is TaskKind.FWD else -1
            peak = max(peak, live)
        return peak


Duration = Callable[[int, PipeTask], float]


def time_orders(orders: Orders, fwd_s: "float | Duration", bwd_s: "float | Duration", p2p_s: float = 0.0,
                virtual_stages: int = 1) -> ScheduleTiming:
    """Run each rank's order in sequence: a task starts when its rank is free and its input is there (the
    upstream forward / downstream backward finished p2p_s earlier on another rank, or just now on the same).
    Durations are constants or functions (rank, task) -> seconds. Raises ValueError on a deadlocked order."""
    p, v = len(orders), virtual_stages
    fwd = fwd_s if callable(fwd_s) else (lambda r, t, x=float(fwd_s): x)
    bwd = bwd_s if callable(bwd_s) else (lambda r, t, x=float(bwd_s): x)
    done: dict[tuple[TaskKind, int, int], tuple[float, int]] = {}  # (kind, micro, virtual stage) -> (end, rank)
    nxt = [0] * p
    free = [0.0] * p
    starts: list[list[float]] = [[] for _ in range(p)]
    ends: list[list[float]] = [[] for _ in range(p)]
    last = p * v - 1
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for r in range(p):
            while nxt[r] < len(orders[r]):
                t = orders[r][nxt[r]]
                vs = t.chunk * p + r
                if t.kind is TaskKind.FWD:
                    dep = (TaskKind.FWD, t.micro, vs - 1) if vs > 0 else None
                else:
                    dep = (TaskKind.BWD, t.micro, vs + 1) if vs < last else (TaskKind.FWD, t.micro, vs)
                ready = 0.0
                if dep is not None:
                    if dep not in done:
                        break
                    end, on = done[dep]
                    ready = end + (p2p_s if on != r else 0.0)
                start = max(free[r], ready)
                dur = fwd(r, t) if t.kind is TaskKind.FWD else bwd(r, t)
                free[r] = start + dur
                done[(t.kind, t.micro, vs)] = (free[r], r)
                starts[r].append(start)
                ends[r].append(free[r])
                nxt[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            stuck = {r: orders[r][nxt[r]] for r in range(p) if nxt[r] < len(orders[r])}
            raise ValueError(f"the pipeline order deadlocks: waiting tasks {stuck}")
    return ScheduleTiming(orders, tuple(map(tuple, starts)), tuple(map(tuple, ends)))


def bubble_closed_form(p: int, m: int, v: int = 1) -> float:
    """Idle share of the step for uniform stages, no p2p time: (p-1)/v / (m + (p-1)/v) (Narayanan et al. 2021)."""
    b = (p - 1) / v
    return b / (m + b)
