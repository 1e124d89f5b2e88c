"""NVLS all-reduce: the reduction and the multicast happen inside a third-generation NVSwitch.

Each GPU owns 1/n of the buffer: it asks the switch for the reduced block (multimem.ld_reduce: the
switch reads that block from ALL n GPUs bound to the multicast object, the requester's own copy
included, and adds) and stores the result once (multimem.st: the switch writes it to all n GPUs, the
writer's own memory included). So every GPU's link to the switch carries, per direction, its n
contributions out (n x S/n = S) plus its one result store (S/n) out, and the n - 1 others' stores plus its
own reduced block in: (n + 1)/n x S each way. NCCL pipelines the reduce and the multicast phases (tuning.cc
counts NVLS all-reduce bus bandwidth twice); nccl-tests' busbw is then 2 (n - 1)/(n + 1) x the link's
achieved rate: on 8 H100 (450 GB/s x 0.80 NVLink payload x 0.85 nvlsEfficiency = 306 GB/s) 476 GB/s, which is
what is measured there (NVIDIA/nccl #1442: "a wire bw of 480 GB/s" on p5.48xlarge; the maintainer: 370 GB/s per
direction at app level, "a 30% improvement using NVLink SHARP"). A schedule counting only the (n - 1)/n S a
GPU exchanges with the OTHER GPUs would predict 2 x 306 = 612 GB/s.

Endpoints address GPUs, not the switch, and a transfer cannot go from a GPU to itself, so the schedule is one
step in which every GPU sends every other a block of (n + 1)/(n (n - 1)) x S: that puts exactly the in-switch
pattern's (n + 1)/n S per direction on each GPU's link (the extra is the self traffic, spread over the
n - 1 transfers); no GPU reduces anything (the switch does).
"""
from __future__ import annotations

from typing import Sequence

from simdist.collectives._steps import Chain
from simdist.collectives.schedule import Step, Transfer


def nvls_link_bytes(size_bytes: float, n: int) -> float:
    """Bytes each GPU's link to the switch carries per direction in an NVLS all-reduce of `size_bytes`
    over n GPUs: (n + 1)/n x S (its contributions and result store out, the results and its reduced block in)."""
    return size_bytes * (n + 1) / n if n > 1 else 0.0


def nvls_all_reduce(size_bytes: float, ranks: Sequence[int]) -> Chain:
    """All-reduce of `size_bytes` per rank through the node's NVSwitch."""
    n = len(ranks)
    if n <= 1:
        return ()
    block = nvls_link_bytes(size_bytes, n) / (n - 1)
    return (Step(tuple(Transfer(a, b, block) for a in ranks for b in ranks if a != b),
                 label="nvls reduce+multicast"),)
