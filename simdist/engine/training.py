"""A training workload end to end: memory check, iteration plan, the sync mode simulated or estimated, RunResult."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from simdist.engine.context import build_context
from simdist.topology.summary import link_assumptions
from simdist.results.records import Breakdown, LinkUtilization, MemoryUsage, RunResult, StepRecord, Throughput
from simdist.scenario import CompressionMethod, CompressionSpec, Fidelity, Scenario, StrategyKind, SyncMode
from simdist.strategies.plan import DTYPE_BYTES, IterationPlan, build_plan, check_supported, resolve_batch
from simdist.strategies.sync_report import (ps_bytes_per_exchange, server_load, staleness_stats,
                                            wire_bytes_per_iteration, worker_iteration_s)

TOP_LINKS = 10


def check_memory(scenario: Scenario) -> MemoryUsage:
    """Per-GPU memory of the tightest GPU kind; raises InfeasibleError when any kind does not fit."""
    from simdist.compression import make_codec
    from simdist.memory import check_fits, estimate_memory

    model = scenario.workload.model
    assert model is not None
    dp = check_supported(scenario)
    batch = resolve_batch(scenario, dp)
    grad_bytes = DTYPE_BYTES[scenario.workload.grad_dtype]
    shapes = [s for _, s in model.gradients_backward_order()]
    codec = make_codec(scenario.communication.compression)
    # DDP keeps its gradient buckets as a flat copy of every gradient; codecs add error-feedback state
    buffers = model.params * grad_bytes + codec.error_feedback_bytes(shapes, grad_bytes, dp)
    worst = None
    for group in scenario.cluster.node_groups:
        est = estimate_memory(model, group.gpu, batch, scenario.workload.precision.value,
                              scenario.training.optimizer.value, grad_dtype=scenario.workload.grad_dtype.value,
                              zero=scenario.training.parallelism.zero, dp=dp, extra_buffer_bytes=buffers)
        check_fits(est)
        if worst is None or est.total_bytes / est.capacity_bytes > worst.total_bytes / worst.capacity_bytes:
            worst = est
    assert worst is not None
    return MemoryUsage(per_gpu_bytes=worst.total_bytes, fits=worst.fits, capacity_bytes=worst.capacity_bytes,
                       parts_bytes=dict(worst.parts_bytes))


@dataclass
class _Outcome:
    """What one sync mode's run produced, before it becomes a RunResult."""

    iteration_s: float
    comm_busy_s: float
    compute_s: float
    optimizer_s: float
    compression_s: float
    times: tuple[float, ...]
    simulated: int
    sync: dict
    records: tuple = ()
    links: tuple[LinkUtilization, ...] = ()


def run_training(scenario: Scenario, fidelity: Fidelity, with_baseline: bool = True) -> RunResult:
    """Simulate or estimate a training workload in its sync mode.

    `with_baseline` also runs BSP without compression (same fidelity) for `relative_time_to_target`
    when the scenario is not that baseline itself; compare.py turns it off for speed.
    """
    from simdist.engine.simulation import result_header

    memory = check_memory(scenario)
    plan = build_plan(scenario)
    ctx = build_context(scenario, fidelity)
    cache: dict = {}

    def schedule_for(op, size, delay):
        key = (op, size, delay)
        if key not in cache:
            cache[key] = ctx.schedule(op, size, server_delay_s=delay)
        return cache[key]

    sync = scenario.training.sync
    if sync in (SyncMode.ASP, SyncMode.SSP):
        out = _run_async(scenario, fidelity, plan, ctx)
    elif sync == SyncMode.LOCAL_SGD:
        out = _run_local_sgd(scenario, fidelity, plan, ctx, schedule_for)
    else:
        out = _run_bsp(scenario, fidelity, plan, ctx, schedule_for)
    throughput = _throughput(plan, out.iteration_s)
    return RunResult(
        **result_header(scenario, fidelity),
        iteration_time_s=out.iteration_s,
        throughput=throughput,
        scaling_efficiency=(plan.global_batch / out.iteration_s) / plan.single_gpu_samples_per_s,
        breakdown_s=_breakdown(out),
        memory=memory,
        links=out.links,
        extra={"strategy": _strategy_summary(scenario, plan),
               "links_used": link_assumptions(scenario.cluster),
               "simulated_iterations": out.simulated,
               "sync": out.sync,
               "statistical_efficiency": _statistical_efficiency(scenario, fidelity, throughput.samples_per_s,
                                                                 with_baseline)},
        iterations=out.times,
        records=out.records,
    )


def _breakdown(out: _Outcome) -> Breakdown:
    """Per-iteration seconds as plain floats; exposed communication is what compute and the optimizer do not
    explain, capped at the communication time (the rest is codec time that overlap did not hide)."""
    communication = max(0.0, float(out.comm_busy_s) - float(out.compression_s))
    unexplained = max(0.0, float(out.iteration_s) - float(out.compute_s) - float(out.optimizer_s))
    return Breakdown(compute=float(out.compute_s), communication=communication,
                     exposed_communication=min(unexplained, communication),
                     compression=float(out.compression_s), optimizer=float(out.optimizer_s))


