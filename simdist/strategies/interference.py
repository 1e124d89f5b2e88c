"""Compute-communication interference of a run's rank classes: how much a class's compute slows while its
collectives run (simdist.compute.comm_slowdown, from the GPU catalog or a calibration profile), where the
run's collectives can run beside its compute at all."""
from __future__ import annotations

from typing import Callable

from simdist.compute import comm_slowdown
from simdist.scenario import Scenario, StrategyKind
import simdist.strategies.mp_plan as mp_plan  # lazy (simdist.LAZY_MODULES): model-parallel runs only
import simdist.strategies.pipeline_graph as pipeline_graph

Slowdown = Callable[[int, str], float]


def interference_of(scenario: Scenario, graphs) -> Slowdown | None:
    """Compute-communication interference of these graphs' rank classes (None: none), from the GPU catalog
    or a calibration profile (simdist.compute.comm_slowdown). A parameter-server exchange is none: its
    pushes and pulls are point-to-point copies (NIC DMA, copy engines) with the reduction on the servers,
    not reduction kernels on the worker GPU (and so BSP and SSP with bound 0 stay equal)."""
    if scenario.communication.strategy == StrategyKind.PS:
        return None
    return comm_slowdown([g.gpu for g in scenario.cluster.node_groups], [gr.rank_class for gr in graphs])


def runs_beside_compute(scenario: Scenario, plan: mp_plan.MpPlan) -> bool:
    """Whether any collective of a stage can run while its compute does: tp_comm_overlap's, or with
    communication.overlap the dp buckets of a chunk finished before the stage's last backward (interleaved
    chunks), ZeRO-2's every-micro-batch reduce_scatters or ZeRO-3's prefetched gathers. Otherwise the tp
    collectives block the compute and the dp ones follow the last backward (one chunk per stage)."""
    if scenario.training.tp_comm_overlap:
        return True
    return plan.overlap and plan.grad_dp > 1 and (plan.virtual_stages > 1 or plan.zero >= 2)


def model_parallel_interference(scenario: Scenario, plan: mp_plan.MpPlan) -> Slowdown | None:
    """Interference of the stage classes for their tp and dp collectives (as `interference_of`); pipeline
    sends and receives are none: point-to-point copies (NIC DMA, NVLink copy engines) without reduction
    kernels on the GPU, as the parameter-server exchange is treated."""
    if not runs_beside_compute(scenario, plan):
        return None  # exact: no collective runs beside the compute of its class
    base = comm_slowdown([g.gpu for g in scenario.cluster.node_groups], [st.rank_class for st in plan.stages])
    if base is None:
        return None
    p2p = pipeline_graph.P2P_OP.value
    return lambda index, op: 0.0 if op == p2p else base(index, op)
