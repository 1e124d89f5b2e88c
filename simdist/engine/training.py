"""A training run end to end, whatever its parallelism: plan, run, outcome, RunResult.

scenario -> `engine.plans.build` (memory, rank classes, graphs, process groups) -> the executor on the flow
network (`simulate`) or the fold of the graphs on closed-form times (`estimate`), with asp / ssp workers
looping on their own under their sync policy -> `engine.outcomes` -> RunResult.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

from simdist.engine.closed_form import ClosedFormTimes, fold, fold_pipeline
from simdist.engine.executor import MAX_TRACKED_RANKS, Executor, same_time
from simdist.engine.outcomes import Outcome, breakdown, link_records, model_parallel_result, top_links
from simdist.engine.plans import Plan, build
from simdist.engine.state import Simulation, result_header
from simdist.graph.spans import network_calls, run_records
from simdist.input_pipeline import loader_bound
import simdist.network.replay as call_replay  # lazy (simdist.LAZY_MODULES): model-parallel simulate only
from simdist.network.analytical import AnalyticalNetwork
from simdist.results.records import RunResult, StepRecord
from simdist.results.summaries import node_groups, run_mfu, strategy_summary, throughput
from simdist.scenario import Fidelity, Scenario, SyncMode
from simdist.strategies.async_ps import PsPolicy
from simdist.strategies.baseline import baseline_scenario, is_baseline
from simdist.strategies.data_parallel import bsp_graphs
from simdist.strategies.interference import interference_of
from simdist.strategies.local_sgd import local_compute_s
from simdist.strategies.plan import IterationPlan, build_plan
from simdist.strategies.sync_report import (ps_bytes_per_exchange, servers_row, staleness_stats, sync_summary,
                                           worker_iteration_s)
from simdist.topology.summary import link_assumptions


def run_steady(scenario: Scenario, fidelity: Fidelity, with_baseline: bool = True, context=None) -> RunResult:
    """Simulate or estimate a steady training run (phased runs: engine/composite.py).

    `with_baseline` also gives `relative_time_to_target` against BSP without compression (folded in closed form from
    the same cluster, never a second simulation); compare.py turns it off. `context`: an already built FabricContext
    of the same cluster and strategy, reused by `estimate` (a sweep builds the topology and routes once).
    """
    plan, sim = build(scenario, fidelity, context)
    if plan.model_parallel:
        return model_parallel_result(scenario, fidelity, plan, run_lockstep(sim, plan))
    out = _run_async(sim, plan) if plan.asynchronous else _lockstep_outcome(sim, plan, run_lockstep(sim, plan))
    layout, loader, gpu_out = plan.layout, None, out  # the breakdown stays the GPUs' (an input wait is not exposed)
    if scenario.workload.input_pipeline is not None:  # the host data loader bounds the step (simdist.input_pipeline)
        out, loader = _input_bound(scenario, layout, out)
    tp = throughput(layout, out.iteration_s)
    extra = {"links_used": link_assumptions(scenario.cluster),
             "compute_interference": {g.gpu.key: dict(g.gpu.comm_interference) for g in scenario.cluster.node_groups},
             "simulated_iterations": out.simulated, "inferred_iterations": out.inferred,
             "statistical_efficiency": statistical_efficiency(sim.context, layout, tp.samples_per_s, with_baseline),
             "mfu": run_mfu(scenario, tp.samples_per_s)}
    if loader is not None:
        extra["input_pipeline"] = loader.to_dict(scenario.workload.input_pipeline)
    if scenario.workload.single_gpu_throughput is not None:
        extra["single_gpu_throughput"] = {"measured_samples_per_s": scenario.workload.single_gpu_throughput,
                                          "batch_per_gpu": scenario.workload.batch_per_gpu}
    sync = out.sync
    if plan.sharded is not None:
        sync = replace(sync, wire_bytes_per_iteration=plan.sharded.payload_bytes())
    return RunResult(**result_header(scenario, fidelity), iteration_time_s=out.iteration_s, throughput=tp,
                     scaling_efficiency=(layout.global_batch / out.iteration_s) / layout.single_gpu_samples_per_s,
                     breakdown_s=breakdown(gpu_out, plan.sharded is not None), memory=plan.memory, links=out.links,
                     strategy=strategy_summary(scenario, layout, plan.sharded), node_groups=node_groups(scenario, layout, out),
                     sync=sync,
                     extra=extra, iterations=out.times, records=out.records)


@dataclass(frozen=True)
class Ran:
    """What a lockstep run measured: the steady iteration, every iteration's time, how many were simulated
    and inferred, the critical class's communication per iteration, per class its round (executor iteration)
    time and compute-stream busy time per round, the last round's task spans, links and trace records."""

    iteration_s: float
    times: tuple[float, ...]
    simulated: int
    inferred: int
    comm_s: float
    class_round_s: dict[int, float]
    class_compute_round_s: dict[int, float]
    spans: dict[int, dict[int, tuple[float, float]]]
    links: tuple = ()
    records: tuple[StepRecord, ...] = ()
    tables: tuple = ()  # estimate of a pipeline: per stage graph its spans (graph/spans.SpanTable), not `spans`
    method: str = "executor"  # how it was timed: "fold" (estimate), "fold_replayed", "partly_alone" or "executor"


