"""Ring algorithms: chunked ring reduce-scatter / all-gather / all-reduce, a pipelined chain for
broadcast and reduce, and shifted pairwise exchange for all-to-all.

Data movement (positions are indices into the group's ring order; chunk c is 1/n of the buffer):
reduce-scatter repetition k (k = 0..n-2): position i sends chunk (i-k-1) mod n to i+1, which adds
its own contribution, so position i ends holding chunk i fully reduced. All-gather repetition k:
position i sends chunk (i-k) mod n to i+1. All-reduce is reduce-scatter then all-gather: two Steps
(one per phase, repeat n-1 each) that share one transfers tuple, so construction is O(n).

Channels (NCCL's concurrent rings): all_reduce, reduce_scatter and all_gather may split the buffer
into C channels, each a full ring over the group moving S/C, all running at once as separate chains.
Channel c visits every node's ranks rotated to start at position e_c = ceil(c*k/C) of the node's k
ranks, so it enters node i+1 at its position e_c and leaves node i through position e_c - 1: with the
routing's rails (GPU j of g uses NIC floor(j*m/g)) and C = m NICs, each channel enters and leaves
every node through its own NIC. Single-node groups and nodes holding one rank keep one ring (C = 1).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from simdist.collectives._steps import Chain, check_chunks, ring_transfers
from simdist.collectives.schedule import CollectiveOp, Group, Step, Transfer
from simdist.topology.gcpause import gc_paused

CHANNEL_OPS = frozenset({CollectiveOp.ALL_REDUCE, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_GATHER})


def effective_channels(group: Group, channels: int | None) -> int:
    """Channels actually used: 1 unless the group spans several nodes that all hold >= 2 ranks;
    then min(channels, fewest ranks on a node). ValueError for a non-positive count."""
    if channels is None:
        return 1
    if int(channels) != channels or channels < 1:
        raise ValueError(f"channels must be a positive integer, got {channels!r}")
    if len(group.nodes) <= 1:
        return 1
    fewest = min(len(node) for node in group.nodes)
    return 1 if fewest <= 1 else min(int(channels), fewest)


def channel_rings(group: Group, channels: int,
                  node_orders: "Sequence[tuple[int, ...]] | None" = None) -> list[tuple[int, ...]]:
    """The ring order of each channel. Without `node_orders` see the module docstring (one ring =
    group.ranks unchanged). With them (node_rings.py: local GPU orders from the node's graph):
    a single-node group runs one ring per order; a multi-node group runs channel c through every
    node in node_orders[c] (channel_orders: a graph ring rotated onto NIC c)."""
    return [tuple(ring.tolist()) if isinstance(ring, np.ndarray) else ring
            for ring in _channel_ring_orders(group, channels, node_orders)]


def _node_matrix(group: Group) -> "np.ndarray | None":
    """group.nodes as an (nodes, k) int array when every node holds k ranks, else None."""
    sizes = {len(node) for node in group.nodes}
    if len(sizes) != 1:
        return None
    return np.array(group.nodes, dtype=np.int64).reshape(len(group.nodes), sizes.pop())


def _channel_ring_orders(group: Group, channels: int,
                         node_orders: "Sequence[tuple[int, ...]] | None" = None) -> "list[tuple[int, ...] | np.ndarray]":
    """channel_rings' orders, as int arrays where every node holds the same number of ranks (one
    array gather per channel instead of a Python loop over the ranks)."""
    if node_orders:
        if len(group.nodes) == 1:
            node = group.nodes[0]
            if len(node) == len(node_orders[0]) and len(node_orders) > 1:
                return [tuple(node[i] for i in order) for order in node_orders]
            return [tuple(group.ranks)]
        c_total = effective_channels(group, channels)
        matrix = _node_matrix(group)
        if matrix is not None and matrix.shape[1] == len(node_orders[0]):
            return [matrix[:, np.asarray(node_orders[c % len(node_orders)], dtype=np.int64)].ravel()
                    for c in range(c_total)]
    c_total = effective_channels(group, channels)
    if c_total == 1:
        return [tuple(group.ranks)]
    matrix = _node_matrix(group)
    rings: list = []
    for c in range(c_total):
        if matrix is not None:
            k = matrix.shape[1]
            start = -(-c * k // c_total)  # ceil(c k / C)
            rings.append(np.roll(matrix, -start, axis=1).ravel())
            continue
        ring: list[int] = []
        for node in group.nodes:
            k = len(node)
            start = -(-c * k // c_total)  # ceil(c k / C)
            ring.extend(node[start:] + node[:start])
        rings.append(tuple(ring))
    return rings


def channel_chains(op: CollectiveOp, size_bytes: float, group: Group, channels: int | None,
                   node_orders: "Sequence[tuple[int, ...]] | None" = None) -> tuple[Chain, ...]:
    """One ring chain per channel, each moving size_bytes / C (ops without channels: one ring)."""
    op = CollectiveOp(op)
    if op not in CHANNEL_OPS:
        return (ring_chain(op, size_bytes, group.ranks),)
    with gc_paused():  # one Transfer per rank and channel: see topology.gcpause
        rings = _channel_ring_orders(group, channels or 1, node_orders)
        return tuple(ring_chain(op, size_bytes / len(rings), ring) for ring in rings)


def ring_chain(op: CollectiveOp, size_bytes: float, ranks: Sequence[int], chunks: int | None = None) -> Chain:
    """The steps of `op` on a ring over `ranks` (root = ranks[0] for broadcast/reduce)."""
    n = len(ranks)
    if n <= 1:
        return ()
    if op == CollectiveOp.ALL_REDUCE:
        shard = size_bytes / n
        ring = ring_transfers(ranks, shard)
        return (
            Step(ring, repeat=n - 1, reduce_bytes=shard, label="ring reduce-scatter", pipelined=True),
            Step(ring, repeat=n - 1, label="ring all-gather", pipelined=True),
        )
    if op == CollectiveOp.REDUCE_SCATTER:
        shard = size_bytes / n
        return (Step(ring_transfers(ranks, shard), repeat=n - 1, reduce_bytes=shard, label="ring reduce-scatter",
                     pipelined=True),)
    if op == CollectiveOp.ALL_GATHER:
        return (Step(ring_transfers(ranks, size_bytes / n), repeat=n - 1, label="ring all-gather", pipelined=True),)
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
