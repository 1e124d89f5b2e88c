"""The one plan model: what a training run executes, whatever its parallelism, and its three builders.

A `Plan` holds the builder's own layout (a data-parallel `IterationPlan`: rank classes and buckets; or an
`MpPlan`: stages and chunks), the memory per GPU of its tightest rank class (InfeasibleError when one does not
fit), the per-rank-class task graphs, the process groups of the placement and how a call on them is timed:
its schedule on the network (`simulate`) or its closed-form time (`estimate`). `build` picks the builder:
data parallelism (DDP, Horovod, the parameter server: bsp, local SGD, asp, ssp), ZeRO / FSDP over the dp
group (strategies.sharded_dp), or tensor / pipeline parallelism (strategies.mp_plan, pipeline_graph).
engine/training.py runs every plan on the one path: plan -> executor or fold -> outcome -> result.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from simdist.compression import make_codec
from simdist.compute import DTYPE_BYTES, comm_slowdown
from simdist.engine.executor import MAX_TRACKED_RANKS
from simdist.engine.state import Simulation
from simdist.graph.tasks import Collective, Graph, ProcessGroup
from simdist.memory import MemoryEstimate, check_fits, estimate_memory
from simdist.results.records import MemoryUsage
from simdist.scenario import Fidelity, Scenario, StrategyKind, SyncMode
from simdist.strategies.async_ps import PsExchange, worker_graphs
from simdist.strategies.data_parallel import bsp_graphs
from simdist.strategies.local_sgd import round_graphs
from simdist.strategies.mp_plan import MpPlan, build_mp_plan, is_model_parallel, transformer_shape
from simdist.strategies.pipeline_graph import P2P_OP, fused_pipeline_graphs, pipeline_graphs
from simdist.strategies.plan import IterationPlan, build_plan, data_parallel_degree, rank_batches, rank_groups
from simdist.strategies.sharded_dp import ShardedPlan, build_sharded_plan, sharded_graphs, sharded_memory
from simdist.strategies.sharding import check_stages_fit, model_parallel_memory

Slowdown = Callable[[int, str], float]


@dataclass(frozen=True)
class Plan:
    """One training run laid out: graphs per rank class on named process groups, and how calls are timed.

    `local_steps`: local SGD's period (an executor iteration is a round of that many steps; None: every
    iteration synchronises). `asynchronous`: asp / ssp workers loop on their own (no lockstep). `critical_class`:
    the class whose communication the breakdown reports; `max_tracked`: ranks drawn in the trace besides each
    class's representative. `fused`: per graph, the tp calls estimate folded into one task (model parallel).
    """

    layout: IterationPlan | MpPlan
    memory: MemoryUsage
    graphs: tuple[Graph, ...]
    groups: dict[str, ProcessGroup]
    schedule_of: Callable  # (task, graph) -> Schedule on the network (simulate)
    time_of: Callable  # (task, graph) -> seconds alone on the idle fabric (estimate)
    slowdown: Slowdown | None = None  # compute-communication interference (compute.comm_slowdown)
    local_steps: int | None = None
    asynchronous: bool = False
    critical_class: int = 0
    max_tracked: int = MAX_TRACKED_RANKS
    sharded: ShardedPlan | None = None
    fused: tuple = ()

    @property
    def period(self) -> int:
        """Iterations per executor iteration (local SGD's round), 1 otherwise."""
        return self.local_steps or 1

    @property
    def model_parallel(self) -> bool:
        return isinstance(self.layout, MpPlan)


def build(scenario: Scenario, fidelity: Fidelity, context=None) -> tuple[Plan, Simulation]:
    """The run's plan by its parallelism, and the run's state (`context`: an already built FabricContext).
    Memory is checked before the cluster is built: a run that does not fit costs no topology."""
    if is_model_parallel(scenario):
        return _model_parallel(scenario, fidelity, context)
    return _data_parallel(scenario, fidelity, context)


def _data_parallel(scenario: Scenario, fidelity: Fidelity, context) -> tuple[Plan, Simulation]:
    """DDP / Horovod / parameter server in every sync mode, or ZeRO / FSDP, over the one dp group."""
    memory = check_memory(scenario)
    layout = build_plan(scenario)
    sim = Simulation(scenario, fidelity, context)
    ctx, t = sim.context, scenario.training
    groups = ctx.process_groups()
    sharded, local_steps, asynchronous = None, None, t.sync in (SyncMode.ASP, SyncMode.SSP)
    if t.parallelism.zero:
        sharded = build_sharded_plan(scenario, layout)
        layout, graphs = sharded.plan, sharded_graphs(sharded)
    elif asynchronous:
        simulated = fidelity == Fidelity.SIMULATE
        exchange = PsExchange(ctx.group.ranks, contended=not simulated)
        graphs = worker_graphs(layout, ctx.group.ranks, ctx.servers, grouped=not simulated)
        return Plan(layout, memory, tuple(graphs), groups, lambda task, graph: exchange.of(task),
                    lambda task, graph: ctx.network.schedule_time(exchange.of(task)), asynchronous=True), sim
    else:
        local_steps = t.local_steps if t.sync == SyncMode.LOCAL_SGD else None
        graphs = bsp_graphs(layout) if local_steps is None else round_graphs(layout, local_steps)
    return Plan(layout, memory, tuple(graphs), groups,
                lambda task, graph: ctx.cached_schedule(task.op, task.size_bytes, task.server_delay_s),
                lambda task, graph: ctx.collective_time(task.op, task.size_bytes, task.server_delay_s),
                interference_of(scenario, graphs), local_steps, critical_class=layout.slowest.rank_class.index,
                sharded=sharded), sim


def _model_parallel(scenario: Scenario, fidelity: Fidelity, context) -> tuple[Plan, Simulation]:
    """dp x tp x pp: the stages' graphs on the layout's tp, dp and pp groups (engine/mp_groups.py); estimate
    without interference fuses each chunk's blocking tp chain (`fused_graphs`)."""
    layout = build_mp_plan(scenario)
    memory = check_memory(scenario, layout)
    sim = Simulation(scenario, fidelity, context)
    fabric = sim.context.model_parallel_fabric(layout.layout, layout)
    slowdown = model_parallel_interference(scenario, layout)
    bucket_bytes = scenario.communication.bucket_size_bytes
    fused: tuple = ()
    if fidelity != Fidelity.SIMULATE and slowdown is None:
        graphs, inner = fused_graphs(layout, fabric, bucket_bytes)
        fused = tuple(inner)
    else:
        graphs = pipeline_graphs(layout, bucket_bytes)
    return Plan(layout, memory, tuple(graphs), fabric.groups, fabric.schedule_of, fabric.time_of, slowdown,
                max_tracked=0, fused=fused), sim


def fused_graphs(plan: MpPlan, fabric, bucket_size_bytes: float):
    """estimate's graphs with each chunk's blocking tp chain folded into one task (exact: the chain is
    sequential on the stage's own class; pipeline_graph._Fuse), timed by the fabric's closed forms; and per
    graph the tp calls inside each fused task."""
    memo: dict[tuple, float] = {}

    def tp_time(group: str, op, size_bytes: float) -> float:
        key = (group, op, size_bytes)
        if key not in memo:
            memo[key] = fabric.time_of(Collective(id=0, name="", group=group, op=op, size_bytes=size_bytes), None)
        return memo[key]

    return fused_pipeline_graphs(plan, bucket_size_bytes, tp_time)


def check_memory(scenario: Scenario, layout: MpPlan | None = None) -> MemoryUsage:
    """Per-GPU memory of the tightest rank class (node group at its own batch, or pipeline stage); raises
    InfeasibleError (exit 3) with the numbers when one does not fit. `layout`: a model-parallel run's plan."""
    if is_model_parallel(scenario):
        worst = check_stages_fit(_stage_memory(scenario, layout or build_mp_plan(scenario)))
    else:
        worst = None
        for _, est in _estimates(scenario):
            check_fits(est)
            if worst is None or est.total_bytes / est.capacity_bytes > worst.total_bytes / worst.capacity_bytes:
                worst = est
        assert worst is not None
    return MemoryUsage(per_gpu_bytes=worst.total_bytes, fits=worst.fits, capacity_bytes=worst.capacity_bytes,
                       parts_bytes=dict(worst.parts_bytes))


def memory_by_group(scenario: Scenario) -> dict[int, MemoryEstimate]:
    """{node group: MemoryEstimate at the group's largest batch}, refusing none (the text report shows each
    group of a mixed cluster; check_memory refuses)."""
    out: dict = {}
    for g, est in _estimates(scenario):
        if g not in out or est.total_bytes > out[g].total_bytes:
            out[g] = est
    return out


def _estimates(scenario: Scenario) -> list[tuple[int, MemoryEstimate]]:
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


def _stage_memory(scenario: Scenario, plan: MpPlan):
    """Every pipeline stage's memory per GPU (strategies.sharding.model_parallel_memory)."""
    s, t, w = scenario, scenario.training, scenario.workload
    chunks = [None] * (plan.pp * plan.virtual_stages)
    for st in plan.stages:
        for c in st.chunks:
            chunks[c.virtual_stage] = c.layers
    return model_parallel_memory(
        w.model, s.cluster.node_groups[0].gpu, micro_batch=plan.micro_batch, micro_batches=plan.micro_batches,
        precision=w.precision.value, optimizer=t.optimizer.value, grad_dtype=w.grad_dtype.value, dp=plan.dp,
        tp=plan.tp, pp=plan.pp, zero=t.parallelism.zero, sequence_parallel=t.sequence_parallel,
        recompute=t.recompute, schedule=t.schedule, virtual_stages=plan.virtual_stages,
        shape=transformer_shape(w.model), chunks=chunks, extra_buffer_bytes=zero_buffer_bytes(scenario, plan))


def zero_buffer_bytes(scenario: Scenario, plan: MpPlan) -> float:
    """Gradients ZeRO holds unsharded beside its 1/dp shard: at stage 3 the largest unit's before their
    reduce_scatter (as sharded_dp.sharded_memory counts them), at stage 2 one bucket being reduced
    (DeepSpeed's reduce bucket: a micro-batch's gradients are reduced bucket by bucket and freed). Stage 1
    keeps full gradients and reduce_scatters in place in that buffer (Megatron-LM's distributed optimizer),
    as stage 0 all_reduces there: none."""
    if plan.zero == 2:
        return float(min(scenario.communication.bucket_size_bytes,
                         max(c.grad_bytes for st in plan.stages for c in st.chunks)))
    if plan.zero != 3:
        return 0.0
    return max((u.params for st in plan.stages for u in st.units), default=0.0) * plan.grad_elem_bytes


def interference_of(scenario: Scenario, graphs) -> Slowdown | None:
    """Compute-communication interference of these graphs' rank classes (None: none), from the GPU catalog
    or a calibration profile (simdist.compute.comm_slowdown). A parameter-server exchange is none: its
    pushes and pulls are point-to-point copies (NIC DMA, copy engines) with the reduction on the servers,
    not reduction kernels on the worker GPU (and so BSP and SSP with bound 0 stay equal)."""
    if scenario.communication.strategy == StrategyKind.PS:
        return None
    return comm_slowdown([g.gpu for g in scenario.cluster.node_groups], [gr.rank_class for gr in graphs])


def runs_beside_compute(scenario: Scenario, plan: MpPlan) -> bool:
    """Whether any collective of a stage can run while its compute does: tp_comm_overlap's, or with
    communication.overlap the dp buckets of a chunk finished before the stage's last backward (interleaved
    chunks), ZeRO-2's every-micro-batch reduce_scatters or ZeRO-3's prefetched gathers. Otherwise the tp
    collectives block the compute and the dp ones follow the last backward (one chunk per stage)."""
    if scenario.training.tp_comm_overlap:
        return True
    return plan.overlap and plan.dp > 1 and (plan.virtual_stages > 1 or plan.zero >= 2)


def model_parallel_interference(scenario: Scenario, plan: MpPlan) -> Slowdown | None:
    """Interference of the stage classes for their tp and dp collectives (as `interference_of`); pipeline
    sends and receives are none: point-to-point copies (NIC DMA, NVLink copy engines) without reduction
    kernels on the GPU, as the parameter-server exchange is treated."""
    if not runs_beside_compute(scenario, plan):
        return None  # exact: no collective runs beside the compute of its class
    base = comm_slowdown([g.gpu for g in scenario.cluster.node_groups], [st.rank_class for st in plan.stages])
    if base is None:
        return None
    return lambda index, op: 0.0 if op == P2P_OP.value else base(index, op)
