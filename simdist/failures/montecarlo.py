"""Monte Carlo over failure seeds: run the timeline `replicas` times and report mean and 95 % intervals.

Replica r draws from numpy's Generator seeded with (run.seed, r), so any replica can be reproduced on
its own. Every figure is the mean over replicas; with more than one replica it also gets a `<name>_ci95`
pair [mean - h, mean + h], h = 1.96 x sample standard deviation / sqrt(replicas) (normal approximation).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import replace
from typing import Callable

import numpy as np

from simdist.failures.targets import FailureTargets
from simdist.failures.incidents import DEFAULT_REPAIR_S, sample_random, scheduled
from simdist.failures.rates import job_rate, mtbfs, young_daly_interval_s, closed_form_goodput
from simdist.failures.state import Costs, JobSpec, StepTime, Tally
from simdist.failures.timeline import run_timeline
from simdist.results.records import GOODPUT_FIGURES, FailureModel, Goodput
from simdist.scenario import FailuresSpec, RecoveryPolicy

def maintenance_times(spec: FailuresSpec, duration_s: float) -> list[tuple[float, float]]:
    m = spec.maintenance
    if m is None:
        return []
    t = m.interval_s if m.first_s is None else m.first_s
    out = []
    while t < duration_s:
        out.append((t, m.duration_s))
        t += m.interval_s
    return out


def _figures(tally: Tally, job: JobSpec) -> dict[str, float | None]:
    wall = tally.wall_s
    samples_per_s = tally.samples / wall
    tokens = samples_per_s * job.tokens_per_sample if job.tokens_per_sample else None
    cost = job.gpu_price_per_hour_usd * wall / 3600.0
    return {"ratio": tally.useful_s / wall, "useful_s": tally.useful_s, "wall_s": wall,
            "lost_work_s": tally.lost_work_s, "checkpoint_s": tally.checkpoint_s, "restart_s": tally.restart_s,
            "downtime_s": tally.downtime_s, "degraded_s": tally.degraded_s, "failures": tally.failures,
            "restarts": tally.restarts, "rejoins": tally.rejoins, "checkpoints": tally.checkpoints,
            "correlated_failures": tally.correlated, "maintenance": tally.maintenance,
            "group_out_s": tally.group_out_s, "samples_per_s": samples_per_s, "tokens_per_s": tokens,
            "cost_per_sample_usd": cost / tally.samples if tally.samples > 0 else None,
            "cost_per_token_usd": cost / (tally.samples * job.tokens_per_sample)
            if tally.samples > 0 and job.tokens_per_sample else None}


def _mean_ci(values: list) -> tuple[float | None, list[float] | None]:
    if any(v is None for v in values):
        return None, None
    mean = math.fsum(values) / len(values)
    if len(values) < 2:
        return mean, None
    h = 1.96 * statistics.stdev(values) / math.sqrt(len(values))
    return mean, [mean - h, mean + h]


def run_replicas(job: JobSpec, spec: FailuresSpec, facts: FailureTargets, costs: Costs, step_time: StepTime,
                 seed: int, replicas: int, reroute: bool = True,
                 on_replica: Callable[[int], None] | None = None) -> tuple[Goodput, list[Tally]]:
    """The goodput figures (means, 95 % intervals, failures by kind; the engine adds the failure model and its
    states) and every replica's Tally. Without `reroute` (a sync mode that does not take link changes) a
    random fabric fault that cuts no node off aborts the job's collectives instead (a restart), and
    `fabric_faults` says so."""
    repair = spec.random.repair_s if spec.random is not None else DEFAULT_REPAIR_S
    fixed, slowdowns = scheduled(spec.events, facts, repair)
    maint = maintenance_times(spec, job.duration_s)
    tallies, rows = [], []
    for r in range(replicas):
        rng = np.random.default_rng([seed, r])
        random = sample_random(spec.random, facts, job.duration_s, rng) if spec.random is not None else []
        if not reroute:
            random = [replace(i, links=()) if i.links and not i.nodes else i for i in random]
        tally = run_timeline(job, spec.recovery.policy, costs, step_time, sorted(fixed + random), slowdowns, maint,
                             record=r == 0, cut_off=facts.cut_off)
        tallies.append(tally)
        rows.append(_figures(tally, job))
        if on_replica is not None:  # a progress bar: replica r is done
            on_replica(r)
    means, ci95 = {}, {}
    for name in GOODPUT_FIGURES:
        means[name], ci = _mean_ci([row[name] for row in rows])
        if replicas > 1:
            ci95[name] = ci
    rebalance = {}
    if job.rebalance_every:  # batch_split dynamic
        rebalance = {"rebalances": math.fsum(t.rebalances for t in tallies) / replicas,
                     "rebalance_every": job.rebalance_every}
    kinds = sorted({k for t in tallies for k in t.failures_by_kind})
    goodput = Goodput(**means, ci95=ci95, **rebalance,
                      failures_by_kind={k: math.fsum(t.failures_by_kind.get(k, 0) for t in tallies) / replicas
                                        for k in kinds}, replicas=replicas,
                      fabric_faults="reroute" if reroute else "abort (the sync mode does not take link changes: restart)")
    return goodput, tallies


def model_summary(spec: FailuresSpec, facts: FailureTargets, costs: Costs, reroute: bool = True) -> FailureModel:
    """The rates, job MTBF (between interruptions), Young/Daly interval and first-order closed form shown
    beside the simulation; fabric faults that only reroute are counted apart (`job_reroutes_per_day`)."""
    rate = job_rate(spec.random, facts, reroute)
    m = rate.mtbf_s
    rec = spec.recovery
    blocking = costs.write_s
    recovery_s = costs.detection_s + costs.restart_s
    optimum = closed = None
    if math.isfinite(m):
        optimum = young_daly_interval_s(blocking, m)
        if rec.policy in (RecoveryPolicy.CHECKPOINT_RESTART,) and costs.persist_s == 0:
            closed = closed_form_goodput(costs.interval_s, blocking, recovery_s, m)
    return FailureModel(
        policy=rec.policy.value, component_mtbf_s=mtbfs(spec.random) if spec.random else {},
        default_rates=bool(spec.random and spec.random.defaults),
        distribution=spec.random.distribution.value if spec.random else None,
        job_failures_per_day=rate.per_s * 86400.0, job_mtbf_s=m if math.isfinite(m) else None,
        job_failures_per_day_by_component={k: v * 86400.0 for k, v in rate.per_component_per_s.items()},
        job_reroutes_per_day=math.fsum(rate.reroute_per_component_per_s.values()) * 86400.0,
        job_mtbf_counts="interruptions (failures that stop the job; fabric faults that only reroute "
                        "are in job_reroutes_per_day)",
        checkpoint_interval_s=costs.interval_s, checkpoint_blocking_s=blocking, recovery_s=recovery_s,
        young_daly_interval_s=optimum, closed_form_ratio=closed)
