"""What share of the published suite's work each case is, so that its progress bar's ETA is honest.

The cases differ in cost by two orders of magnitude (an nccl-tests point on 16 GPUs against a 1,536-GPU
Megatron pipeline), and the data file lists the cheap ones first: an ETA that counts cases (remaining cases x
seconds per case so far) said 6 s at case 23 of 184 of a 76 s run. The bar counts work instead: each case
gets a cost from its scenario, known before anything runs (loading is cached and takes about 1 ms a case),
and the bar advances by that share.

The cost is a rough proxy of what the simulator builds: tasks and flows grow with the GPU count (about its
square root, as ranks of one class share their graph), a pipeline multiplies the stages simulated, and a
collective benchmark has no training graph. It was read off the suite's own per-case times (the ETA stays
within a factor of about 1.5 of the real total from case 20 on); it orders work, it is not a prediction.
"""
from __future__ import annotations

import math
from typing import Sequence

from simdist.validation.published.cases import PublishedCase, ScenarioRef

SHARES = 1000  # the bar counts thousandths of the suite's estimated work
BENCHMARK_WEIGHT = 0.3  # a collective benchmark against a training run of the same size


def run_cost(ref: ScenarioRef) -> float:
    """Relative cost of simulating one scenario (1.0 when it cannot be loaded: the run will report why)."""
    from simdist.io.load import load_scenario

    try:
        scenario = load_scenario(ref.file, list(ref.overrides))
    except Exception:  # noqa: BLE001 - the case's own run reports the failure; here it only weighs the bar
        return 1.0
    pp = scenario.training.parallelism.pp
    kind = BENCHMARK_WEIGHT if scenario.workload.benchmark is not None else 1.0
    return kind * (1.0 + math.sqrt(scenario.cluster.num_gpus) / 8.0) * (1.0 + pp / 2.0)


def case_cost(case: PublishedCase) -> float:
    """A case's cost: its scenario's, plus its baseline's when it has one."""
    return sum(run_cost(ref) for ref in (case.scenario, case.baseline) if ref is not None)


def work_shares(cases: Sequence[PublishedCase], total: int = SHARES) -> list[int]:
    """Integer shares of `total`, one per case, proportional to `case_cost` and summing to `total` exactly
    (largest remainders)."""
    costs = [case_cost(c) for c in cases]
    whole = sum(costs)
    if not cases or whole <= 0:
        return [0] * len(cases)
    exact = [total * c / whole for c in costs]
    shares = [int(x) for x in exact]
    by_remainder = sorted(range(len(cases)), key=lambda i: exact[i] - shares[i], reverse=True)
    for i in by_remainder[: total - sum(shares)]:
        shares[i] += 1
    return shares
