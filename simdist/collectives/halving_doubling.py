"""Rabenseifner's all-reduce: recursive-halving reduce-scatter then recursive-doubling all-gather.

With p = 2^k positions, reduce-scatter step j (j = 1..k) pairs position i with i XOR p/2^j; each
sends the half of its current block range whose bit p/2^j differs from its own and keeps the other
half, so after k steps position i holds block i (of p) fully reduced. All-gather runs the distances
in reverse (1, 2, ..., p/2), each exchanging everything held so far.

Non-power-of-two n (Thakur, Rabenseifner & Gropp 2005, as MPICH does): with p the largest power of
two <= n and r = n - p, the first 2r positions pair up; each even one sends its whole buffer to the
odd one after it (which reduces) and sits out; the p remaining positions run the power-of-two
algorithm; finally each odd one sends the whole result back. Cost: two extra steps of alpha + S/B.
Reduce-scatter and all-gather alone are offered for power-of-two groups only.
"""
from __future__ import annotations

from typing import Sequence

from simdist.collectives._steps import Chain
from simdist.collectives.schedule import CollectiveOp, Step, Transfer


def _log2_exact(n: int) -> int | None:
    return n.bit_length() - 1 if n & (n - 1) == 0 else None


def _exchanges(size_bytes: float, active: Sequence[int]) -> dict[int, tuple[Transfer, ...]]:
    """Pairwise exchanges at each distance d; at distance d both phases move S*d/p per rank."""
    p = len(active)
    out = {}
    d = 1
    while d < p:
        size = size_bytes * d / p
        out[d] = tuple(Transfer(active[i], active[i ^ d], size) for i in range(p))
        d *= 2
    return out


def _halving(exchanges: dict[int, tuple[Transfer, ...]]) -> list[Step]:
    return [
        Step(exchanges[d], reduce_bytes=exchanges[d][0].size_bytes, label=f"halving distance {d}")
        for d in sorted(exchanges, reverse=True)
    ]


def _doubling(exchanges: dict[int, tuple[Transfer, ...]]) -> list[Step]:
    return [Step(exchanges[d], label=f"doubling distance {d}") for d in sorted(exchanges)]


def halving_doubling_chain(op: CollectiveOp, size_bytes: float, ranks: Sequence[int], chunks: int | None = None) -> Chain:
    """Steps of `op` over `ranks`; `chunks` is ignored (each step moves one block range)."""
    n = len(ranks)
    if n <= 1:
        return ()
    if op in (CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_GATHER):
        if _log2_exact(n) is None:
            raise ValueError(
                f"halving_doubling {op} needs a power-of-two group, got {n} ranks; use ring for this group"
            )
        ex = _exchanges(size_bytes, ranks)
        steps = _halving(ex) if op == CollectiveOp.REDUCE_SCATTER else _doubling(ex)
        return tuple(steps)
    if op != CollectiveOp.ALL_REDUCE:
        raise ValueError(f"halving_doubling has no {op} schedule (it serves all_reduce, reduce_scatter, all_gather)")
    p = 1 << (n.bit_length() - 1)
    r = n - p
    active = [ranks[2 * i + 1] for i in range(r)] + list(ranks[2 * r :])
    steps: list[Step] = []
    if r:
        steps.append(
            Step(
                tuple(Transfer(ranks[2 * i], ranks[2 * i + 1], size_bytes) for i in range(r)),
                reduce_bytes=size_bytes,
                label="fold to power of two",
            )
        )
    ex = _exchanges(size_bytes, active)
    steps += _halving(ex) + _doubling(ex)
    if r:
        steps.append(
            Step(tuple(Transfer(ranks[2 * i + 1], ranks[2 * i], size_bytes) for i in range(r)), label="unfold")
        )
    return tuple(steps)
