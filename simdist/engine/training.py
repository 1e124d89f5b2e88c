"""A training workload end to end: memory check, plan, graphs, the executor (or their fold), RunResult.

scenario -> `strategies.plan.build_plan` (rank classes, buckets) -> a graph builder per sync mode
(`strategies.data_parallel`, `local_sgd`, `async_ps`) -> `engine.executor.Executor` on the flow
network (`simulate`) or `engine.closed_form.fold` on the analytical one (`estimate`, lockstep modes)
-> `engine.outcomes` -> RunResult.
"""
from __future__ import annotations

import math
import statistics

from dataclasses import replace

from simdist.compression import make_codec
from simdist.compute import comm_slowdown
from simdist.engine.closed_form import fold
from simdist.engine.executor import MAX_TRACKED_RANKS, Executor
from simdist.engine.mp_training import run_model_parallel
from simdist.engine.outcomes import (Outcome, breakdown, link_records, node_groups, run_mfu, servers_row,
                                     sharded_payload_bytes, strategy_summary, sync_common, throughput, top_links)
from simdist.engine.state import Simulation, result_header
from simdist.input_pipeline import loader_bound
from simdist.memory import check_fits, estimate_memory
from simdist.network.analytical import AnalyticalNetwork
from simdist.results.records import MemoryUsage, RunResult
from simdist.scenario import CompressionMethod, CompressionSpec, Fidelity, Scenario, StrategyKind, SyncMode
from simdist.strategies.async_ps import PsExchange, PsPolicy, worker_graphs
from simdist.strategies.data_parallel import bsp_graphs
from simdist.strategies.local_sgd import local_compute_s, round_graphs
from simdist.strategies.mp_plan import is_model_parallel
from simdist.strategies.plan import DTYPE_BYTES, IterationPlan, build_plan, data_parallel_degree, rank_batches, rank_groups
from simdist.strategies.sharded_dp import build_sharded_plan, sharded_graphs, sharded_memory
from simdist.strategies.sync_report import ps_bytes_per_exchange, staleness_stats, worker_iteration_s
from simdist.topology.summary import link_assumptions


def check_memory(scenario: Scenario) -> MemoryUsage:
    """Per-GPU memory of the tightest node group at its own batch; raises InfeasibleError when one does not fit."""
    worst = None
    for _, est in _estimates(scenario):
        check_fits(est)
        if worst is None or est.total_bytes / est.capacity_bytes > worst.total_bytes / worst.capacity_bytes:
            worst = est
    assert worst is not None
    return MemoryUsage(per_gpu_bytes=worst.total_bytes, fits=worst.fits, capacity_bytes=worst.capacity_bytes,
                       parts_bytes=dict(worst.parts_bytes))


def memory_by_group(scenario: Scenario) -> dict:
    """{node group: MemoryEstimate at the group's largest batch}, refusing none (the text report shows each
    group of a mixed cluster; check_memory refuses)."""
    out: dict = {}
    for g, est in _estimates(scenario):
        if g not in out or est.total_bytes > out[g].total_bytes:
            out[g] = est
    return out


def _estimates(scenario: Scenario) -> list:
    """(node group, MemoryEstimate) for every (group, batch) the ranks run, in that order: DDP's model states
    and bucket copy (codecs add error-feedback state), or ZeRO / FSDP's sharded states (sharded_dp)."""
    model, w, t = scenario.workload.model, scenario.workload, scenario.training
    assert model is not None
    dp = data_parallel_degree(scenario)
    pairs = sorted(set(zip(rank_groups(scenario), rank_batches(scenario, dp))))
    if t.parallelism.zero:
        return [(g, sharded_memory(model, scenario.cluster.node_groups[g].gpu, batch, w.precision.value,
                                   t.optimizer.value, w.grad_dtype.value, t.parallelism.zero, dp, t.recompute,
                                   scenario.communication.bucket_size_bytes, t.recompute_every)) for g, batch in pairs]
    grad_bytes = DTYPE_BYTES[w.grad_dtype]
    shapes = [s for _, s in model.gradients_backward_order()]
    codec = make_codec(scenario.communication.compression)
    # DDP keeps its gradient buckets as a flat copy of every gradient; codecs add error-feedback state
    buffers = model.params * grad_bytes + codec.error_feedback_bytes(shapes, grad_bytes, dp)
    return [(g, estimate_memory(model, scenario.cluster.node_groups[g].gpu, batch, w.precision.value,
                                t.optimizer.value, grad_dtype=w.grad_dtype.value, dp=dp, extra_buffer_bytes=buffers))
            for g, batch in pairs]