def _top_links(ctx) -> tuple[LinkUtilization, ...]:
    util = ctx.network.link_utilization(ctx.env.now) if ctx.env.now > 0 else {}
    top = sorted(util.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_LINKS]
    return tuple(LinkUtilization(name, round(u, 6)) for name, u in top if u > 0)


def _link_records(ctx, links: tuple[LinkUtilization, ...]) -> tuple[StepRecord, ...]:
    """Busy spans of the most utilised links, one trace track each."""
    spans = ctx.network.busy_spans([l.link for l in links]) if hasattr(ctx.network, "busy_spans") else {}
    return tuple(StepRecord(f"link:{name}", "busy", s, e) for name in sorted(spans) for s, e in spans[name])


def _servers(scenario, ctx, in_bytes, out_bytes, elapsed_s, simulated: bool) -> list[dict] | None:
    if scenario.communication.strategy != StrategyKind.PS:
        return None
    util = ctx.network.link_utilization(ctx.env.now) if simulated and ctx.env.now > 0 else None
    return server_load(ctx.topology, ctx.servers, in_bytes, out_bytes, elapsed_s, util)


def _run_bsp(scenario, fidelity, plan: IterationPlan, ctx, schedule_for) -> _Outcome:
    from simdist.strategies.data_parallel import run_closed_form, run_simulated

    run = scenario.run
    links: tuple[LinkUtilization, ...] = ()
    records = ()
    if fidelity == Fidelity.ESTIMATE:
        iteration_s, comm_busy = run_closed_form(plan, lambda op, size, d: ctx.network.schedule_time(schedule_for(op, size, d)))
        times = (iteration_s,)
        extrapolated = 0
    else:
        log = run_simulated(ctx.env, plan, run.iterations, schedule_for, ctx.network)
        steady = log.times[run.warmup:] or log.times[-1:]
        iteration_s = statistics.fmean(steady)
        comm_busy = statistics.fmean(log.comm_busy_s[run.warmup:] or log.comm_busy_s[-1:])
        times = tuple(log.times)
        extrapolated = log.extrapolated
        links = _top_links(ctx)
        records = tuple(log.records) + _link_records(ctx, links)
    per_exchange = ps_bytes_per_exchange(plan, ctx.group.ranks, ctx.servers,
                                         len(ctx.group.nodes[0]) if scenario.communication.ps_aggregation == "node" else 1)
    rate = {sv: b / iteration_s for sv, b in per_exchange.items()}
    sync = _sync_common(scenario, plan, [plan.batch_per_gpu * plan.micro_steps / iteration_s] * plan.dp, 1)
    sync["staleness"] = {"mean": 0.0, "max": 0}
    sync["servers"] = _servers(scenario, ctx, rate, rate, 1.0, fidelity == Fidelity.SIMULATE)
    return _Outcome(iteration_s, comm_busy, plan.compute_s, plan.optimizer_s, _codec_s(plan), times,
                    len(times) - extrapolated, sync, records, links)


def _run_async(scenario, fidelity, plan: IterationPlan, ctx) -> _Outcome:
    from simdist.strategies.async_ps import run_async

    t, run = scenario.training, scenario.run
    bound = t.staleness if t.sync == SyncMode.SSP else None
    simulated = fidelity == Fidelity.SIMULATE
    log = run_async(ctx.env, plan, run.iterations, bound, ctx.group.ranks, ctx.servers, ctx.network,
                    contended=not simulated)
    per_iter = [worker_iteration_s(f, run.warmup) for f in log.finish_s]
    samples = plan.batch_per_gpu * plan.micro_steps
    rates = [samples / x for x in per_iter]
    aggregate = sum(rates)
    iteration_s = plan.global_batch / aggregate
    sync = _sync_common(scenario, plan, rates, 1)
    sync["aggregate_samples_per_s"] = aggregate
    sync["staleness"] = staleness_stats(log.staleness)
    if bound is not None:
        sync["staleness_bound"] = bound
    sync["servers"] = _servers(scenario, ctx, log.server_in_bytes, log.server_out_bytes, log.end_s, simulated)
    comm_busy = statistics.fmean(statistics.fmean(b[run.warmup:] or b[-1:]) for b in log.comm_busy_s)
    compute = statistics.fmean(plan.micro_steps * (w.fwd_s + w.bwd_s) for w in plan.workers)
    times = tuple(per_iter)  # per worker: its mean iteration time (rank order)
    return _Outcome(iteration_s, comm_busy, compute, plan.optimizer_s, _codec_s(plan), times,
                    run.iterations, sync, tuple(sorted(log.records, key=lambda r: (r.start_s, r.track))),
                    _top_links(ctx) if simulated else ())


