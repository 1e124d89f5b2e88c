"""From what the executor (or the fold) measured to the RunResult's keys: the breakdown, the busiest links and
a model-parallel run's stages (results/summaries.py: throughput, strategy, node groups, layout)."""
from __future__ import annotations

import heapq
import statistics
from dataclasses import dataclass, field

from simdist.engine.plans import Plan
from simdist.engine.state import result_header
from simdist.graph.spans import stage_terms, table_terms
from simdist.results.records import Breakdown, LinkUtilization, MpBreakdown, RunResult, StepRecord, SyncSummary, Throughput
from simdist.results.summaries import parallelism_summary, run_mfu, strategy_summary
from simdist.scenario import Fidelity, Scenario
from simdist.topology.summary import link_assumptions

TOP_LINKS = 10


@dataclass
class Outcome:
    """What one sync mode's run produced, before it becomes a RunResult."""

    iteration_s: float
    comm_busy_s: float
    compute_s: float
    optimizer_s: float
    compression_s: float
    times: tuple[float, ...]
    simulated: int
    inferred: int
    sync: SyncSummary
    records: tuple = ()
    links: tuple[LinkUtilization, ...] = ()
    class_period_s: dict[int, float] = field(default_factory=dict)  # per class: its iteration time
    class_compute_s: dict[int, float] = field(default_factory=dict)  # per class: compute-stream busy per iteration
    async_classes: bool = False  # classes are single workers (asp/ssp), not plan classes
    grad_copy_s: float = 0.0  # DDP's copies of the reduced buckets into .grad (the compute stream's, not compute_s)


def breakdown(out: Outcome, sharded: bool = False) -> Breakdown:
    """Per-iteration seconds as plain floats; exposed communication is what compute, DDP's copies into .grad and
    the optimizer do not explain, capped at the communication time (the rest is codec time overlap did not hide).
    Sharded data parallelism (ZeRO / FSDP) adds `dp_communication`: its dp-group collectives (all its communication)."""
    communication = max(0.0, float(out.comm_busy_s) - float(out.compression_s))
    unexplained = max(0.0, float(out.iteration_s) - float(out.compute_s) - out.grad_copy_s - float(out.optimizer_s))
    return Breakdown(compute=float(out.compute_s), communication=communication,
                     exposed_communication=min(unexplained, communication), compression=float(out.compression_s),
                     optimizer=float(out.optimizer_s), dp_communication=communication if sharded else None,
                     grad_copy=out.grad_copy_s or None)


def top_links(ctx) -> tuple[LinkUtilization, ...]:
    util = ctx.network.link_utilization(ctx.env.now) if ctx.env.now > 0 else {}
    top = heapq.nsmallest(TOP_LINKS, util.items(), key=lambda kv: (-kv[1], kv[0]))  # = sorted(...)[:TOP_LINKS]
    return tuple(LinkUtilization(name, round(u, 6)) for name, u in top if u > 0)


def link_records(ctx, links: tuple[LinkUtilization, ...]) -> tuple[StepRecord, ...]:
    """Busy spans of the most utilised links, one trace track each."""
    spans = ctx.network.busy_spans([l.link for l in links]) if hasattr(ctx.network, "busy_spans") else {}
    return tuple(StepRecord(f"link:{name}", "busy", s, e) for name in sorted(spans) for s, e in spans[name])


def model_parallel_result(scenario: Scenario, fidelity: Fidelity, plan: Plan, ran) -> RunResult:
    """A dp x tp x pp run's RunResult: per stage its compute, bubble and tp / dp / pp communication from the
    task spans of the last iteration (averaged over the stages in the breakdown), MFU and tokens/s."""
    layout = plan.layout
    terms = [table_terms(t, ran.iteration_s) for t in ran.tables] or \
        [stage_terms(g, ran.spans[g.rank_class.index], ran.iteration_s) for g in plan.graphs]
    mean = {k: statistics.fmean(x[k] for x in terms) for k in terms[0]}
    bd = MpBreakdown(compute=mean["compute"], communication=mean["comm"],
                     exposed_communication=mean["tp_exposed"] + mean["dp_exposed"], compression=0.0,
                     optimizer=mean["optimizer"], pipeline_bubble=mean["bubble"], tp_communication=mean["tp"],
                     dp_communication=mean["dp"], pp_communication=mean["pp"])
    samples = layout.global_batch / ran.iteration_s
    tokens = samples * layout.tokens_per_sample if layout.tokens_per_sample else None
    extra = {"mfu": run_mfu(scenario, samples),
             "achieved_tflops_per_gpu": layout.hardware_flops / (ran.iteration_s * layout.layout.size) / 1e12,
             "links_used": link_assumptions(scenario.cluster), "simulated_iterations": ran.simulated,
             "inferred_iterations": ran.inferred, "iteration_by": ran.method}
    return RunResult(**result_header(scenario, fidelity), iteration_time_s=ran.iteration_s,
                     throughput=Throughput(samples_per_s=samples, tokens_per_s=tokens),
                     scaling_efficiency=samples / layout.single_gpu_samples_per_s, breakdown_s=bd, memory=plan.memory,
                     links=ran.links, strategy=strategy_summary(scenario, layout),
                     parallelism=parallelism_summary(scenario, layout, terms), extra=extra, iterations=ran.times,
                     records=ran.records)