def run_steady(scenario: Scenario, fidelity: Fidelity, with_baseline: bool = True, context=None) -> RunResult:
    """Simulate or estimate a steady training workload in its sync mode (phased runs: engine/composite.py).

    `with_baseline` also gives `relative_time_to_target` against BSP without compression (folded in
    closed form from the same cluster, never a second simulation); compare.py turns it off.
    `context`: an already built FabricContext of the same cluster and strategy, reused by `estimate`
    (a sweep builds the topology and routes once).
    """
    if is_model_parallel(scenario):  # tensor / pipeline parallel: its own plan, graphs and result assembly
        return run_model_parallel(scenario, fidelity, context)
    memory = check_memory(scenario)
    plan = build_plan(scenario)
    sim = Simulation(scenario, fidelity, context)
    sync = scenario.training.sync
    sharded = None
    if scenario.training.parallelism.zero:  # ZeRO / FSDP: its own graphs (strategies.sharded_dp)
        sharded = build_sharded_plan(scenario, plan)
        plan = sharded.plan
        out = _run_lockstep(sim, plan, None, sharded_graphs(sharded))
    elif sync in (SyncMode.ASP, SyncMode.SSP):
        out = _run_async(sim, plan)
    else:
        out = _run_lockstep(sim, plan, scenario.training.local_steps if sync == SyncMode.LOCAL_SGD else None)
    loader, gpu_out = None, out  # the breakdown stays the GPUs' (an input wait is not exposed communication)
    if scenario.workload.input_pipeline is not None:  # the host data loader bounds the step (simdist.input_pipeline)
        out, loader = _input_bound(scenario, plan, out)
    tp = throughput(plan, out.iteration_s)
    extra = {"strategy": strategy_summary(scenario, plan, sharded),
             "links_used": link_assumptions(scenario.cluster),
             "compute_interference": {g.gpu.key: dict(g.gpu.comm_interference) for g in scenario.cluster.node_groups},
             "simulated_iterations": out.simulated,
             "inferred_iterations": out.inferred,
             "sync": out.sync,
             "node_groups": node_groups(scenario, plan, out),
             "statistical_efficiency": statistical_efficiency(sim.context, plan, tp.samples_per_s, with_baseline),
             "mfu": run_mfu(scenario, tp.samples_per_s)}
    if loader is not None:
        extra["input_pipeline"] = loader.to_dict(scenario.workload.input_pipeline)
    if scenario.workload.single_gpu_throughput is not None:
        extra["single_gpu_throughput"] = {"measured_samples_per_s": scenario.workload.single_gpu_throughput,
                                          "batch_per_gpu": scenario.workload.batch_per_gpu}
    if sharded is not None:
        out.sync["wire_bytes_per_iteration"] = sharded_payload_bytes(sharded)
    return RunResult(**result_header(scenario, fidelity), iteration_time_s=out.iteration_s, throughput=tp,
                     scaling_efficiency=(plan.global_batch / out.iteration_s) / plan.single_gpu_samples_per_s,
                     breakdown_s=breakdown(gpu_out, sharded is not None), memory=memory, links=out.links, extra=extra,
                     iterations=out.times, records=out.records)


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
    floor = bound.loader_s
    return replace(out, iteration_s=floor, times=tuple(max(t, floor) for t in out.times)), bound


def interference_of(scenario: Scenario, graphs):
    """Compute-communication interference of these graphs' rank classes (None: none), from the GPU catalog
    or a calibration profile (simdist.compute.comm_slowdown). A parameter-server exchange is none: its
    pushes and pulls are point-to-point copies (NIC DMA, copy engines) with the reduction on the servers,
    not reduction kernels on the worker GPU (and so BSP and SSP with bound 0 stay equal)."""
    if scenario.communication.strategy == StrategyKind.PS:
        return None

    return comm_slowdown([g.gpu for g in scenario.cluster.node_groups], [gr.rank_class for gr in graphs])


