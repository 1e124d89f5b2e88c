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

import simdist.engine.mp_groups as mp_groups  # lazy (simdist.LAZY_MODULES), as the model-parallel modules below
import simdist.strategies.mp_plan as mp_plan
import simdist.strategies.pipeline_graph as pipeline_graph
import simdist.strategies.pipeline_schedule as pipeline_schedule
import simdist.strategies.sharded_dp as sharded_dp
from simdist.engine.executor import MAX_TRACKED_RANKS
from simdist.engine.state import Simulation
from simdist.graph.tasks import Collective, Graph, ProcessGroup
from simdist.results.records import MemoryUsage
from simdist.scenario import Fidelity, Scenario, SyncMode
from simdist.strategies.async_ps import PsExchange, worker_graphs
from simdist.strategies.data_parallel import bsp_graphs
from simdist.strategies.interference import Slowdown, interference_of, model_parallel_interference
from simdist.strategies.local_sgd import round_graphs
from simdist.strategies.plan import IterationPlan, build_plan, is_model_parallel
from simdist.strategies.rank_memory import check_memory


@dataclass(frozen=True)
class Plan:
    """One training run laid out: graphs per rank class on named process groups, and how calls are timed.

    `local_steps`: local SGD's period (an executor iteration is a round of that many steps; None: every
    iteration synchronises). `asynchronous`: asp / ssp workers loop on their own (no lockstep). `critical_class`:
    the class whose communication the breakdown reports; `max_tracked`: ranks drawn in the trace besides each
    class's representative. `graphs_for(m)`: estimate of a pipeline, its graphs (without interference each
    chunk's tp chain fused) and their fused tp calls for m micro-batches, built as closed_form.fold_pipeline
    needs them (`graphs` is then empty).
    """

    layout: IterationPlan | mp_plan.MpPlan
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
    sharded: sharded_dp.ShardedPlan | None = None
    graphs_for: Callable | None = None

    @property
    def period(self) -> int:
        """Iterations per executor iteration (local SGD's round), 1 otherwise."""
        return self.local_steps or 1

    @property
    def model_parallel(self) -> bool:
        return not isinstance(self.layout, IterationPlan)


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
        sharded = sharded_dp.build_sharded_plan(scenario, layout)
        layout, graphs = sharded.plan, sharded_dp.sharded_graphs(sharded)
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
    builds them on demand, each chunk's blocking tp chain fused (`fused_graphs`)."""
    layout = mp_plan.build_mp_plan(scenario)
    memory = check_memory(scenario, layout)
    sim = Simulation(scenario, fidelity, context)
    groups = sim.context.layout_groups(layout.layout, layout)
    slowdown = model_parallel_interference(scenario, layout)
    bucket_bytes = scenario.communication.bucket_size_bytes
    if fidelity != Fidelity.SIMULATE:  # with interference the executor runs them on closed-form times
        def graphs_for(m: int):
            return fused_graphs(pipeline_schedule.with_micro_batches(layout, m), groups, bucket_bytes,
                                slowdown is not None)
        return Plan(layout, memory, (), groups.groups, groups.schedule_of, groups.time_of, slowdown, max_tracked=0,
                    graphs_for=graphs_for), sim
    graphs = tuple(pipeline_graph.pipeline_graphs(layout, bucket_bytes))
    groups.merge_lockstep(t for g in graphs for t in g.tasks if isinstance(t, Collective))
    return Plan(layout, memory, graphs, groups.groups, groups.schedule_of, groups.time_of, slowdown, max_tracked=0), sim


def fused_graphs(plan: mp_plan.MpPlan, groups: mp_groups.LayoutGroups, bucket_size_bytes: float,
                 interference: bool = False):
    """estimate's graphs with each chunk's blocking tp chain folded into one task (exact: the chain is
    sequential on the stage's own class; pipeline_graph._Fuse; `interference`: cp cores stay unfused), timed
    by the groups' closed forms; and per graph the tp calls inside each fused task."""
    def tp_time(group: str, op, size_bytes: float) -> float:  # LayoutGroups.time_of keeps each call's time
        return groups.time_of(Collective(id=0, name="", group=group, op=op, size_bytes=size_bytes), None)

    return pipeline_graph.fused_pipeline_graphs(plan, bucket_size_bytes, tp_time, interference)
