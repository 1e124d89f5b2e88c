"""Runs made of runs, on top of the steady training run (engine/training.py), calling only down.

- **phases** (`training.sync: hybrid`, `training.batch_split: dynamic`): each steady phase simulated on its
  own, combined iteration-weighted (`run_phased`).
- **the goodput timeline** (failures over `run.duration`): the timeline of simdist.failures fed with the
  iteration time of every cluster state it meets, each simulated once (failures/step_time.py, run here:
  `state_step_time`, `run_goodput`); `run.replicas` timelines (failures.montecarlo).

Hybrid: asynchronous (asp, the parameter-server path) for iterations [0, S), synchronous (bsp, the same parameter
servers) from S on, with S = `training.hybrid_switch` (an iteration, or a share of `run.iterations`). Dynamic:
iterations [0, k) run with the split the job starts from (proportional to the predicted GPU speeds: equal on
identical GPUs); after k = `training.rebalance_every` iterations the job has observed every GPU's step time,
stragglers included, and re-splits the batch in proportion to the observed speeds (strategies/batch_split.py), from
then on every k iterations (a steady run keeps it). Each distinct phase runs as an ordinary steady-state run (at the
scenario's fidelity, `run.iterations` and `run.warmup`), and the run's figures are the iteration-weighted
combination: total time = sum over phases of iterations x iteration time, mean iteration time = total / N,
throughput = N x global batch / total. The result keeps the last phase's breakdown and names every phase in `phases`
and `sync.hybrid`. A failure state's scenario is the healthy one modified (failures/step_time.py); its degraded
links are set here through the network's capacity API.
"""
from __future__ import annotations

import math
from dataclasses import replace
from functools import partial

from simdist.engine.context_cache import run_context, shared_topology
from simdist.engine.training import run_steady
import simdist.failures.costs as failure_costs  # lazy (simdist.LAZY_MODULES), as the ones below: timelines only
import simdist.failures.equivalence as equivalence
import simdist.failures.montecarlo as montecarlo
import simdist.failures.state as failure_state
import simdist.failures.step_time as step_times
import simdist.failures.targets as failure_targets
from simdist.progress import Progress
from simdist.results.records import FailureModel, PhaseRow, PhasesSummary, RunResult, StepRecord, Throughput
from simdist.scenario import BatchSplit, Fidelity, Scenario, SyncMode
from simdist.strategies.plan import data_parallel_degree, resolve_batch
from simdist.strategies.phases import is_phased, phases, switch_iteration


def run_training(scenario: Scenario, fidelity: Fidelity, with_baseline: bool = True, context=None) -> RunResult:
    """A training workload without a failure timeline: its phases combined (hybrid, dynamic split) or one
    steady run (`context`: an already built FabricContext of the same cluster, reused by that run)."""
    if is_phased(scenario):
        return run_phased(scenario, fidelity, with_baseline)
    return run_steady(scenario, fidelity, with_baseline, context)


def _label(s: Scenario) -> str:
    return f"{s.training.sync.value}, split {s.training.batch_split.value}"


def run_phased(scenario: Scenario, fidelity: Fidelity, with_baseline: bool = True) -> RunResult:
    """The iteration-weighted combination of the steady runs of every phase (module docstring)."""
    assert scenario.run.duration_s is None, "io.rules_training: phases are counted in run.iterations"
    parts = phases(scenario)
    results = {}
    for _, _, s in parts:
        if s.training not in results:
            results[s.training] = run_steady(s, fidelity, with_baseline=with_baseline)
    n = scenario.run.iterations
    total = math.fsum(count * results[s.training].iteration_time_s for _, count, s in parts)
    last = results[parts[-1][2].training]
    iteration_s = total / n
    samples = last.throughput.samples_per_s * last.iteration_time_s / iteration_s
    tokens = (last.throughput.tokens_per_s * last.iteration_time_s / iteration_s
              if last.throughput.tokens_per_s else None)
    rows = tuple(PhaseRow(phase=_label(s), first_iteration=first, iterations=count, sync=s.training.sync.value,
                          batch_split=s.training.batch_split.value,
                          iteration_time_s=results[s.training].iteration_time_s,
                          samples_per_s=results[s.training].throughput.samples_per_s,
                          time_s=count * results[s.training].iteration_time_s) for first, count, s in parts)
    t = scenario.training
    hybrid = t.sync is SyncMode.HYBRID
    s_it = switch_iteration(scenario) if hybrid else None
    summary = PhasesSummary(iterations=n, time_s=total, iteration_time_s=iteration_s, samples_per_s=samples,
                            phases=rows, switch_iteration=s_it, switch_fraction=s_it / n if hybrid else None,
                            rebalance_every=t.rebalance_every if t.batch_split is BatchSplit.DYNAMIC else None)
    sync = replace(last.sync, mode="hybrid", hybrid=summary) if hybrid else last.sync
    extra = {**last.extra,
             "simulated_iterations": sum(r.extra.get("simulated_iterations", 0) for r in results.values())}
    strategy = last.strategy and replace(last.strategy, batch_split=t.batch_split.value)
    times = tuple(x for _, count, s in parts for x in (results[s.training].iteration_time_s,) * count)
    return replace(last, iteration_time_s=iteration_s, throughput=Throughput(samples_per_s=samples, tokens_per_s=tokens),
                   scaling_efficiency=last.scaling_efficiency * last.iteration_time_s / iteration_s,
                   strategy=strategy, sync=sync, extra=extra, phases=summary, iterations=times)