def _run_local_sgd(scenario, fidelity, plan: IterationPlan, ctx, schedule_for) -> _Outcome:
    from simdist.strategies.local_sgd import local_compute_s, round_closed_form, run_rounds_simulated

    h = scenario.training.local_steps
    simulated = fidelity == Fidelity.SIMULATE
    if simulated:
        rounds = max(2, -(-scenario.run.iterations // h))
        log = run_rounds_simulated(ctx.env, plan, rounds, h, schedule_for, ctx.network)
        round_s, comm_s = log.rounds_s[-1], log.comm_busy_s[-1]
        n_rounds, records = len(log.rounds_s), tuple(log.records)
    else:
        round_s, comm_s = round_closed_form(plan, h, lambda op, size, d: ctx.network.schedule_time(schedule_for(op, size, d)))
        n_rounds, records = 1, ()
    iteration_s = round_s / h
    compute_round = local_compute_s(plan, h)
    times = tuple(round_s / h for _ in range(max(1, scenario.run.iterations)))
    per_exchange = ps_bytes_per_exchange(plan, ctx.group.ranks, ctx.servers,
                                         len(ctx.group.nodes[0]) if scenario.communication.ps_aggregation == "node" else 1)
    rate = {sv: b / round_s for sv, b in per_exchange.items()}
    sync = _sync_common(scenario, plan, [plan.batch_per_gpu * plan.micro_steps / iteration_s] * plan.dp, h)
    sync["staleness"] = {"mean": 0.0, "max": 0}
    sync["servers"] = _servers(scenario, ctx, rate, rate, 1.0, simulated)
    slowest_opt = max(w.optimizer_s for w in plan.workers)
    return _Outcome(iteration_s, comm_s / h, compute_round / h - slowest_opt, slowest_opt, _codec_s(plan) / h,
                    times, n_rounds * h, sync, records, _top_links(ctx) if simulated else ())


def _codec_s(plan: IterationPlan) -> float:
    return sum(b.encode_s + b.decode_s for b in plan.buckets)


def _sync_common(scenario: Scenario, plan: IterationPlan, rates: list[float], period: int) -> dict:
    t = scenario.training
    out = {"mode": t.sync.value, "per_worker_samples_per_s": rates,
           "min_worker_samples_per_s": min(rates), "max_worker_samples_per_s": max(rates),
           "wire_bytes_per_iteration": wire_bytes_per_iteration(plan) / period,
           "stragglers": {f"gpu:{i}": w.slowdown for i, w in enumerate(plan.workers) if w.slowdown != 1.0}}
    if t.sync == SyncMode.LOCAL_SGD:
        out["local_steps"] = period
    return out


def _is_baseline(scenario: Scenario) -> bool:
    return scenario.training.sync == SyncMode.BSP and scenario.communication.compression.method == CompressionMethod.NONE


def baseline_scenario(scenario: Scenario) -> Scenario:
    """The same cluster, model and strategy under BSP without compression (the convergence reference)."""
    return replace(scenario,
                   training=replace(scenario.training, sync=SyncMode.BSP, convergence_factor=1.0),
                   communication=replace(scenario.communication, compression=CompressionSpec()))


def _statistical_efficiency(scenario: Scenario, fidelity: Fidelity, samples_per_s: float, with_baseline: bool) -> dict:
    """Throughput divided by the assumed convergence factor, and time-to-target relative to BSP uncompressed."""
    cf = scenario.training.convergence_factor
    out = {"convergence_factor": cf, "effective_samples_per_s": samples_per_s / cf,
           "relative_time_to_target": None, "baseline": "bsp, no compression, same cluster and strategy",
           "assumed": True}
    if _is_baseline(scenario):
        out["relative_time_to_target"] = cf
    elif with_baseline:
        base = run_training(baseline_scenario(scenario), fidelity, with_baseline=False)
        out["relative_time_to_target"] = cf * base.throughput.samples_per_s / samples_per_s
    return out


def _throughput(plan: IterationPlan, iteration_s: float) -> Throughput:
    samples = plan.global_batch / iteration_s
    tokens = samples * plan.tokens_per_sample if plan.tokens_per_sample else None
    return Throughput(samples_per_s=samples, tokens_per_s=tokens)


def _strategy_summary(scenario: Scenario, plan: IterationPlan) -> dict:
    comm = scenario.communication
    return {"name": comm.strategy.value, "model": scenario.workload.model.name, "backend": comm.backend.value, "buckets": len(plan.buckets),
            "bucket_size_bytes": comm.bucket_size_bytes, "overlap": comm.overlap,
            "compression": comm.compression.method.value, "global_batch": plan.global_batch,
            "batch_per_gpu": plan.batch_per_gpu, "grad_accumulation": plan.micro_steps,
            "compression_ran": _compression_ran(scenario, plan)}


def _compression_ran(scenario: Scenario, plan: IterationPlan) -> dict:
    """What the codec really did per bucket (fallbacks named) and the bytes that cross links."""
    from simdist.compression import make_codec
    from simdist.compression.report import compression_report

    return compression_report(make_codec(scenario.communication.compression),
                              [bc.bucket.shapes for bc in plan.buckets], DTYPE_BYTES[scenario.workload.grad_dtype],
                              plan.dp)