def collective_schedules(ctx):
    """`schedule_of(task, graph)` for collectives, cached on the context by (op, size, server delay)."""
    return lambda task, graph: ctx.cached_schedule(task.op, task.size_bytes, task.server_delay_s)


def lockstep_graphs(plan: IterationPlan, local_steps: int | None):
    """BSP graphs (`local_steps` None) or local-SGD rounds of `local_steps` local iterations."""
    return bsp_graphs(plan) if local_steps is None else round_graphs(plan, local_steps)


def _run_lockstep(sim, plan: IterationPlan, local_steps: int | None, graphs=None) -> Outcome:
    """BSP (`local_steps` None) or local SGD (a round of `local_steps` local steps per executor iteration);
    `graphs`: BSP graphs built elsewhere (ZeRO / FSDP) instead of DDP's."""
    scenario, ctx, run = sim.scenario, sim.context, sim.scenario.run
    graphs = lockstep_graphs(plan, local_steps) if graphs is None else graphs
    period = 1 if local_steps is None else local_steps
    bsp = local_steps is None
    schedule_of = collective_schedules(ctx)
    groups = ctx.process_groups()
    critical = plan.slowest.rank_class.index
    simulated = sim.fidelity == Fidelity.SIMULATE
    links, records = (), ()
    slowdown = interference_of(scenario, graphs)
    if not simulated:
        folded = fold(graphs, lambda t, g: ctx.collective_time(t.op, t.size_bytes, t.server_delay_s), groups,
                      slowdown)
        round_s, comm_round = folded.end_s, folded.class_comm_busy_s[critical]
        periods = {c: folded.end_s for c in folded.class_end_s}
        busy = dict(folded.class_compute_busy_s)
        total = run.iterations
        if run.duration_s is not None:
            total = max(1, math.ceil(run.duration_s / round_s - 1e-9)) * period if round_s > 0 else period
        total = max(total, period)
        n_sim, n_inf = period, total - period
        times = (round_s / period,) * total
        iteration_s = round_s / period
        comm = comm_round / period
    else:
        ex = Executor(sim.env, ctx.network, schedule_of, groups, critical_class=critical, slowdown=slowdown)
        rounds = run.iterations if bsp else max(2, -(-run.iterations // period))
        log = ex.run(graphs, None if run.duration_s is not None else rounds, run.duration_s)
        busy_log = log.class_comm_busy_s[critical]
        if bsp:
            steady = log.times[run.warmup:] or log.times[-1:]
            iteration_s = statistics.fmean(steady)
            comm = statistics.fmean(busy_log[run.warmup:] or busy_log[-1:])
            times = tuple(log.times)
        else:
            iteration_s, comm = log.times[-1] / period, busy_log[-1] / period
            times = (iteration_s,) * (len(log.times) * period if run.duration_s is not None
                                      else max(1, run.iterations))
        n_sim, n_inf = log.simulated * period, log.inferred * period
        periods = {c: iteration_s * period for c in log.class_end_s}
        busy = {c: statistics.fmean(v[run.warmup:] or v[-1:]) if bsp else v[-1]
                for c, v in log.class_compute_busy_s.items()}
        links = top_links(ctx)
        records = tuple(log.records) + link_records(ctx, links)
    per_exchange = ps_bytes_per_exchange(plan, ctx.group.ranks, ctx.servers,
                                         len(ctx.group.nodes[0]) if scenario.communication.ps_aggregation == "node" else 1)
    rate = {sv: b / (iteration_s * period) for sv, b in per_exchange.items()}
    batches = _rank_samples(plan)
    sync = sync_common(scenario, plan, [b / iteration_s for b in batches], period)
    sync["staleness"] = {"mean": 0.0, "max": 0}
    sync["servers"] = servers_row(scenario, ctx, rate, rate, 1.0, simulated)
    codec = _codec_s(plan) / period
    if bsp:
        compute, optimizer = plan.compute_s, plan.optimizer_s
    else:
        optimizer = max(c.local_optimizer_s for c in plan.classes)
        compute = local_compute_s(plan, period) / period - optimizer
    return Outcome(iteration_s, comm, compute, optimizer, codec, times, n_sim, n_inf, sync, records, links,
                   {c: p / period for c, p in periods.items()}, {c: b / period for c, b in busy.items()})


def _rank_samples(plan: IterationPlan) -> list[float]:
    return plan.rank_samples()


def _codec_s(plan: IterationPlan) -> float:
    c = plan.slowest
    return sum(c.encode_s) + sum(c.decode_s)


class TimedOnly:
    """A network model's closed-form times as simpy timeouts, without accounting link bytes: `estimate` of
    the asynchronous modes times every push/pull as all workers' at once, so those bytes are not real."""

    def __init__(self, network) -> None:
        self.network = network

    def schedule_time(self, schedule) -> float:
        return self.network.schedule_time(schedule)

    def run(self, env, schedule):
        yield env.timeout(self.network.schedule_time(schedule))

    def link_utilization(self, elapsed_s: float) -> dict[str, float]:
        return {}


def _run_async(sim, plan: IterationPlan) -> Outcome:
    scenario, ctx = sim.scenario, sim.context
    t, run = scenario.training, scenario.run
    bound = t.staleness if t.sync == SyncMode.SSP else None
    simulated = sim.fidelity == Fidelity.SIMULATE
    exchange = PsExchange(ctx.group.ranks, contended=not simulated)
    graphs = worker_graphs(plan, ctx.group.ranks, ctx.servers, grouped=not simulated)
    sizes = [len(g.rank_class.ranks) for g in graphs]
    policy = PsPolicy(sim.env, sizes, bound)
    recorded = {g.rank_class.index for g in graphs
                if g.rank_class.ranks[0] < MAX_TRACKED_RANKS or g.rank_class.slowdown != 1}
    network = ctx.network if simulated else TimedOnly(ctx.network)
    ex = Executor(sim.env, network, lambda task, g: exchange.of(task), ctx.process_groups(), policy,
                  record_classes=recorded)
    log = ex.run(graphs, None if run.duration_s is not None else run.iterations, run.duration_s, barrier=False)
    n = plan.dp
    per_class = [worker_iteration_s(log.class_end_s[g.rank_class.index], run.warmup) for g in graphs]
    per_iter = [0.0] * n
    for g, x in zip(graphs, per_class):
        for r in g.rank_class.ranks:
            per_iter[r] = x
    samples = _rank_samples(plan)
    rates = [s / x for s, x in zip(samples, per_iter)]
    aggregate = sum(rates)
    iteration_s = plan.global_batch / aggregate
    sync = sync_common(scenario, plan, rates, 1)
    sync["aggregate_samples_per_s"] = aggregate
    sync["staleness"] = staleness_stats(policy.staleness)
    if bound is not None:
        sync["staleness_bound"] = bound
    sync["servers"] = servers_row(scenario, ctx, policy.server_in_bytes, policy.server_out_bytes, float(sim.env.now),
                                  simulated)
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
    return Outcome(iteration_s, comm_busy, compute, plan.optimizer_s, _codec_s(plan), tuple(per_iter),
                   log.simulated, 0, sync, records, top_links(ctx) if simulated else (),
                   {i: p for i, p in enumerate(per_iter)}, busy, async_classes=True)


def is_baseline(scenario: Scenario) -> bool:
    return scenario.training.sync == SyncMode.BSP and scenario.communication.compression.method == CompressionMethod.NONE


def baseline_scenario(scenario: Scenario) -> Scenario:
    """The same cluster, model and strategy under BSP without compression (the convergence reference)."""
    return replace(scenario,
                   training=replace(scenario.training, sync=SyncMode.BSP, convergence_factor=1.0),
                   communication=replace(scenario.communication, compression=CompressionSpec()))


def baseline_samples_per_s(ctx, scenario: Scenario) -> float:
    """Throughput of the uncompressed BSP baseline, folded in closed form on the run's own topology
    (an analytical network over the same routes; no second simulation)."""
    base = baseline_scenario(scenario)
    plan = build_plan(base)
    if isinstance(ctx.network, AnalyticalNetwork):
        def time_of(task, graph):
            return ctx.collective_time(task.op, task.size_bytes, task.server_delay_s)
    else:
        network, cache = AnalyticalNetwork(ctx.topology), {}

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
