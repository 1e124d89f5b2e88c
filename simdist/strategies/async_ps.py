"""Asynchronous (asp) and stale-synchronous (ssp) parameter-server training: one process per worker.

Each worker loops on its own: forward/backward at its own speed; each bucket, when ready, is
encoded and pushed shard by shard to every server (its own shard stays local when the server is
colocated with it), the server applies that worker's update (`server_delay_s`) and the worker pulls
the updated shard back, then decodes. No barrier: under `ssp` with bound s a worker starts
iteration i only when the slowest worker has finished iteration i - s - 1 (s = 0 is BSP);
`asp` has no bound. All workers share one network model, so in `simulate` concurrent pushes contend
on the servers' links max-min fairly. In `estimate` (no flows) every push and pull is timed as if
all workers exchanged that shard at once (the BSP PS step): exact for equal-speed workers in
lockstep, pessimistic when they drift apart.

Reads follow SSP's guarantee (Ho et al. 2013): under bound s, the pull that ends iteration i waits
until every worker's iteration-(i - s) update of that shard is applied, so s = 0 reads what BSP
reads; asp pulls right after its own update. Staleness of an update = the number of updates applied
to that shard between this worker's last pull of it and the application of its push that were
computed from a different version than the one it read (updates computed from the same version are
siblings, as in BSP's sum): equal-speed asp workers see N - 1, ssp with s = 0 sees 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Generator

from simdist.collectives.schedule import CollectiveOp, Schedule, Step, Transfer
from simdist.results.records import StepRecord
from simdist.strategies.plan import IterationPlan

MAX_RECORDED_WORKERS = 16


@dataclass
class AsyncLog:
    """What the workers did: per-worker iteration finish times, comm busy time, staleness, server bytes."""

    finish_s: list[list[float]]
    comm_busy_s: list[list[float]]
    staleness: list[int] = field(default_factory=list)
    server_in_bytes: dict[int, float] = field(default_factory=dict)
    server_out_bytes: dict[int, float] = field(default_factory=dict)
    records: list[StepRecord] = field(default_factory=list)
    end_s: float = 0.0


def worker_payload_bytes(op: CollectiveOp, size_bytes: float, n_workers: int) -> float:
    """One worker's share of a codec collective (nccl-tests sizes): all_gather's total / N, else the size."""
    return size_bytes / n_workers if op == CollectiveOp.ALL_GATHER else size_bytes


class PsExchange:
    """Push and pull schedules of one worker's shard, cached so the network's step cache hits."""

    def __init__(self, ranks: tuple[int, ...], contended: bool) -> None:
        self.ranks = ranks
        self.contended = contended
        self._cache: dict[tuple, Schedule] = {}

    def schedule(self, kind: str, worker: int, server: int, shard_bytes: float) -> Schedule:
        """'push' (worker -> server) or 'pull' (server -> worker); contended: every worker's at once."""
        key = (kind, worker if not self.contended else -1, server, shard_bytes)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        senders = [w for w in self.ranks if w != server] if self.contended else [worker]
        pairs = [(w, server) if kind == "push" else (server, w) for w in senders]
        step = Step(tuple(Transfer(a, b, shard_bytes) for a, b in pairs), lockstep=False,
                    label=f"{kind} {'all' if self.contended else worker} <-> server {server}")
        out = Schedule(CollectiveOp.ALL_REDUCE, f"ps_{kind}", shard_bytes, ((step,),))
        self._cache[key] = out
        return out


@dataclass
class _Shared:
    """State the worker processes share: progress for the ssp bound and every shard's update history."""

    env: object
    done: list[int]
    progress: object
    bound: int | None = None
    bases: dict[tuple, list[int]] = field(default_factory=dict)  # per shard: the version each update was computed from
    applied: dict[tuple, list[int]] = field(default_factory=dict)  # per shard: updates applied per worker
    changed: dict[tuple, object] = field(default_factory=dict)  # per shard: fires when its slowest worker advances
    read: dict[tuple, int] = field(default_factory=dict)  # (worker, shard) -> version it last pulled

    def finish(self, w: int) -> None:
        before = min(self.done)
        self.done[w] += 1
        if min(self.done) > before:
            old, self.progress = self.progress, self.env.event()
            old.succeed()

    def apply(self, w: int, key: tuple, n: int) -> int | None:
        """Apply worker w's update to a shard; return its staleness (None for its first update)."""
        bases = self.bases.setdefault(key, [])
        applied = self.applied.setdefault(key, [0] * n)
        base = self.read.get((w, key))
        stale = None if base is None else sum(1 for b in bases[base:] if b != base)
        bases.append(0 if base is None else base)
        before = min(applied)
        applied[w] += 1
        if min(applied) > before and key in self.changed:
            self.changed.pop(key).succeed()
        return stale

    def readable(self, w: int, key: tuple) -> bool:
        """ssp: w may read once every worker's update of its iteration - bound is in (s = 0: all of them)."""
        if self.bound is None:
            return True
        return min(self.applied[key]) >= self.applied[key][w] - self.bound


