"""What a run's RunResult reports besides its times: model FLOPs utilisation, throughput, the strategy as it
ran (a data-parallel codec's fallbacks, a ZeRO / FSDP run's sharding), node groups' steps and idle time, and a
model-parallel run's layout and stages. engine/outcomes.py assembles the result from these."""
from __future__ import annotations

from simdist.compression import make_codec
from simdist.compression.report import codec_runs_on, compression_report
from simdist.compute import DTYPE_BYTES
from simdist.results.mfu import cluster_mfu
from simdist.results.records import (NodeGroupRow, ParallelismSummary, ShardingSummary, StageRow, StrategySummary,
                                     Throughput)
from simdist.scenario import Scenario
import simdist.strategies.mp_plan as mp_plan  # lazy (simdist.LAZY_MODULES): model-parallel runs only
from simdist.strategies.plan import IterationPlan


def run_mfu(scenario: Scenario, samples_per_s: float) -> float:
    """Model FLOPs utilisation of a training run (simdist.results.mfu: 3 x forward FLOPs per sample, no
    recomputation, over the peak dense FLOP/s of every GPU at the run's precision)."""
    return cluster_mfu(scenario.workload.model, samples_per_s, [(g.gpu, g.count * g.gpus_per_node)
                                                                for g in scenario.cluster.node_groups],
                       scenario.workload.precision.value)


def throughput(plan: IterationPlan, iteration_s: float) -> Throughput:
    samples = plan.global_batch / iteration_s
    tokens = samples * plan.tokens_per_sample if plan.tokens_per_sample else None
    return Throughput(samples_per_s=samples, tokens_per_s=tokens)


def strategy_summary(scenario: Scenario, layout: "IterationPlan | mp_plan.MpPlan", sharded=None) -> StrategySummary:
    """The run's strategy: what every parallelism reports, a ZeRO / FSDP run's `sharding` (`sharded`: its
    strategies.sharded_dp.ShardedPlan), a data-parallel run's codec as it ran (`compression_ran`)."""
    comm, sharding = scenario.communication, None
    if not isinstance(layout, IterationPlan):
        return StrategySummary(comm.strategy.value, scenario.workload.model.name, comm.backend.value,
                               max(len(s.grad_buckets) for s in layout.stages) if layout.grad_dp > 1 else 0,
                               comm.bucket_size_bytes, comm.overlap, "none", layout.global_batch, layout.micro_batch,
                               layout.micro_batches, "equal", layout.pp, zero=layout.zero)
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


def node_groups(scenario: Scenario, plan: IterationPlan, out) -> tuple[NodeGroupRow, ...]:
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


def parallelism_summary(scenario: Scenario, plan: mp_plan.MpPlan, terms: list[dict]) -> ParallelismSummary:
    """Layout, schedule, chunks and per-stage times (the trace has one track per stage and group)."""
    t = scenario.training
    stages = tuple(StageRow(st.rank_class.index, tuple(tuple(c.layers) for c in st.chunks), st.params,
                            **{f"{k}_s": v for k, v in term.items()}) for st, term in zip(plan.stages, terms))
    return ParallelismSummary(plan.dp, plan.tp, plan.pp, ",".join(a.value for a in plan.layout.order),
                              plan.schedule.value, plan.virtual_stages, plan.micro_batch, plan.micro_batches,
                              t.sequence_parallel, t.tp_comm_overlap, plan.zero, t.recompute.value, plan.p2p_bytes,
                              plan.p2p_gather_bytes, tuple(plan.warnings), stages,
                              *((plan.cp, plan.cp_comm_type.value) if plan.cp > 1 else (None, None)),
                              *((plan.ep, plan.etp, plan.edp, t.moe_load_imbalance) if plan.moe_load else ()))
