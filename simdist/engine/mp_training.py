"""A dp x tp x pp training run end to end: memory per stage, the plan, the stage graphs on the executor
(`simulate`, flow network) or their fold (`estimate`, closed forms), and the RunResult with MFU, tokens/s and
the pipeline bubble, tp and dp communication in the breakdown."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from simdist.compute import comm_slowdown
from simdist.engine.closed_form import fold
from simdist.engine.executor import Executor, _union_s
from simdist.engine.outcomes import link_records, run_mfu, top_links
from simdist.engine.state import Simulation, result_header
from simdist.graph.tasks import Collective, Compute, Graph, Stream
from simdist.results.records import Breakdown, MemoryUsage, RunResult, Throughput
from simdist.scenario import Fidelity, Scenario
from simdist.strategies.mp_plan import MpPlan, build_mp_plan, transformer_shape
from simdist.strategies.pipeline_graph import P2P_OP, fused_pipeline_graphs, pipeline_graphs
from simdist.strategies.sharding import check_stages_fit, model_parallel_memory
from simdist.topology.summary import link_assumptions


@dataclass(frozen=True)
class MpBreakdown(Breakdown):
    """Breakdown of a model-parallel iteration, averaged over the pipeline stages: `pipeline_bubble` is the
    time a stage's GPU idles inside the pipeline (waiting for inputs), `tp_communication` its tensor-parallel
    collectives, `dp_communication` its gradient all_reduces or ZeRO collectives (of both, the part the
    compute stream does not hide is in `exposed_communication`), `pp_communication` the time transfers to or
    from it are in flight."""

    pipeline_bubble: float = 0.0
    tp_communication: float = 0.0
    dp_communication: float = 0.0
    pp_communication: float = 0.0


def mp_memory(scenario: Scenario, plan: MpPlan) -> MemoryUsage:
    """The tightest stage's memory per GPU; InfeasibleError (exit 3) with the numbers when one does not fit."""
    s, t, w = scenario, scenario.training, scenario.workload
    chunks = [None] * (plan.pp * plan.virtual_stages)
    for st in plan.stages:
        for c in st.chunks:
            chunks[c.virtual_stage] = c.layers
    est = model_parallel_memory(
        w.model, s.cluster.node_groups[0].gpu, micro_batch=plan.micro_batch, micro_batches=plan.micro_batches,
        precision=w.precision.value, optimizer=t.optimizer.value, grad_dtype=w.grad_dtype.value, dp=plan.dp,
        tp=plan.tp, pp=plan.pp, zero=t.parallelism.zero, sequence_parallel=t.sequence_parallel,
        recompute=t.recompute, schedule=t.schedule, virtual_stages=plan.virtual_stages,
        shape=transformer_shape(w.model), chunks=chunks, extra_buffer_bytes=zero_buffer_bytes(scenario, plan))
    worst = check_stages_fit(est)
    return MemoryUsage(per_gpu_bytes=worst.total_bytes, fits=worst.fits, capacity_bytes=worst.capacity_bytes,
                       parts_bytes=dict(worst.parts_bytes))


def fused_graphs(plan: MpPlan, fabric, bucket_size_bytes: float):
    """estimate's graphs with each chunk's blocking tp chain folded into one task (exact: the chain is
    sequential on the stage's own class; pipeline_graph._Fuse), timed by the fabric's closed forms."""
    memo: dict[tuple, float] = {}

    def tp_time(group: str, op, size_bytes: float) -> float:
        key = (group, op, size_bytes)
        if key not in memo:
            memo[key] = fabric.time_of(Collective(id=0, name="", group=group, op=op, size_bytes=size_bytes), None)
        return memo[key]

    return fused_pipeline_graphs(plan, bucket_size_bytes, tp_time)


def runs_beside_compute(scenario: Scenario, plan: MpPlan) -> bool:
    """Whether any collective of a stage can run while its compute does: tp_comm_overlap's, or with
    communication.overlap the dp buckets of a chunk finished before the stage's last backward (interleaved
    chunks), ZeRO-2's every-micro-batch reduce_scatters or ZeRO-3's prefetched gathers. Otherwise the tp
    collectives block the compute and the dp ones follow the last backward (one chunk per stage)."""
    if scenario.training.tp_comm_overlap:
        return True
    return plan.overlap and plan.dp > 1 and (plan.virtual_stages > 1 or plan.zero >= 2)