def run_async(env, plan: IterationPlan, iterations: int, bound: int | None, ranks: tuple[int, ...],
              servers: tuple[int, ...], network, contended: bool, record: bool = True) -> AsyncLog:
    """Run every worker for `iterations` iterations; `bound` None = asp, else the ssp staleness bound."""
    n = len(ranks)
    log = AsyncLog(finish_s=[[] for _ in range(n)], comm_busy_s=[[] for _ in range(n)])
    log.server_in_bytes = {s: 0.0 for s in servers}
    log.server_out_bytes = {s: 0.0 for s in servers}
    shared = _Shared(env, [0] * n, env.event(), bound)
    exchange = PsExchange(ranks, contended)
    recorded = set(range(min(n, MAX_RECORDED_WORKERS))) | {i for i, wc in enumerate(plan.workers) if wc.slowdown != 1}
    for i in range(n):
        env.process(_worker(env, plan, i, ranks, servers, iterations, bound, network, exchange, shared, log,
                            record and i in recorded))
    env.run()
    log.end_s = float(env.now)
    return log


def _launch(plan: IterationPlan, ready_s: float) -> float:
    if plan.fusion_cycle_s > 0:
        return math.ceil(ready_s / plan.fusion_cycle_s - 1e-12) * plan.fusion_cycle_s
    return ready_s


def _worker(env, plan, i, ranks, servers, iterations, bound, network, exchange, shared: _Shared,
            log: AsyncLog, record: bool) -> Generator:
    wc = plan.workers[i]
    for it in range(iterations):
        while bound is not None and min(shared.done) < it - bound:
            yield shared.progress
        start = env.now
        if plan.micro_steps > 1:
            yield env.timeout((plan.micro_steps - 1) * (wc.fwd_s + wc.bwd_s))
        yield env.timeout(wc.fwd_s)
        bwd_start = env.now
        busy = [0.0]
        comm = env.process(_comm(env, plan, i, ranks, servers, bwd_start, network, exchange, shared, log, it,
                                 busy, record))
        yield env.timeout(wc.bwd_s)
        yield comm
        opt_start = env.now
        if plan.optimizer_s:
            yield env.timeout(plan.optimizer_s * wc.slowdown)
        if record:
            log.records += [StepRecord(f"gpu:{i}", "forward", start, bwd_start, it),
                            StepRecord(f"gpu:{i}", "backward", bwd_start, bwd_start + wc.bwd_s, it),
                            StepRecord(f"gpu:{i}", "optimizer", opt_start, env.now, it)]
        log.finish_s[i].append(float(env.now))
        log.comm_busy_s[i].append(busy[0])
        shared.finish(i)


def _comm(env, plan, i, ranks, servers, bwd_start, network, exchange, shared, log, it, busy, record) -> Generator:
    wc = plan.workers[i]
    n = len(ranks)
    for j, bc in enumerate(plan.buckets):
        wait = bwd_start + _launch(plan, wc.ready_s[j]) - env.now
        if wait > 0:
            yield env.timeout(wait)
        t0 = env.now
        if bc.encode_s:
            yield env.timeout(bc.encode_s)
        for c, (op, size) in enumerate(bc.collectives):
            shard = worker_payload_bytes(op, size, n) / len(servers)
            yield env.all_of([env.process(_shard(env, ranks[i], sv, (j, c, sv), shard, bc.server_delay_s, network,
                                                 exchange, shared, log, i)) for sv in servers])
        if bc.decode_s:
            yield env.timeout(bc.decode_s)
        busy[0] += env.now - t0
        if record:
            log.records.append(StepRecord(f"comm:{i}", f"bucket{bc.bucket.index}", t0, env.now, it))


def _shard(env, worker, server, key, shard_bytes, delay_s, network, exchange: PsExchange, shared: _Shared,
           log: AsyncLog, i: int) -> Generator:
    """Push one shard, let the server apply it, pull it back (colocated: no wire)."""
    remote = worker != server
    if remote:
        yield from network.run(env, exchange.schedule("push", worker, server, shard_bytes))
        log.server_in_bytes[server] += shard_bytes
    if delay_s > 0:
        yield env.timeout(delay_s)
    stale = shared.apply(i, key, len(exchange.ranks))
    if stale is not None:
        log.staleness.append(stale)
    while not shared.readable(i, key):
        if key not in shared.changed:
            shared.changed[key] = env.event()
        yield shared.changed[key]
    shared.read[(i, key)] = len(shared.bases[key])
    if remote:
        yield from network.run(env, exchange.schedule("pull", worker, server, shard_bytes))
        log.server_out_bytes[server] += shard_bytes
