"""From what the executor (or the fold) measured to the RunResult's keys: breakdown, sync, node groups,
links, throughput, strategy, and a model-parallel run's stages."""
from __future__ import annotations

import heapq
import statistics
from dataclasses import dataclass, field

from simdist.compression import make_codec
from simdist.compression.report import codec_runs_on, compression_report
from simdist.compute import DTYPE_BYTES
from simdist.engine.plans import Plan
from simdist.engine.state import result_header
from simdist.graph.spans import stage_terms, table_terms
from simdist.results.mfu import cluster_mfu
from simdist.results.records import (Breakdown, LinkUtilization, MpBreakdown, NodeGroupRow, ParallelismSummary,
                                     RunResult, ShardingSummary, StageRow, StepRecord, StrategySummary, SyncSummary,
                                     Throughput)
from simdist.scenario import Fidelity, Scenario
from simdist.strategies.mp_plan import MpPlan
from simdist.strategies.plan import IterationPlan
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


def breakdown(out: Outcome, sharded: bool = False) -> Breakdown:
    """Per-iteration seconds as plain floats; exposed communication is what compute and the optimizer do not
    explain, capped at the communication time (the rest is codec time that overlap did not hide). Sharded
    data parallelism (ZeRO / FSDP) adds `dp_communication`: its dp-group collectives (all of its communication)."""
    communication = max(0.0, float(out.comm_busy_s) - float(out.compression_s))
    unexplained = max(0.0, float(out.iteration_s) - float(out.compute_s) - float(out.optimizer_s))
    return Breakdown(compute=float(out.compute_s), communication=communication,
                     exposed_communication=min(unexplained, communication),
                     compression=float(out.compression_s), optimizer=float(out.optimizer_s),
                     dp_communication=communication if sharded else None)


def run_mfu(scenario: Scenario, samples_per_s: float) -> float:
    """Model FLOPs utilisation of a training run (simdist.results.mfu: 3 x forward FLOPs per sample, no
    recomputation, over the peak dense FLOP/s of every GPU at the run's precision)."""
    return cluster_mfu(scenario.workload.model, samples_per_s, [(g.gpu, g.count * g.gpus_per_node)
                                                                for g in scenario.cluster.node_groups],
                       scenario.workload.precision.value)


def top_links(ctx) -> tuple[LinkUtilization, ...]:
    util = ctx.network.link_utilization(ctx.env.now) if ctx.env.now > 0 else {}
    top = heapq.nsmallest(TOP_LINKS, util.items(), key=lambda kv: (-kv[1], kv[0]))  # = sorted(...)[:TOP_LINKS]
    return tuple(LinkUtilization(name, round(u, 6)) for name, u in top if u > 0)


def link_records(ctx, links: tuple[LinkUtilization, ...]) -> tuple[StepRecord, ...]:
    """Busy spans of the most utilised links, one trace track each."""
    spans = ctx.network.busy_spans([l.link for l in links]) if hasattr(ctx.network, "busy_spans") else {}
    return tuple(StepRecord(f"link:{name}", "busy", s, e) for name in sorted(spans) for s, e in spans[name])


def throughput(plan: IterationPlan, iteration_s: float) -> Throughput:
    samples = plan.global_batch / iteration_s
    tokens = samples * plan.tokens_per_sample if plan.tokens_per_sample else None
    return Throughput(samples_per_s=samples, tokens_per_s=tokens)


def strategy_summary(scenario: Scenario, plan: Plan) -> StrategySummary:
    """The run's strategy: what every parallelism reports, a ZeRO / FSDP run's `sharding`, a data-parallel
    run's codec as it ran (`compression_ran`)."""
    comm, layout = scenario.communication, plan.layout
    if plan.model_parallel:
        return StrategySummary(comm.strategy.value, scenario.workload.model.name, comm.backend.value,
                               max(len(s.grad_buckets) for s in layout.stages) if layout.dp > 1 else 0,
                               comm.bucket_size_bytes, comm.overlap, "none", layout.global_batch, layout.micro_batch,
                               layout.micro_batches, "equal", layout.pp, zero=layout.zero)
    sharded, sharding = plan.sharded, None
    if sharded is not None:
        sharding = ShardingSummary(sharded.zero, len(sharded.units), max(u.params for u in sharded.units),
                                   scenario.training.recompute.value, sharded.ring_send_bytes_per_rank(),
                                   sharded.zero >= 2)
    return StrategySummary(comm.strategy.value, scenario.workload.model.name, comm.backend.value,
                           0 if sharded is not None and sharded.zero == 3 else len(layout.buckets),
                           comm.bucket_size_bytes, comm.overlap, comm.compression.method.value, layout.global_batch,
                           layout.batch_per_gpu, layout.micro_steps, scenario.training.batch_split.value,
                           len(layout.classes), compression_ran=compression_ran(scenario, layout), sharding=sharding)


