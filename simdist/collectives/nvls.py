"""NVLS all-reduce: the reduction and the multicast happen inside a third-generation NVSwitch.

Each GPU owns 1/n of the buffer: it asks the switch for the reduced block (multimem.ld_reduce: the
switch reads that block from all n GPUs and adds) and stores the result once (multimem.st: the
switch copies it to every GPU). Each GPU's link to the switch then carries about S out (the switch
reading its contributions) and S in (the multicast results) — half of what a ring puts on it — and
NCCL pipelines the two halves (tuning.cc counts NVLS all-reduce bus bandwidth twice). Endpoints
address GPUs, not the switch, so the schedule is one step in which every GPU sends a block of S/n
to every other: that loads each GPU's link with (n-1)/n S per direction, exactly the in-switch
pattern's load; no GPU reduces anything (the switch does).
"""
from __future__ import annotations

from typing import Sequence

from simdist.collectives._steps import Chain
from simdist.collectives.schedule import Step, Transfer


def nvls_all_reduce(size_bytes: float, ranks: Sequence[int]) -> Chain:
    """All-reduce of `size_bytes` per rank through the node's NVSwitch."""
    n = len(ranks)
    if n <= 1:
        return ()
    block = size_bytes / n
    return (Step(tuple(Transfer(a, b, block) for a in ranks for b in ranks if a != b),
                 label="nvls reduce+multicast"),)
