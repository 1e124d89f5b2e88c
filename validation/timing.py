"""Barrier-aligned timing: every rank times the op, the MAX over ranks is taken by an untimed all_reduce.

Warm-up repetitions are run and discarded; each timed repetition starts from a barrier so that no
rank's lateness is counted as communication.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable


def summarize(times_s: list[float]) -> dict[str, object]:
    """median/min/max of the repetitions, plus the repetitions themselves."""
    return {"times_s": times_s, "median_s": statistics.median(times_s), "min_s": min(times_s), "max_s": max(times_s)}


def timed_max(op: Callable[[], object], warmup: int, reps: int, sync: Callable[[], None] = lambda: None,
              group: object = None) -> list[float]:
    """Run `op` warmup+reps times, each after a barrier; return the MAX-over-ranks time of each timed rep."""
    import torch
    import torch.distributed as dist

    device = "cuda" if dist.get_backend(group) == "nccl" else "cpu"
    out: list[float] = []
    for i in range(warmup + reps):
        dist.barrier(group=group)
        sync()
        t0 = time.perf_counter()
        op()
        sync()
        dt = time.perf_counter() - t0
        t = torch.tensor([dt], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)  # not timed
        if i >= warmup:
            out.append(float(t.item()))
    return out