def mp_interference(scenario: Scenario, plan: MpPlan):
    """Compute-communication interference of the stage classes (compute.comm_slowdown, as engine.training.interference_of) for their
    tp and dp collectives; pipeline sends and receives are none: point-to-point copies (NIC DMA, NVLink copy
    engines) without reduction kernels on the GPU, as the parameter-server exchange is treated."""
    if not runs_beside_compute(scenario, plan):
        return None  # exact: no collective runs beside the compute of its class
    base = comm_slowdown([g.gpu for g in scenario.cluster.node_groups], [st.rank_class for st in plan.stages])
    if base is None:
        return None
    return lambda index, op: 0.0 if op == P2P_OP.value else base(index, op)


def zero_buffer_bytes(scenario: Scenario, plan: MpPlan) -> float:
    """Gradients ZeRO holds unsharded beside its 1/dp shard: at stage 3 the largest unit's before their
    reduce_scatter (as sharded_dp.sharded_memory counts them), at stage 2 one bucket being reduced
    (DeepSpeed's reduce bucket: a micro-batch's gradients are reduced bucket by bucket and freed). Stage 1 keeps full gradients and reduce_scatters in
    place in that buffer (Megatron-LM's distributed optimizer), as stage 0 all_reduces there: none."""
    if plan.zero == 2:
        return float(min(scenario.communication.bucket_size_bytes,
                         max(c.grad_bytes for st in plan.stages for c in st.chunks)))
    if plan.zero != 3:
        return 0.0
    return max((u.params for st in plan.stages for u in st.units), default=0.0) * plan.grad_elem_bytes


def _covered_s(spans: list[tuple[float, float]], by: list[tuple[float, float]]) -> float:
    """Seconds of the union of `spans` that the union of `by` also covers."""
    return _union_s(spans) + _union_s(by) - _union_s(spans + by)


def stage_terms(graph: Graph, spans: dict[int, tuple[float, float]], period_s: float,
                fused: dict[int, tuple[tuple[float, float], ...]] | None = None) -> dict[str, float]:
    """Per stage: compute, optimizer, tp, dp (and their exposed parts), pp transfer time and the bubble
    (`fused`: the tp calls inside estimate's fused tasks, as offsets from each one's start)."""
    compute = opt = 0.0
    busy: list[tuple[float, float]] = []  # the compute stream's spans
    tp, dp, pp = [], [], []
    for t in graph.tasks:
        s, e = spans[t.id]
        if isinstance(t, Compute) and t.stream == Stream.COMPUTE:
            inner = fused.get(t.id, ()) if fused else ()
            if t.kind == "optimizer":
                opt += e - s
            else:
                compute += e - s - math.fsum(b - a for a, b in inner)
            if inner:  # the chain's compute and tp calls, as the unfused graph has them
                cuts = [s, *(x for a, b in inner for x in (s + a, s + b)), e]
                busy += [(cuts[k], cuts[k + 1]) for k in range(0, len(cuts), 2) if cuts[k + 1] > cuts[k]]
                tp += [(s + a, s + b) for a, b in inner]
            else:
                busy.append((s, e))
        elif isinstance(t, Collective):
            {"tp": tp, "dp": dp}.get(t.group.split(".")[0], pp).append((s, e))
    # exposed: communication the compute stream does not hide (tp_comm_overlap's exchanges and bulk
    # collectives run beside their GEMMs; dp buckets beside backward; ZeRO's gathers beside the previous unit)
    tp_s, dp_s = _union_s(tp), _union_s(dp)
    exposed_tp = tp_s - _covered_s(tp, busy)
    exposed_dp = dp_s - _covered_s(dp, busy + tp)
    bubble = max(0.0, period_s - compute - opt - exposed_tp - exposed_dp)
    return {"compute": compute, "optimizer": opt, "tp": tp_s, "tp_exposed": exposed_tp, "dp": dp_s,
            "dp_exposed": exposed_dp, "pp": _union_s(pp), "bubble": bubble, "comm": _union_s(tp + dp + pp)}


