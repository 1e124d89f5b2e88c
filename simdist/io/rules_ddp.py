"""Where communication.gradient_as_bucket_view is read: only where PyTorch DDP's reducer runs.

With gradient_as_bucket_view=True DDP makes each parameter's .grad a view into its all-reduce bucket, so the
reducer's copy of every reduced bucket back into .grad (reducer.cpp finalize_bucket_dense -> copy_bucket_to_grad)
and the separate gradient buffer beside the buckets are gone. simdist models that reducer in bsp data-parallel
steps with bucketing ddp on an all-reduce strategy over more than one rank (strategies/plan._grad_copies); every
other run reduces gradients some other way, so the key could not change it and is refused there.
"""
from __future__ import annotations

from simdist.errors import Issue
from simdist.scenario import Scenario, StrategyKind, SyncMode
from simdist.strategies.mp_plan import is_model_parallel
from simdist.strategies.plan import data_parallel_degree

KEY = "communication.gradient_as_bucket_view"


def _other_reducer(scenario: Scenario) -> str | None:
    """Why DDP's reducer does not run in `scenario` (None where it does)."""
    t, comm = scenario.training, scenario.communication
    if scenario.workload.benchmark is not None:
        return "a benchmark has no gradient buckets"
    if is_model_parallel(scenario):
        return "tp, pp, cp or ep > 1 runs Megatron-Core's DDP, whose gradients already live in its contiguous buffer"
    if t.parallelism.zero:
        return "ZeRO / FSDP reduce-scatter their own flat gradient buffers, not DDP's buckets"
    if comm.strategy is StrategyKind.PS:
        return "parameter servers are not DDP's reducer"
    if str(comm.bucketing) != "ddp":
        return f"bucketing '{comm.bucketing}' is Horovod's fusion buffer, not DDP's reducer"
    if t.sync is not SyncMode.BSP:
        return f"training.sync {t.sync.value} is modelled without DDP's reducer (bsp only)"
    if str(comm.compression.method) == "onebit":
        return "DeepSpeed's 1-bit all-reduce runs in its optimizer, not DDP's reducer"
    if any(g.gpu.is_tpu for g in scenario.cluster.node_groups):
        return "XLA reduces a TPU's gradients in place; DDP's reducer does not run"
    if data_parallel_degree(scenario) <= 1:
        return "one data-parallel rank trains without DDP"
    return None


def grad_bucket_view_issues(scenario: Scenario) -> list[Issue]:
    """communication.gradient_as_bucket_view true where DDP's reducer does not run (nothing to skip)."""
    if not scenario.communication.gradient_as_bucket_view:
        return []
    why = _other_reducer(scenario)
    return [] if why is None else [Issue(KEY, f"got true, but {why}; remove it")]
