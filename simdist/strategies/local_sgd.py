"""Local SGD (periodic model averaging): H local iterations, then one exchange of the model.

Every worker runs `training.local_steps` = H iterations of forward, backward and its own optimizer
step with no communication; then the workers meet and average their models with the strategy's
collectives (all_reduce buckets, or push/pull through the parameter servers, which apply the
average as `server_delay_s`), bucket after bucket on one communication stream, through the codec
(which then compresses model deltas). No overlap: the model exists only after the last step.
The workers meet at every exchange, so the slowest sets the round and the fabric is idle at each
round boundary: rounds repeat exactly, and the reported iteration time is round / H.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generator

from simdist.collectives.schedule import Schedule
from simdist.results.records import StepRecord
from simdist.strategies.data_parallel import exchange, exchange_closed_form_s, same_time
from simdist.strategies.plan import IterationPlan


@dataclass
class RoundLog:
    """Per round: its duration and the communication stream's busy seconds."""

    rounds_s: list[float] = field(default_factory=list)
    comm_busy_s: list[float] = field(default_factory=list)
    records: list[StepRecord] = field(default_factory=list)


def local_compute_s(plan: IterationPlan, local_steps: int) -> float:
    """Compute of one round: H iterations of the slowest worker (k micro-batches and its own step each)."""
    per_iteration = max(plan.micro_steps * (w.fwd_s + w.bwd_s) + w.optimizer_s for w in plan.workers)
    return local_steps * per_iteration


def run_rounds_simulated(env, plan: IterationPlan, rounds: int, local_steps: int,
                         schedule_for: Callable[[object, float, float], Schedule], network) -> RoundLog:
    """Play `rounds` rounds on the network (stops after two identical rounds: the rest are copies)."""
    log = RoundLog()
    env.process(_rounds(env, plan, rounds, local_steps, schedule_for, network, log))
    env.run()
    return log


def _rounds(env, plan, rounds, local_steps, schedule_for, network, log: RoundLog) -> Generator:
    compute = local_compute_s(plan, local_steps)
    for r in range(rounds):
        if len(log.rounds_s) >= 2 and same_time(log.rounds_s[-1], log.rounds_s[-2]):
            break
        start = env.now
        yield env.timeout(compute)
        busy = 0.0
        for bc in plan.buckets:
            t0 = env.now
            yield from exchange(env, bc, schedule_for, network)
            busy += env.now - t0
            log.records.append(StepRecord("comm:0", f"bucket{bc.bucket.index}", t0, env.now, r))
        log.records.append(StepRecord("gpu:0", f"{local_steps} local steps", start, start + compute, r))
        log.rounds_s.append(env.now - start)
        log.comm_busy_s.append(busy)


def round_closed_form(plan: IterationPlan, local_steps: int,
                      collective_time: Callable[[object, float, float], float]) -> tuple[float, float]:
    """(round seconds, communication seconds) with each collective's closed-form time."""
    comm = sum(exchange_closed_form_s(bc, collective_time) for bc in plan.buckets)
    return local_compute_s(plan, local_steps) + comm, comm
