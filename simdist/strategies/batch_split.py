"""Per-rank micro-batches: `training.batch_split: equal` (the same on every GPU) or `proportional`.

Proportional gives each GPU a share of the global micro-batch proportional to its predicted speed
(samples/s from compute.py at its candidate batch), so that mixed GPUs finish their step together;
batches are integers that add up to the global batch (largest remainder, ties to the lower rank),
refined a few times because step time is not linear in the batch (launch overheads, rooflines).
A static straggler is a fault, not a property of the GPU: it does not change the split.
"""
from __future__ import annotations

from typing import Callable, Sequence

from simdist.errors import ScenarioError
from simdist.scenario import BatchSplit

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


def split_batches(split: BatchSplit, equal_batch: int, gpu_keys: Sequence[str],
                  step_s: Callable[[str, int], float]) -> list[int]:
    """Micro-batch of every rank (rank order); `step_s(gpu_key, batch)` is one micro-step's compute time."""
    n = len(gpu_keys)
    if split == BatchSplit.EQUAL or len(set(gpu_keys)) == 1:
        return [equal_batch] * n
    total = equal_batch * n
    batches = [equal_batch] * n
    for _ in range(REFINE_ROUNDS):
        speed = {}
        for key, b in zip(gpu_keys, batches):
            speed.setdefault((key, b), b / step_s(key, b))
        new = largest_remainder(total, [speed[(k, b)] for k, b in zip(gpu_keys, batches)])
        if new == batches:
            break
        batches = new
    if min(batches) < 1:
        raise ScenarioError.bad_value("training.batch_split", split.value,
                                      f"a global batch large enough to give every GPU one sample (got {total} "
                                      f"for {n} GPUs); use 'equal' or a larger batch")
    return batches
