"""Small helpers every algorithm module shares: ring transfers, empty schedules, parallel merging.

Algorithms build one chain per (sub)group; `merge_parallel` zips the chains of identical subgroups
(every node, every column) into one chain whose steps hold all subgroups' transfers, so a
hierarchical or 2D schedule stays a short sequence of steps whatever the group size.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from simdist.collectives.schedule import Step, TransferArray

Chain = tuple[Step, ...]

# NCCL's Simple protocol moves a 4 MiB buffer in 8 steps: 512 KiB per pipeline chunk
# (NCCL src/include/device.h, NCCL_STEPS; DEFAULT_BUFFSIZE in src/init.cc). Pipelined chains and trees
# use this as their default chunk size.
PIPELINE_CHUNK_BYTES = 512 * 1024


def default_chunks(size_bytes: float, chunk_bytes: float = PIPELINE_CHUNK_BYTES) -> int:
    """Pipeline chunks for `size_bytes`: ceil(size / chunk_bytes), at least 1."""
    return max(1, math.ceil(size_bytes / chunk_bytes))


def check_chunks(chunks: int | None, size_bytes: float, chunk_bytes: float = PIPELINE_CHUNK_BYTES) -> int:
    """The caller's chunk count if given (validated), else the default for the size."""
    if chunks is None:
        return default_chunks(size_bytes, chunk_bytes)
    if int(chunks) != chunks or chunks < 1:
        raise ValueError(f"chunks must be a positive integer, got {chunks!r}")
    return int(chunks)


def ring_transfers(ranks: "Sequence[int] | np.ndarray", size_bytes: float, direction: int = 1) -> TransferArray:
    """Every position sends `size_bytes` to its ring neighbour (+1 or -1), in position order: position i
    to position (i + direction) mod n, as arrays (no Transfer object per rank)."""
    src = np.asarray(ranks, dtype=np.int64)
    return TransferArray(src, np.roll(src, -direction), float(size_bytes))


def _concat(parts: list) -> "tuple | TransferArray":
    """The parts' transfers in order: one TransferArray when every part is one, else a tuple."""
    if all(isinstance(p, TransferArray) for p in parts):
        return TransferArray.concat(parts)
    return tuple(t for p in parts for t in p)


def merge_parallel(chains: Sequence[Chain]) -> Chain:
    """Zip chains that run side by side in lockstep into one chain (their steps must match in shape)."""
    chains = [c for c in chains if c]
    if not chains:
        return ()
    if len(chains) == 1:
        return chains[0]
    first = chains[0]
    for c in chains[1:]:
        if len(c) != len(first) or any(
            (a.repeat, a.lockstep, a.delay_s, a.reduce_bytes, a.pipelined)
            != (b.repeat, b.lockstep, b.delay_s, b.reduce_bytes, b.pipelined)
            or (a.lockstep and a.transfers and b.transfers and a.transfers[0].size_bytes != b.transfers[0].size_bytes)
            for a, b in zip(first, c)
        ):
            raise ValueError("subgroups of a hierarchical schedule must have identical step structure (equal sizes)")
    return tuple(
        Step(
            transfers=_concat([c[i].transfers for c in chains]),
            repeat=first[i].repeat,
            lockstep=first[i].lockstep,
            delay_s=first[i].delay_s,
            reduce_bytes=first[i].reduce_bytes,
            label=first[i].label,
            pipelined=first[i].pipelined,
        )
        for i in range(len(first))
    )
