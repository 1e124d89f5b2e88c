"""The BSP data-parallel iteration, two ways: played on the network (simpy) or folded in closed form.

Per iteration: (k-1) micro-batches without communication, then the last forward and backward; each
bucket's collectives start when the bucket is ready (or after backward without overlap; Horovod's
fusion cycle rounds the start up to the next cycle tick) and run one after another on one
communication stream, as NCCL runs the calls of one communicator in order; the optimizer step
follows the last bucket.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Generator

from simdist.collectives.schedule import Schedule
from simdist.results.records import StepRecord
from simdist.strategies.plan import BucketComm, IterationPlan


@dataclass
class IterationLog:
    """What one run of iterations produced: per-iteration times, busy seconds and the timeline."""

    times: list[float] = field(default_factory=list)
    comm_busy_s: list[float] = field(default_factory=list)
    records: list[StepRecord] = field(default_factory=list)
    extrapolated: int = 0  # iterations copied from the steady state instead of simulated


def _repeats(log: IterationLog) -> bool:
    """Two identical consecutive iterations: the fabric is idle at every iteration boundary in BSP
    without failures, so from then on every iteration repeats exactly and need not be simulated."""
    if len(log.times) < 2:
        return False
    return same_time(log.times[-2], log.times[-1]) and same_time(log.comm_busy_s[-2], log.comm_busy_s[-1])


def same_time(a: float, b: float) -> bool:
    """Equal up to the rounding that absolute simulation time adds (relative 1e-9)."""
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-12)


def launch_offset(plan: IterationPlan, bucket: BucketComm) -> float:
    """When the bucket's communication may start, after the start of the last backward."""
    if plan.fusion_cycle_s > 0:
        return math.ceil(bucket.ready_s / plan.fusion_cycle_s - 1e-12) * plan.fusion_cycle_s
    return bucket.ready_s


def run_simulated(env, plan: IterationPlan, iterations: int, schedule_for: Callable[[object, float, float], Schedule],
                  network, record_tracks: bool = True) -> IterationLog:
    """Play `iterations` iterations on the shared flow network (discrete events)."""
    log = IterationLog()
    env.process(_training(env, plan, iterations, schedule_for, network, log, record_tracks))
    env.run()
    return log


def _training(env, plan, iterations, schedule_for, network, log: IterationLog, record: bool) -> Generator:
    for it in range(iterations):
        if _repeats(log):  # steady state reached: the remaining iterations are copies
            log.times += [log.times[-1]] * (iterations - it)
            log.comm_busy_s += [log.comm_busy_s[-1]] * (iterations - it)
            log.extrapolated = iterations - it
            return
        start = env.now
        if plan.micro_steps > 1:
            yield env.timeout((plan.micro_steps - 1) * (plan.fwd_s + plan.bwd_s))
        yield env.timeout(plan.fwd_s)
        bwd_start = env.now
        busy = [0.0]
        comm = env.process(_comm_stream(env, plan, bwd_start, schedule_for, network, log, it, busy, record))
        yield env.timeout(plan.bwd_s)
        yield comm
        opt_start = env.now
        yield env.timeout(plan.optimizer_s)
        if record:
            log.records += _gpu_records(plan, start, opt_start, it)
        log.times.append(env.now - start)
        log.comm_busy_s.append(busy[0])


MAX_GPU_TRACKS = 64  # a trace of 16,384 identical GPU tracks helps nobody: the first 64 are drawn


def _gpu_records(plan: IterationPlan, start: float, opt_start: float, it: int) -> list[StepRecord]:
    """Each GPU's own forward, backward and optimizer in this iteration (stragglers show as longer bars;
    the gap before the optimizer is the wait for the slowest GPU and the last bucket)."""
    out = []
    for g, w in enumerate(plan.workers[:MAX_GPU_TRACKS]):
        track = f"gpu:{g}"
        bwd_start = start + plan.micro_steps * (w.fwd_s + w.bwd_s) - w.bwd_s
        name = "forward+backward" if plan.micro_steps > 1 else "forward"
        out += [StepRecord(track, name, start, bwd_start, it),
                StepRecord(track, "backward", bwd_start, bwd_start + w.bwd_s, it),
                StepRecord(track, "optimizer", opt_start, opt_start + w.optimizer_s, it)]
    return out


def exchange(env, bc: BucketComm, schedule_for, network) -> Generator:
    """One bucket on the communication stream: the codec's encode, its collectives in order, decode."""
    if bc.encode_s:
        yield env.timeout(bc.encode_s)
    for op, size in bc.collectives:
        yield env.process(network.run(env, schedule_for(op, size, bc.server_delay_s)))
    if bc.decode_s:
        yield env.timeout(bc.decode_s)


def exchange_closed_form_s(bc: BucketComm, collective_time: Callable[[object, float, float], float]) -> float:
    """The same bucket with each collective's closed-form time (no events)."""
    return bc.encode_s + sum(collective_time(op, size, bc.server_delay_s) for op, size in bc.collectives) + bc.decode_s


def _comm_stream(env, plan, bwd_start, schedule_for, network, log, it, busy, record) -> Generator:
    for bc in plan.buckets:
        wait = bwd_start + launch_offset(plan, bc) - env.now
        if wait > 0:
            yield env.timeout(wait)
        t0 = env.now
        yield from exchange(env, bc, schedule_for, network)
        busy[0] += env.now - t0
        if record:
            log.records.append(StepRecord("comm:0", f"bucket{bc.bucket.index}", t0, env.now, it))


def run_closed_form(plan: IterationPlan, collective_time: Callable[[object, float, float], float]) -> tuple[float, float]:
    """Iteration time and communication-stream busy time with no events: the same recurrence, folded.

    `collective_time(op, size, server_delay)` is the closed-form time of one collective alone.
    """
    end = 0.0  # communication stream, from the start of the last backward
    busy = 0.0
    for bc in plan.buckets:
        start = max(end, launch_offset(plan, bc))
        dur = exchange_closed_form_s(bc, collective_time)
        end = start + dur
        busy += dur
    last = (plan.micro_steps - 1) * (plan.fwd_s + plan.bwd_s) + plan.fwd_s
    return last + max(plan.bwd_s, end) + plan.optimizer_s, busy