def run_lockstep(sim: Simulation, plan: Plan) -> Ran:
    """The one estimate / simulate branch: the plan's graphs folded on closed-form times (`estimate`: one
    round, the rest repeat it) or run on the executor over the flow network (`simulate`: run.iterations, or
    run.duration, of which steady repeats are inferred; `_model_parallel`). A local-SGD round is `plan.period`."""
    if sim.fidelity != Fidelity.SIMULATE:
        if plan.graphs_for is not None:
            folded = fold_pipeline(plan.graphs_for, plan.layout, plan.time_of, plan.groups, plan.slowdown)
        else:
            folded = fold(list(plan.graphs), plan.time_of, plan.groups, plan.slowdown)
        return _folded_run(folded, plan, sim.scenario.run)
    if plan.model_parallel and hasattr(sim.context.network, "replayed"):
        return _model_parallel(sim, plan)
    return _with_links(sim.context, execute(sim, plan))


def _folded_run(folded, plan: Plan, run, simulated: int | None = None, records=(), how="fold") -> Ran:
    """A folded round as run.iterations (or run.duration's) iterations, `simulated` computed, the rest repeats."""
    k, round_s = plan.period, folded.end_s
    total = run.iterations if run.duration_s is None else (
        max(1, math.ceil(run.duration_s / round_s - 1e-9)) * k if round_s > 0 else k)
    total, simulated = max(total, k), k if simulated is None else simulated
    return Ran(round_s / k, (round_s / k,) * total, simulated, total - simulated,
               folded.class_comm_busy_s[plan.critical_class] / k, {c: round_s for c in folded.class_end_s},
               dict(folded.class_compute_busy_s), folded.spans, (), records, folded.tables, how)


def _model_parallel(sim: Simulation, plan: Plan) -> Ran:
    """`simulate` of a model-parallel plan. The fold times every call alone; schedules whose calls could contend
    (network/replay.contended) run on the flow network, the others in their time alone, replayed onto its records
    once the run confirms none of those shared a link in flight (else all run on a fresh cluster's flow network).
    With none contending, the fold's iteration is the simulated one, the others repeat it (idle fabric between)."""
    ctx, graphs = sim.context, list(plan.graphs)
    calls = lambda spans: [(plan.schedule_of(t, g), s, e) for t, g, s, e in network_calls(graphs, spans)]  # noqa
    folded = fold(graphs, plan.time_of, plan.groups, plan.slowdown)
    schedules, got, flows = call_replay.contended(ctx.network, calls(folded.spans), tol := 1e-9 * folded.end_s)
    if not flows and folded.end_s > 0:
        got.replay(schedules, set(range(len(schedules.alone)))).onto(ctx.network)
        sim.env.run(until=folded.end_s)
        records = run_records(graphs, folded.spans, plan.max_tracked)
        return _with_links(ctx, _folded_run(folded, plan, sim.scenario.run, 1, tuple(records), "fold_replayed"))
    partly, some_alone = call_replay.PartlyAlone(ctx.network, schedules, flows), len(flows) < len(schedules.alone)
    ran = execute(sim, plan, partly if some_alone else None)  # all contend: the plain network
    steady = all(same_time(t, ran.times[0]) for t in ran.times[:ran.simulated])
    offsets = [-sum(ran.times[i + 1:ran.simulated]) for i in range(ran.simulated)]  # iteration i against the last
    replay = partly.confirmed(calls(ran.spans), offsets, tol) if steady else None
    if replay is None:
        fresh_plan, fresh = build(sim.scenario, Fidelity.SIMULATE)
        return _with_links(fresh.context, execute(fresh, fresh_plan))
    replay.onto(ctx.network)
    return _with_links(ctx, replace(ran, method="partly_alone" if some_alone else "executor"))


