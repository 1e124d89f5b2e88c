"""An upper bound on a candidate's throughput from its compute alone, to skip candidates in `plan`.

Every data-parallel step a rank takes runs its forward and backward passes: in the plan the engine
builds (strategies/plan.py build_plan), rank class c spends at least `fwd_s + bwd_s` (already scaled
by its slowdown) per micro-batch of `batch` samples, whatever the strategy, bucket size, codec or
overlap does on top (communication, compression kernels, interference and the optimizer only add
time). So a cluster processes at most

    sum over classes of  len(ranks) x batch / (fwd_s + bwd_s)   samples per second,

and tokens per second are that times the model's tokens per sample. Nothing under `communication.`
changes a rank's compute, so one bound serves every candidate that differs from another only in
communication keys (a "compute class"). `plan` estimates classes best bound first and skips a class
whose bound cannot reach the top-k or the Pareto front of what it has already estimated.

Bounded here: data-parallel training without ZeRO, model parallelism, dynamic batch split phases,
failures or a benchmark workload (their engines build other plans); any other class gets no bound
and is always estimated. `plan` also checks every estimated candidate against its class's bound
and stops skipping (estimating everything it skipped) if one ever exceeds it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

COMPUTE_FREE_PREFIX = "communication."  # axis keys that never change a rank's compute


@dataclass(frozen=True)
class ClassBound:
    """What a compute class can at best reach: samples (and tokens) per second, and its price per hour."""

    samples_per_s: float
    tokens_per_sample: float | None
    price_per_hour: float | None


def compute_bound(scenario: Any) -> ClassBound | None:
    """The class bound of `scenario`, or None where the bound above is not known to hold."""
    from simdist.engine.hybrid import is_phased
    from simdist.results.cost import cluster_price_per_hour
    from simdist.strategies.mp_plan import is_model_parallel
    from simdist.strategies.plan import build_plan

    try:
        if (scenario.workload.benchmark is not None or scenario.workload.model is None
                or scenario.failures is not None or scenario.training.parallelism.zero
                or is_model_parallel(scenario) or is_phased(scenario)):
            return None
        plan = build_plan(scenario)
        rate = sum(len(c.rank_class.ranks) * c.rank_class.batch / (c.fwd_s + c.bwd_s) for c in plan.classes)
        price = cluster_price_per_hour(scenario)
    except Exception:  # noqa: BLE001 - a candidate that cannot be planned is estimated (and gets its reason)
        return None
    if not rate > 0:
        return None
    return ClassBound(rate, plan.tokens_per_sample, price)
