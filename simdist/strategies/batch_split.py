"""Per-rank micro-batches: `training.batch_split: equal` (the same on every GPU), `proportional` or `dynamic`.

Proportional gives each GPU a share of the global micro-batch proportional to its predicted speed
(samples/s from compute.py at its candidate batch), so that mixed GPUs finish their step together;
batches are integers that add up to the global batch (largest remainder, ties to the lower rank),
refined a few times because step time is not linear in the batch (launch overheads, rooflines).
A static straggler is a fault, not a property of the GPU: it does not change the proportional split.
`dynamic` is the split a job re-computes from the step times it observes (every `rebalance_every`
iterations, engine/composite.py and the goodput timeline): proportional to speed with each GPU's straggler
slowdown included, so a slow GPU gets less work.
"""
from __future__ import annotations

from typing import Callable, Sequence

from simdist.errors import InfeasibleError
from simdist.scenario import BatchSplit
from simdist.strategies.stragglers import gpu_slowdowns

REFINE_ROUNDS = 4


def largest_remainder(total: int, weights: Sequence[float]) -> list[int]:
    """Integers proportional to `weights` that add up to `total` (deterministic)."""
    s = sum(weights)
    exact = [total * w / s for w in weights]
    out = [int(x) for x in exact]
    short = total - sum(out)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[:short]:
        out[i] += 1
    return out


def observed_slowdowns(scenario) -> tuple[float, ...] | None:
    """The per-GPU slowdowns a dynamic split balances for: those the timeline says the split last saw
    (`training.split_slowdowns`), else the scenario's stragglers; None for the other splits."""
    t = scenario.training
    if t.batch_split is not BatchSplit.DYNAMIC:
        return None
    if t.split_slowdowns is not None:
        return t.split_slowdowns
    return gpu_slowdowns(scenario)


def split_batches(split: BatchSplit, equal_batch: int, gpu_keys: Sequence[str],
                  step_s: Callable[[str, int], float], slowdowns: Sequence[float] | None = None) -> list[int]:
    """Micro-batch of every rank (rank order); `step_s(gpu_key, batch)` is one micro-step's compute time;
    `slowdowns` (dynamic): each rank's observed compute-time multiplier."""
    n = len(gpu_keys)
    slow = list(slowdowns) if slowdowns is not None and split == BatchSplit.DYNAMIC else [1.0] * n
    if split == BatchSplit.EQUAL or len(set(zip(gpu_keys, slow))) == 1:
        return [equal_batch] * n
    total = equal_batch * n
    batches = [equal_batch] * n
    for _ in range(REFINE_ROUNDS):
        speed = {}
        for key, b, x in zip(gpu_keys, batches, slow):
            speed.setdefault((key, b, x), b / (step_s(key, b) * x))
        new = largest_remainder(total, [speed[(k, b, x)] for k, b, x in zip(gpu_keys, batches, slow)])
        if new == batches:
            break
        batches = new
    if min(batches) < 1:  # valid keys, but the speeds leave a GPU no sample: nothing to run
        raise InfeasibleError(f"training.batch_split {split.value} gives a GPU no sample: a global batch of {total} "
                              f"for {n} GPUs at their speeds; use 'equal' or a larger batch")
    return batches
