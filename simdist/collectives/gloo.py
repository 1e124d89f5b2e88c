"""Gloo's real algorithms where they differ from the textbook (gloo/reduce.cc, gloo/broadcast.cc,
gloo/alltoall.cc in facebookincubator/gloo), as schedules and closed forms.

reduce: a ring reduce-scatter that runs over (almost) the whole buffer - segments of
min(S/(2n), 1 MiB), rounded up to a multiple of n segments (at least 2n), and n_segments - 2 of them
are sent to the previous rank - followed by every rank sending its reduced chunk to the root. For
2 ranks that is about 1.5 S/B, as measured on the emulated cluster.
broadcast: binomial tree over virtual ranks (root = 0); a rank posts all its sends at once (they
share its link) after its receive completes, so round r is led by the rank with the most children.
all_to_all: every rank posts all n-1 sends at once (independent flows).
allreduce, allgather: plain rings (reduce-scatter then all-gather), as in ring.py.
"""
from __future__ import annotations

import math
from typing import Sequence

from simdist.collectives._steps import Chain, merge_parallel
from simdist.collectives.ring import ring_chain
from simdist.collectives.schedule import CollectiveOp, Group, Step, Transfer

GLOO_MAX_SEGMENT_BYTES = 1024 * 1024  # ReduceOptions::kMaxSegmentSize in gloo/reduce.h


def reduce_segments(n: int, size_bytes: float) -> tuple[float, int]:
    """(segment bytes, number of segments) gloo's reduce uses for n ranks and `size_bytes`."""
    seg = min(math.ceil(size_bytes / (2 * n)), GLOO_MAX_SEGMENT_BYTES)
    count = max(math.ceil(size_bytes / seg), 2 * n)
    return float(seg), n * math.ceil(count / n)


def gloo_reduce_chain(size_bytes: float, ranks: Sequence[int]) -> Chain:
    """Reduce to ranks[0]: ring reduce-scatter towards rank-1, then a gather to the root."""
    n = len(ranks)
    if n <= 1 or size_bytes <= 0:
        return ()
    seg, count = reduce_segments(n, size_bytes)
    per_rank = count // n * seg
    ring = tuple(Transfer(ranks[i], ranks[i - 1], seg) for i in range(n))
    gather = tuple(
        Transfer(ranks[i], ranks[0], min(per_rank, size_bytes - i * per_rank))
        for i in range(1, n)
        if size_bytes - i * per_rank > 0
    )
    steps = [Step(ring, repeat=count - 2, reduce_bytes=seg, label="gloo reduce: ring reduce-scatter")]
    if gather:
        steps.append(Step(gather, lockstep=False, label="gloo reduce: gather to root"))
    return tuple(s for s in steps if s.repeat > 0)


def binomial_children(n: int) -> list[list[int]]:
    """Children of each virtual rank in gloo's broadcast tree: v + 2^i for 2^i above v's top bit."""
    dim = max(1, math.ceil(math.log2(n))) if n > 1 else 0
    out: list[list[int]] = [[] for _ in range(n)]
    for v in range(n):
        start = v.bit_length()
        out[v] = [v + (1 << i) for i in range(start, dim) if v + (1 << i) < n]
    return out


def gloo_broadcast_chain(size_bytes: float, ranks: Sequence[int]) -> Chain:
    """Broadcast from ranks[0]: one independent step per tree level (level = popcount of the virtual rank)."""
    n = len(ranks)
    if n <= 1:
        return ()
    children = binomial_children(n)
    levels: dict[int, list[Transfer]] = {}
    for v in range(n):
        for c in children[v]:
            levels.setdefault(bin(v).count("1"), []).append(Transfer(ranks[v], ranks[c], size_bytes))
    return tuple(
        Step(tuple(levels[lv]), lockstep=False, label=f"gloo broadcast level {lv}") for lv in sorted(levels)
    )


def gloo_all_to_all_chain(size_bytes: float, ranks: Sequence[int]) -> Chain:
    """Every rank sends S/n to every other rank at once."""
    n = len(ranks)
    if n <= 1:
        return ()
    block = size_bytes / n
    return (
        Step(
            tuple(Transfer(ranks[i], ranks[j], block) for i in range(n) for j in range(n) if i != j),
            lockstep=False,
            label="gloo all-to-all",
        ),
    )


def gloo_hierarchical_chain(size_bytes: float, group: Group) -> Chain:
    """Hierarchical all-reduce through torch process groups on gloo: reduce to each node's first
    rank, ring all-reduce among those leaders, broadcast inside each node."""
    sizes = {len(node) for node in group.nodes}
    if len(sizes) > 1:
        raise ValueError(f"hierarchical needs the same number of ranks on every node, got node sizes {sorted(sizes)}")
    leaders = tuple(node[0] for node in group.nodes)
    return (
        merge_parallel([gloo_reduce_chain(size_bytes, node) for node in group.nodes])
        + ring_chain(CollectiveOp.ALL_REDUCE, size_bytes, leaders)
        + merge_parallel([gloo_broadcast_chain(size_bytes, node) for node in group.nodes])
    )


def gloo_reduce_time(n: int, size_bytes: float, alpha_s: float, bandwidth_Bps: float) -> float:
    """(n_seg - 2)(alpha + seg/B) + alpha + (n-1) chunk/B on a uniform star; ~1.5 S/B for n = 2."""
    if n <= 1 or size_bytes <= 0:
        return 0.0
    seg, count = reduce_segments(n, size_bytes)
    per_rank = count // n * seg
    gathered = sum(min(per_rank, size_bytes - i * per_rank) for i in range(1, n) if size_bytes - i * per_rank > 0)
    return (count - 2) * (alpha_s + seg / bandwidth_Bps) + (alpha_s + gathered / bandwidth_Bps if gathered else 0.0)


def gloo_broadcast_time(n: int, size_bytes: float, alpha_s: float, bandwidth_Bps: float) -> float:
    """Sum over tree levels of alpha + (most children at that level) S/B; d(d+1)/2 S/B for n = 2^d."""
    if n <= 1:
        return 0.0
    children = binomial_children(n)
    fan: dict[int, int] = {}
    for v in range(n):
        if children[v]:
            lv = bin(v).count("1")
            fan[lv] = max(fan.get(lv, 0), len(children[v]))
    return sum(alpha_s + k * size_bytes / bandwidth_Bps for k in fan.values())
