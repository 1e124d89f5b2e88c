"""Where communication.gradient_as_bucket_view is read: only where PyTorch DDP's reducer runs.

With gradient_as_bucket_view=True DDP makes each parameter's .grad a view into its all-reduce bucket, so the
reducer's copy of every reduced bucket back into .grad (reducer.cpp finalize_bucket_dense -> copy_bucket_to_grad)
and the separate gradient buffer beside the buckets are gone. simdist models that reducer in bsp data-parallel
steps with bucketing ddp on an all-reduce strategy over more than one rank (strategies/plan.no_ddp_reducer, the
one rule); every other run reduces gradients some other way, so the key could not change it and is refused there.
"""
from __future__ import annotations

from simdist.errors import Issue
from simdist.scenario import Scenario
from simdist.strategies.plan import no_ddp_reducer

KEY = "communication.gradient_as_bucket_view"


def grad_bucket_view_issues(scenario: Scenario) -> list[Issue]:
    """communication.gradient_as_bucket_view true where DDP's reducer does not run (nothing to skip)."""
    if not scenario.communication.gradient_as_bucket_view:
        return []
    why = no_ddp_reducer(scenario)
    return [] if why is None else [Issue(KEY, f"got true, but {why}; remove it")]