def state_step_time(scenario: Scenario, fidelity: Fidelity, job: failure_state.JobSpec) -> step_times.StateStepTime:
    """The failure states' step times (failures.step_time), each state's steady scenario run here at `fidelity`."""
    return step_times.StateStepTime(scenario, job, partial(_state_iteration_s, fidelity=fidelity))


def _state_iteration_s(scenario: Scenario, links, fidelity: Fidelity) -> float:
    """A failure state's iteration time: its steady run, on a cluster with `links` changed where it has any."""
    return _with_links(scenario, fidelity, links) if links else \
        float(run_training(scenario, fidelity, with_baseline=False).iteration_time_s)


def _with_links(scenario: Scenario, fidelity: Fidelity, links) -> float:
    """BSP iteration time with some links at a fraction of their capacity or dead (factor 0: `fail_link`, the
    flow network routes around it): the training run on a cluster built here, with those capacities set
    before it starts. A fabric that no longer connects every rank raises InfeasibleError naming the link."""
    assert scenario.training.sync == SyncMode.BSP, "io.rules: link changes run with bsp"
    ctx = run_context(scenario, fidelity)
    index = ctx.topology.links.index
    for u, v, factor in links:
        if factor == 0.0:
            if (u, v) in index:
                ctx.network.fail_link(index[(u, v)])
            continue
        for a, b in ((u, v), (v, u)):
            if (a, b) in index:  # a link of a removed node carries nothing any more
                i = index[(a, b)]
                ctx.network.set_link_capacity(i, ctx.topology.links.capacity_Bps[i] * factor)
    return run_training(scenario, fidelity, with_baseline=False, context=ctx).iteration_time_s


def healthy_scenario(scenario: Scenario) -> Scenario:
    """The scenario without its failures: the reference the goodput ratio is measured against (a dynamic
    split balanced for no straggler)."""
    t = scenario.training
    if t.batch_split is BatchSplit.DYNAMIC:
        t = replace(t, split_slowdowns=(1.0,) * scenario.cluster.num_gpus)
    return replace(scenario, failures=None, training=t, run=replace(scenario.run, duration_s=None, replicas=1))


def run_goodput(scenario: Scenario, fidelity: Fidelity, group_states: bool = True) -> RunResult:
    """The healthy run's RunResult with `goodput` filled from `run.replicas` timelines over `run.duration`.
    `group_states` answers link states that provably cannot change the step time with one simulation
    (failures.equivalence); False simulates every distinct state (the reference the tests compare with)."""
    assert scenario.workload.model is not None and scenario.training.sync != SyncMode.HYBRID, "io.rules"
    assert scenario.run.duration_s is not None, "io.rules: a failure run needs run.duration"
    healthy = healthy_scenario(scenario)
    ctx = run_context(healthy, fidelity)
    base = run_training(healthy, fidelity, context=ctx)
    facts = failure_targets.failure_targets(shared_topology(scenario.cluster))
    dp = data_parallel_degree(scenario)  # tp x pp GPUs hold one replica: the batch splits over dp replicas
    bpg = resolve_batch(scenario, dp)
    k, bsp = scenario.training.grad_accumulation, scenario.training.sync == SyncMode.BSP
    job = failure_costs.job_spec(scenario, scenario.run.duration_s, bpg * dp * k, bpg, k, facts,
                                 scenario.cluster.num_gpus // dp)
    step_time = state_step_time(scenario, fidelity, job)
    if group_states and bsp:
        step_time.equivalence = equivalence.DeadLinkEquivalence(ctx.topology, ctx.schedules_run())
    balanced = () if job.rebalance_every else None
    states = [failure_state.ClusterState(keep_global_batch=keep, balanced_for=balanced) for keep in (True, False)]
    for state in states:  # the healthy state, the first keeping the global batch, is the run just made
        step_time.cache[step_time.key(state)] = float(base.iteration_time_s)
    costs = failure_costs.recovery_costs(scenario)
    bar = Progress(scenario.run.replicas, label="replicas")

    def states_note() -> None:
        bar.note = f"{step_time.simulated} cluster states simulated"
        bar.advance(0)  # redraw (throttled) with the new count

    def replica_done(_: int) -> None:
        states_note()
        bar.advance()

    step_time.on_simulated = states_note

    try:
        goodput, tallies = montecarlo.run_replicas(job, scenario.failures, facts, costs, step_time, scenario.run.seed,
                                                   scenario.run.replicas, reroute=bsp, on_replica=replica_done)
    finally:
        bar.close()
    goodput = replace(goodput, model=montecarlo.model_summary(scenario.failures, facts, costs, bsp),
                      healthy_iteration_time_s=step_time(states[0]), states_simulated=step_time.simulated,
                      states_grouped=step_time.grouped, unrunnable_states=step_time.unrunnable)
    job_track = tuple(StepRecord("job (replica 0)", what, start, end) for what, start, end in tallies[0].segments)
    return replace(base, goodput=goodput, records=base.records + job_track)


def failure_model(scenario: Scenario) -> FailureModel:
    """The analytical figures of a failure scenario without simulating it (job MTBF between interruptions,
    Young/Daly interval, closed form): what a sweep plot marks."""
    assert scenario.failures is not None, "the failure model of a scenario with failures"
    facts = failure_targets.failure_targets(shared_topology(scenario.cluster))
    return montecarlo.model_summary(scenario.failures, facts, failure_costs.recovery_costs(scenario),
                                    scenario.training.sync == SyncMode.BSP)