def compression_ran(scenario: Scenario, plan: IterationPlan) -> dict:
    """What the codec really did per bucket (fallbacks named) and the bytes that cross links."""
    shapes, grad_bytes = [bc.bucket.shapes for bc in plan.buckets], DTYPE_BYTES[scenario.workload.grad_dtype]
    return compression_report(make_codec(scenario.communication.compression), shapes, grad_bytes, plan.dp,
                              runs_on=codec_runs_on(scenario, shapes, grad_bytes, plan.dp))


def node_groups(scenario: Scenario, plan: IterationPlan, out: Outcome) -> tuple[NodeGroupRow, ...]:
    """Per node group: its GPUs, micro-batch, step time (its own compute per iteration) and `idle_s`, the time
    per iteration its compute stream waits beyond what the least-waiting class waits (for the slowest);
    `precision` and `precision_ran` only where the GPU computes workload.precision in another one (GpuSpec.runs_as).
    Both count compute unslowed, as breakdown_s does (the slowdown while collectives run is exposed
    communication), so a group's step + idle equals the slowest group's step."""
    step_of: dict[int, float] = {}  # each class's (or, async, each worker's) unslowed compute per iteration
    for c in plan.classes:
        for key in (c.rank_class.ranks if out.async_classes else (c.rank_class.index,)):
            step_of[key] = plan.micro_steps * c.step_s + c.optimizer_s
    idle_of: dict[int, float] = {}
    for c, period in out.class_period_s.items():
        idle_of[c] = period - step_of.get(c, out.class_compute_s.get(c, 0.0))
    floor = min(idle_of.values(), default=0.0)
    precision = str(scenario.workload.precision)
    rows = []
    for g, group in enumerate(scenario.cluster.node_groups):
        classes = [c for c in plan.classes if c.rank_class.node_group == g]
        if not classes:
            continue
        nominal = max(classes, key=lambda c: (len(c.rank_class.ranks), -c.rank_class.index))
        if out.async_classes:  # one class per worker: the group's nominal workers
            keys = [r for r in nominal.rank_class.ranks if r in idle_of]
        else:
            keys = [nominal.rank_class.index]
        idle = sum(idle_of.get(k, floor) - floor for k in keys) / max(1, len(keys))
        ran = group.gpu.runs_as(precision)
        fallback = ran != precision  # reported, never silent: this GPU has no units for the precision
        rows.append(NodeGroupRow(g, group.gpu.key, group.count * group.gpus_per_node, nominal.rank_class.batch,
                                 tuple(sorted({c.rank_class.batch for c in classes})),
                                 plan.micro_steps * nominal.step_s + nominal.optimizer_s, max(0.0, idle), len(classes),
                                 precision if fallback else None, ran if fallback else None))
    return tuple(rows)


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
    extra = {
        "mfu": run_mfu(scenario, samples),
        "achieved_tflops_per_gpu": layout.hardware_flops / (ran.iteration_s * layout.layout.size) / 1e12,
        "links_used": link_assumptions(scenario.cluster),
        "simulated_iterations": ran.simulated,
        "inferred_iterations": ran.inferred,
    }
    return RunResult(**result_header(scenario, fidelity), iteration_time_s=ran.iteration_s,
                     throughput=Throughput(samples_per_s=samples, tokens_per_s=tokens),
                     scaling_efficiency=samples / layout.single_gpu_samples_per_s, breakdown_s=bd, memory=plan.memory,
                     links=ran.links, strategy=strategy_summary(scenario, plan),
                     parallelism=parallelism_summary(scenario, layout, terms), extra=extra, iterations=ran.times,
                     records=ran.records)


def parallelism_summary(scenario: Scenario, plan: MpPlan, terms: list[dict]) -> ParallelismSummary:
    """Layout, schedule, chunks and per-stage times (the trace has one track per stage and group)."""
    t = scenario.training
    stages = tuple(StageRow(st.rank_class.index, tuple(tuple(c.layers) for c in st.chunks), st.params,
                            **{f"{k}_s": v for k, v in term.items()}) for st, term in zip(plan.stages, terms))
    return ParallelismSummary(plan.dp, plan.tp, plan.pp, ",".join(a.value for a in plan.layout.order),
                              plan.schedule.value, plan.virtual_stages, plan.micro_batch, plan.micro_batches,
                              t.sequence_parallel, t.tp_comm_overlap, plan.zero, t.recompute.value, plan.p2p_bytes,
                              plan.p2p_gather_bytes, tuple(plan.warnings), stages)