def _with_links(ctx, ran: Ran) -> Ran:
    """The run's busiest links and their busy spans in the trace."""
    links = top_links(ctx)
    return replace(ran, links=links, records=tuple(ran.records) + link_records(ctx, links))


def execute(sim: Simulation, plan: Plan, network=None) -> Ran:
    """`simulate` on the executor over the flow network (or `network`, a model over it: replay.PartlyAlone)."""
    run, ctx, k, bsp = sim.scenario.run, sim.context, plan.period, plan.local_steps is None
    ex = Executor(sim.env, network or ctx.network, plan.schedule_of, plan.groups, critical_class=plan.critical_class,
                  max_tracked=plan.max_tracked, slowdown=plan.slowdown)
    rounds = run.iterations if bsp else max(2, -(-run.iterations // k))
    log = ex.run(list(plan.graphs), None if run.duration_s is not None else rounds, run.duration_s)
    busy_log = log.class_comm_busy_s[plan.critical_class]
    if bsp:
        iteration_s = statistics.fmean(log.times[run.warmup:] or log.times[-1:])
        comm = statistics.fmean(busy_log[run.warmup:] or busy_log[-1:])
        times = tuple(log.times)
    else:
        iteration_s, comm = log.times[-1] / k, busy_log[-1] / k
        times = (iteration_s,) * (len(log.times) * k if run.duration_s is not None else max(1, run.iterations))
    busy = {c: statistics.fmean(v[run.warmup:] or v[-1:]) if bsp else v[-1] for c, v in log.class_compute_busy_s.items()}
    return Ran(iteration_s, times, log.simulated * k, log.inferred * k, comm,
               {c: iteration_s * k for c in log.class_end_s}, busy, ex.last_spans, (), tuple(log.records))


def _lockstep_outcome(sim: Simulation, plan: Plan, ran: Ran) -> Outcome:
    """A data-parallel lockstep run (BSP, local SGD, ZeRO / FSDP) as the breakdown, sync and node groups read it."""
    scenario, ctx, layout, period = sim.scenario, sim.context, plan.layout, plan.period
    simulated = sim.fidelity == Fidelity.SIMULATE
    per_exchange = ps_bytes_per_exchange(layout, ctx.group.ranks, ctx.servers,
                                         len(ctx.group.nodes[0]) if scenario.communication.ps_aggregation == "node" else 1)
    rate = {sv: b / (ran.iteration_s * period) for sv, b in per_exchange.items()}
    sync = sync_summary(scenario, layout, [b / ran.iteration_s for b in layout.rank_samples()], period,
                        {"mean": 0.0, "max": 0}, servers_row(scenario, ctx, rate, rate, 1.0, simulated))
    if plan.local_steps is None:
        compute, optimizer = layout.compute_s, layout.optimizer_s
    else:
        optimizer = max(c.local_optimizer_s for c in layout.classes)
        compute = local_compute_s(layout, period) / period - optimizer
    return Outcome(iteration_s=ran.iteration_s, comm_busy_s=ran.comm_s, compute_s=compute, optimizer_s=optimizer,
                   compression_s=layout.codec_s / period, times=ran.times, simulated=ran.simulated,
                   inferred=ran.inferred, sync=sync, records=ran.records, links=ran.links,
                   class_period_s={c: p / period for c, p in ran.class_round_s.items()},
                   class_compute_s={c: b / period for c, b in ran.class_compute_round_s.items()},
                   grad_copy_s=max(math.fsum(c.grad_copy_s) for c in layout.classes) / period)


def _run_async(sim: Simulation, run_plan: Plan) -> Outcome:
    """asp / ssp: every worker (or, at estimate, every plan class) loops on its own under the sync policy; estimate
    times each push and pull in closed form as all workers' at once, so it accounts no link bytes."""
    scenario, ctx, plan, graphs = sim.scenario, sim.context, run_plan.layout, list(run_plan.graphs)
    t, run = scenario.training, scenario.run
    bound = t.staleness if t.sync == SyncMode.SSP else None
    simulated = sim.fidelity == Fidelity.SIMULATE
    sizes = [len(g.rank_class.ranks) for g in graphs]
    policy = PsPolicy(sim.env, sizes, bound)
    recorded = {g.rank_class.index for g in graphs
                if g.rank_class.ranks[0] < MAX_TRACKED_RANKS or g.rank_class.slowdown != 1}
    network, schedule_of = (ctx.network, run_plan.schedule_of) if simulated else \
        (ClosedFormTimes(run_plan.time_of), lambda task, graph: (task, graph))
    ex = Executor(sim.env, network, schedule_of, run_plan.groups, policy, record_classes=recorded)
    log = ex.run(graphs, None if run.duration_s is not None else run.iterations, run.duration_s, barrier=False)
    n = plan.dp
    per_class = [worker_iteration_s(log.class_end_s[g.rank_class.index], run.warmup) for g in graphs]
    per_iter = [0.0] * n
    for g, x in zip(graphs, per_class):
        for r in g.rank_class.ranks:
            per_iter[r] = x
    samples = plan.rank_samples()
    rates = [s / x for s, x in zip(samples, per_iter)]
    aggregate = sum(rates)
    iteration_s = plan.global_batch / aggregate
    servers = servers_row(scenario, ctx, policy.server_in_bytes, policy.server_out_bytes, float(sim.env.now),
                          simulated)
    sync = sync_summary(scenario, plan, rates, 1, staleness_stats(policy.staleness), servers,
                        aggregate_samples_per_s=aggregate, staleness_bound=bound)
    comm_busy = sum(m * statistics.fmean(log.class_comm_busy_s[g.rank_class.index][run.warmup:]
                                         or log.class_comm_busy_s[g.rank_class.index][-1:])
                    for m, g in zip(sizes, graphs)) / n
    by_rank = plan.class_of()
    compute = statistics.fmean(plan.micro_steps * plan.classes[by_rank[r]].step_s for r in range(n))
    busy = {}
    for g in graphs:
        v = log.class_compute_busy_s[g.rank_class.index]
        for r in g.rank_class.ranks:
            busy[r] = statistics.fmean(v[run.warmup:] or v[-1:])
    records = tuple(sorted(log.records, key=lambda r: (r.start_s, r.track)))
    return Outcome(iteration_s=iteration_s, comm_busy_s=comm_busy, compute_s=compute, optimizer_s=plan.optimizer_s,
                   compression_s=plan.codec_s, times=tuple(per_iter), simulated=log.simulated, inferred=0,
                   sync=sync, records=records, links=top_links(ctx) if simulated else (),
                   class_period_s=dict(enumerate(per_iter)), class_compute_s=busy, async_classes=True)


def _input_bound(scenario: Scenario, plan: IterationPlan, out: Outcome):
    """The step held to the slowest node's input pipeline: a prefetching loader overlaps the GPU entirely, so a
    step takes max(simulated step, samples per rank per step / the loader's rate); per-iteration times likewise."""
    groups = scenario.cluster.node_groups
    gpus = tuple((g.gpus_per_node, g.intra_node.key) for g in groups)  # CPU per node
    samples = tuple(max((c.rank_class.batch for c in plan.classes if c.rank_class.node_group == i), default=0)
                    * plan.micro_steps for i in range(len(groups)))  # each group's own batch (a split gives each its own)
    bound = loader_bound(scenario.workload.input_pipeline, gpus, samples, out.iteration_s)
    if not bound.bound:
        return out, bound
    return replace(out, iteration_s=bound.loader_s, times=tuple(max(t, bound.loader_s) for t in out.times)), bound


def baseline_samples_per_s(ctx, scenario: Scenario) -> float:
    """Throughput of the uncompressed BSP baseline, folded in closed form on the run's own topology
    (an analytical network over the same routes; no second simulation)."""
    base = baseline_scenario(scenario)
    plan = build_plan(base)
    if isinstance(ctx.network, AnalyticalNetwork):
        def time_of(task, graph):
            return ctx.collective_time(task.op, task.size_bytes, task.server_delay_s)
    else:
        network, cache = ctx.analytical(), {}

        def time_of(task, graph):
            key = (task.op, task.size_bytes, task.server_delay_s)
            if key not in cache:
                cache[key] = network.schedule_time(ctx.cached_schedule(*key))
            return cache[key]
    graphs = bsp_graphs(plan)
    folded = fold(graphs, time_of, ctx.process_groups(), interference_of(base, graphs))
    return plan.global_batch / folded.end_s


def statistical_efficiency(ctx, plan: IterationPlan, samples_per_s: float, with_baseline: bool) -> dict:
    """Throughput divided by the assumed convergence factor, and time-to-target relative to BSP uncompressed."""
    scenario = ctx.scenario
    cf = scenario.training.convergence_factor
    out = {"convergence_factor": cf, "effective_samples_per_s": samples_per_s / cf,
           "relative_time_to_target": None, "baseline": "bsp, no compression, same cluster and strategy",
           "assumed": True}
    if is_baseline(scenario):
        out["relative_time_to_target"] = cf
    elif with_baseline:
        out["relative_time_to_target"] = cf * baseline_samples_per_s(ctx, scenario) / samples_per_s
    return out
