"""Ring algorithms: chunked ring reduce-scatter / all-gather / all-reduce, a pipelined chain for
broadcast and reduce, and shifted pairwise exchange for all-to-all.

Data movement (positions are indices into the group's ring order; chunk c is 1/n of the buffer):
reduce-scatter repetition k (k = 0..n-2): position i sends chunk (i-k-1) mod n to i+1, which adds
its own contribution, so position i ends holding chunk i fully reduced. All-gather repetition k:
position i sends chunk (i-k) mod n to i+1. All-reduce is reduce-scatter then all-gather: two Steps
(one per phase, repeat n-1 each) that share one transfers tuple, so construction is O(n).
"""
from __future__ import annotations

from typing import Sequence

from simdist.collectives._steps import Chain, check_chunks, ring_transfers
from simdist.collectives.schedule import CollectiveOp, Step, Transfer


def ring_chain(op: CollectiveOp, size_bytes: float, ranks: Sequence[int], chunks: int | None = None) -> Chain:
    """The steps of `op` on a ring over `ranks` (root = ranks[0] for broadcast/reduce)."""
    n = len(ranks)
    if n <= 1:
        return ()
    if op == CollectiveOp.ALL_REDUCE:
        shard = size_bytes / n
        ring = ring_transfers(ranks, shard)
        return (
            Step(ring, repeat=n - 1, reduce_bytes=shard, label="ring reduce-scatter"),
            Step(ring, repeat=n - 1, label="ring all-gather"),
        )
    if op == CollectiveOp.REDUCE_SCATTER:
        shard = size_bytes / n
        return (Step(ring_transfers(ranks, shard), repeat=n - 1, reduce_bytes=shard, label="ring reduce-scatter"),)
    if op == CollectiveOp.ALL_GATHER:
        return (Step(ring_transfers(ranks, size_bytes / n), repeat=n - 1, label="ring all-gather"),)
    if op in (CollectiveOp.BROADCAST, CollectiveOp.REDUCE):
        return pipelined_chain(op, size_bytes, ranks, check_chunks(chunks, size_bytes))
    if op == CollectiveOp.ALL_TO_ALL:
        block = size_bytes / n
        return tuple(
            Step(tuple(Transfer(ranks[i], ranks[(i + k) % n], block) for i in range(n)), label=f"all-to-all shift {k}")
            for k in range(1, n)
        )
    raise ValueError(f"ring has no {op} schedule")


def pipelined_chain(op: CollectiveOp, size_bytes: float, ranks: Sequence[int], chunks: int) -> Chain:
    """Broadcast (root ranks[0] -> ranks[1] -> ... -> ranks[-1]) or reduce (the reverse) in `chunks` pieces.

    A pipeline of n-1 hops and C chunks takes C + n - 2 rounds of one chunk per hop. It is expressed
    as a steady step (every hop busy, repeat C: each hop carries exactly the whole buffer) plus a fill
    step (one hop, repeat n-2) that carries the head chunk's extra latency; the fill puts (n-2)*S/C
    extra bytes on one hop, under 1/C of the total.
    """
    n = len(ranks)
    chunk = size_bytes / chunks
    if op == CollectiveOp.BROADCAST:
        hops = tuple(Transfer(ranks[i], ranks[i + 1], chunk) for i in range(n - 1))
        reduce_bytes = 0.0
    else:
        hops = tuple(Transfer(ranks[i + 1], ranks[i], chunk) for i in range(n - 2, -1, -1))
        reduce_bytes = chunk
    steps = [Step(hops, repeat=chunks, reduce_bytes=reduce_bytes, label=f"chain {op} steady")]
    if n > 2:
        steps.insert(0, Step(hops[:1], repeat=n - 2, reduce_bytes=reduce_bytes, label=f"chain {op} pipeline fill"))
    return tuple(steps)
