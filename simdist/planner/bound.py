"""An upper bound on a candidate's throughput from its compute alone, to skip candidates in `plan`.

Every data-parallel iteration a rank takes runs its forward and backward passes for each of its k
micro-batches and then its optimizer step, which waits for the last bucket's exchange
(strategies/data_parallel.py bsp_graph; local SGD's local steps likewise): in the plan the engine
builds (strategies/plan.py build_plan), rank class c spends at least `k (fwd_s + bwd_s) + optimizer_s`
(scaled by its slowdown; `optimizer_s` is 0 under a parameter server, whose servers apply the update)
per iteration of k x `batch` samples, whatever the bucket size, codec or overlap does on top
(communication, compression kernels and interference only add time). So a cluster processes at most

    sum over classes of  len(ranks) x batch x k / (k (fwd_s + bwd_s) + optimizer_s)   samples per second

(the engine's own "linear" rate, `single_gpu_samples_per_s`, except for the PS case), and tokens per
second are that times the model's tokens per sample. Nothing under `communication.` changes a rank's
compute, and only the strategy (parameter server or not) changes its optimizer step, so one bound
serves every candidate that differs from another only in communication keys other than the strategy
(a "compute class"). `plan` estimates classes best bound first and skips a class whose bound cannot
reach the top-k or the Pareto front of what it has already estimated.

Bounded here: data-parallel training without ZeRO, model parallelism, dynamic batch split phases,
failures or a benchmark workload (their engines build other plans); any other class gets no bound
and is always estimated. `plan` also checks every estimated candidate against its class's bound
and stops skipping (estimating everything it skipped) if one ever exceeds it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

COMPUTE_FREE_PREFIX = "communication."  # axis keys that never change a rank's compute ...
COMPUTE_KEYS = ("communication.strategy",)  # ... except this one (a PS worker runs no optimizer step)


def is_compute_free(key: str) -> bool:
    """Whether an axis key leaves every candidate's compute bound unchanged."""
    return key.startswith(COMPUTE_FREE_PREFIX) and key not in COMPUTE_KEYS


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
        k = plan.micro_steps
        rate = sum(len(c.rank_class.ranks) * c.rank_class.batch * k / (k * (c.fwd_s + c.bwd_s) + c.optimizer_s)
                   for c in plan.classes)
        price = cluster_price_per_hour(scenario)
    except Exception:  # noqa: BLE001 - a candidate that cannot be planned is estimated (and gets its reason)
        return None
    if not rate > 0:
        return None
    return ClassBound(rate, plan.tokens_per_sample, price)