def run_model_parallel(scenario: Scenario, fidelity: Fidelity, context=None) -> RunResult:
    """Simulate or estimate a tensor/pipeline(/data) parallel run (BSP)."""
    plan = build_mp_plan(scenario)
    memory = mp_memory(scenario, plan)
    sim = Simulation(scenario, fidelity, context)
    ctx, run = sim.context, scenario.run
    fabric = ctx.model_parallel_fabric(plan.layout, plan)
    slowdown = mp_interference(scenario, plan)
    fused = [None] * len(plan.stages)
    if fidelity != Fidelity.SIMULATE and slowdown is None:
        graphs, fused = fused_graphs(plan, fabric, scenario.communication.bucket_size_bytes)
    else:
        graphs = pipeline_graphs(plan, scenario.communication.bucket_size_bytes)
    links, records = (), ()
    if fidelity == Fidelity.SIMULATE:
        ex = Executor(sim.env, ctx.network, fabric.schedule_of, fabric.groups, critical_class=0, max_tracked=0,
                      slowdown=slowdown)
        log = ex.run(graphs, None if run.duration_s is not None else run.iterations, run.duration_s)
        steady = log.times[run.warmup:] or log.times[-1:]
        iteration_s, times = statistics.fmean(steady), tuple(log.times)
        n_sim, n_inf = log.simulated, log.inferred
        spans = ex.last_spans
        links = top_links(ctx)
        records = tuple(log.records) + link_records(ctx, links)
    else:
        folded = fold(graphs, fabric.time_of, fabric.groups, slowdown)
        iteration_s = folded.end_s
        total = run.iterations
        if run.duration_s is not None:
            total = max(1, math.ceil(run.duration_s / iteration_s - 1e-9)) if iteration_s > 0 else 1
        times, n_sim, n_inf = (iteration_s,) * total, 1, total - 1
        spans = folded.spans
    terms = [stage_terms(g, spans[g.rank_class.index], iteration_s, f) for g, f in zip(graphs, fused)]
    mean = {k: statistics.fmean(x[k] for x in terms) for k in terms[0]}
    bd = MpBreakdown(compute=mean["compute"], communication=mean["comm"],
                     exposed_communication=mean["tp_exposed"] + mean["dp_exposed"], compression=0.0,
                     optimizer=mean["optimizer"], pipeline_bubble=mean["bubble"], tp_communication=mean["tp"],
                     dp_communication=mean["dp"], pp_communication=mean["pp"])
    samples = plan.global_batch / iteration_s
    tokens = samples * plan.tokens_per_sample if plan.tokens_per_sample else None
    n = plan.layout.size
    extra = {
        "mfu": run_mfu(scenario, samples),
        "achieved_tflops_per_gpu": plan.hardware_flops / (iteration_s * n) / 1e12,
        "strategy": strategy_summary(scenario, plan),
        "parallelism": parallelism_summary(scenario, plan, terms),
        "links_used": link_assumptions(scenario.cluster),
        "simulated_iterations": n_sim,
        "inferred_iterations": n_inf,
    }
    return RunResult(**result_header(scenario, fidelity), iteration_time_s=iteration_s,
                     throughput=Throughput(samples_per_s=samples, tokens_per_s=tokens),
                     scaling_efficiency=samples / plan.single_gpu_samples_per_s, breakdown_s=bd, memory=memory,
                     links=links, extra=extra, iterations=times, records=records)


def strategy_summary(scenario: Scenario, plan: MpPlan) -> dict:
    """The keys the training report reads, for a model-parallel run."""
    comm = scenario.communication
    return {"name": comm.strategy.value, "model": scenario.workload.model.name, "backend": comm.backend.value,
            "buckets": max(len(s.grad_buckets) for s in plan.stages) if plan.dp > 1 else 0,
            "bucket_size_bytes": comm.bucket_size_bytes, "overlap": comm.overlap, "compression": "none",
            "zero": plan.zero,
            "global_batch": plan.global_batch, "batch_per_gpu": plan.micro_batch,
            "grad_accumulation": plan.micro_batches, "batch_split": "equal", "rank_classes": plan.pp}


def parallelism_summary(scenario: Scenario, plan: MpPlan, terms: list[dict]) -> dict:
    """Layout, schedule, chunks and per-stage times (the trace has one track per stage and group)."""
    t = scenario.training
    return {
        "dp": plan.dp, "tp": plan.tp, "pp": plan.pp,
        "placement_order": ",".join(a.value for a in plan.layout.order),
        "schedule": plan.schedule.value, "virtual_stages": plan.virtual_stages,
        "micro_batch": plan.micro_batch, "micro_batches": plan.micro_batches,
        "sequence_parallel": t.sequence_parallel, "tp_comm_overlap": t.tp_comm_overlap,
        "zero": plan.zero, "recompute": t.recompute.value,
        "p2p_bytes": plan.p2p_bytes, "p2p_gather_bytes": plan.p2p_gather_bytes,
        "warnings": list(plan.warnings),
        "stages": [{"stage": st.rank_class.index,
                    "layers": [list(c.layers) for c in st.chunks],
                    "params_per_gpu": st.params,
                    **{f"{k}_s": v for k, v in term.items()}} for st, term in zip(plan.stages, terms)],
    }
