"""A training workload end to end: memory check, iteration plan, simulate or estimate, RunResult."""
from __future__ import annotations

import statistics

from simdist.engine.context import build_context
from simdist.results.records import Breakdown, LinkUtilization, MemoryUsage, RunResult, Throughput
from simdist.scenario import Fidelity, Scenario
from simdist.strategies.plan import DTYPE_BYTES, IterationPlan, build_plan, resolve_batch, check_supported

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


def run_training(scenario: Scenario, fidelity: Fidelity) -> RunResult:
    from simdist.engine.simulation import result_header
    from simdist.strategies.data_parallel import run_closed_form, run_simulated

    memory = check_memory(scenario)
    plan = build_plan(scenario)
    ctx = build_context(scenario, fidelity)
    cache: dict = {}

    def schedule_for(op, size, delay):
        key = (op, size, delay)
        if key not in cache:
            cache[key] = ctx.schedule(op, size, server_delay_s=delay)
        return cache[key]

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
        records = tuple(log.records)
        util = ctx.network.link_utilization(ctx.env.now) if ctx.env.now > 0 else {}
        top = sorted(util.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_LINKS]
        links = tuple(LinkUtilization(name, round(u, 6)) for name, u in top if u > 0)
    return RunResult(
        **result_header(scenario, fidelity),
        iteration_time_s=iteration_s,
        throughput=_throughput(plan, iteration_s),
        scaling_efficiency=(plan.global_batch / iteration_s) / plan.single_gpu_samples_per_s,
        breakdown_s=_breakdown(plan, iteration_s, comm_busy),
        memory=memory,
        links=links,
        extra={"strategy": _strategy_summary(scenario, plan),
               "simulated_iterations": len(times) - extrapolated},
        iterations=times,
        records=records,
    )


def _throughput(plan: IterationPlan, iteration_s: float) -> Throughput:
    samples = plan.global_batch / iteration_s
    tokens = samples * plan.tokens_per_sample if plan.tokens_per_sample else None
    return Throughput(samples_per_s=samples, tokens_per_s=tokens)


def _breakdown(plan: IterationPlan, iteration_s: float, comm_busy_s: float) -> Breakdown:
    compression = sum(b.encode_s + b.decode_s for b in plan.buckets)
    exposed = max(0.0, iteration_s - plan.compute_s - plan.optimizer_s)
    return Breakdown(compute=plan.compute_s, communication=max(0.0, comm_busy_s - compression),
                     exposed_communication=exposed, compression=compression, optimizer=plan.optimizer_s)


def _strategy_summary(scenario: Scenario, plan: IterationPlan) -> dict:
    comm = scenario.communication
    return {"name": comm.strategy.value, "backend": comm.backend.value, "buckets": len(plan.buckets),
            "bucket_size_bytes": comm.bucket_size_bytes, "overlap": comm.overlap,
            "compression": comm.compression.method.value, "global_batch": plan.global_batch,
            "batch_per_gpu": plan.batch_per_gpu, "grad_accumulation": plan.micro_steps}
