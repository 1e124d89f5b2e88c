"""Alpha-beta closed forms of every schedule this package builds, and nccl-tests' bandwidth figures.

alpha_s is the latency each step (each repetition of a step) pays; bandwidth_Bps the effective
bandwidth (line rate x efficiency) one rank's link gives a single transfer. On an idle uniform
fabric these equal what a network model computes for the schedule (star.star_time checks it);
`size_bytes` follows build_schedule's nccl-tests convention. Times are in seconds.
"""
from __future__ import annotations

import math

from simdist.collectives._steps import check_chunks
from simdist.collectives.ps import _partitions
from simdist.collectives.schedule import CollectiveOp
from simdist.collectives.tree import bit_tree, depth, double_tree, max_degree

Op = CollectiveOp

BUS_FACTORS = {
    Op.ALL_REDUCE: lambda n: 2 * (n - 1) / n,
    Op.REDUCE_SCATTER: lambda n: (n - 1) / n,
    Op.ALL_GATHER: lambda n: (n - 1) / n,
    Op.ALL_TO_ALL: lambda n: (n - 1) / n,
    Op.BROADCAST: lambda n: 1.0,
    Op.REDUCE: lambda n: 1.0,
}


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw/algbw ratio (doc/PERFORMANCE.md): 2(n-1)/n all_reduce, (n-1)/n RS/AG/A2A, 1 bcast/reduce."""
    return BUS_FACTORS[CollectiveOp(op)](n) if n > 0 else 0.0


def algbw_Bps(size_bytes: float, time_s: float) -> float:
    """Algorithm bandwidth: the op's nominal size over its time."""
    return size_bytes / time_s


def busbw_Bps(op: str, n: int, size_bytes: float, time_s: float) -> float:
    """Bus bandwidth: algbw x bus_factor, comparable across rank counts and to link peak."""
    return algbw_Bps(size_bytes, time_s) * bus_factor(op, n)


# ---- ring -------------------------------------------------------------------------------------


def ring_all_reduce_time(n: int, size_bytes: float, alpha_s: float, bandwidth_Bps: float) -> float:
    """2(n-1) alpha + 2(n-1)/n S/B."""
    return 0.0 if n <= 1 else 2 * (n - 1) * alpha_s + 2 * (n - 1) / n * size_bytes / bandwidth_Bps


def ring_reduce_scatter_time(n: int, size_bytes: float, alpha_s: float, bandwidth_Bps: float) -> float:
    """(n-1) alpha + (n-1)/n S/B, S the total input (all-gather: the total output) - same form."""
    return 0.0 if n <= 1 else (n - 1) * alpha_s + (n - 1) / n * size_bytes / bandwidth_Bps


ring_all_gather_time = ring_reduce_scatter_time


def ring_all_to_all_time(n: int, size_bytes: float, alpha_s: float, bandwidth_Bps: float) -> float:
    """Shifted pairwise exchange: (n-1) (alpha + S/(n B))."""
    return 0.0 if n <= 1 else (n - 1) * (alpha_s + size_bytes / (n * bandwidth_Bps))


def chain_time(n: int, size_bytes: float, alpha_s: float, bandwidth_Bps: float, chunks: int | None = None) -> float:
    """Pipelined chain broadcast or reduce: (C + n - 2)(alpha + S/(C B))."""
    if n <= 1:
        return 0.0
    c = check_chunks(chunks, size_bytes)
    return (c + n - 2) * (alpha_s + size_bytes / (c * bandwidth_Bps))


# ---- trees ------------------------------------------------------------------------------------


def tree_all_reduce_time(n: int, size_bytes: float, alpha_s: float, bandwidth_Bps: float, chunks: int | None = None) -> float:
    """Double binary tree, C chunks of s = S/(2C) per tree, depth D, busiest rank with k tree edges:
    (2D-1)(alpha + s/B) + C(alpha + k s/B); k = 4 for n >= 4 (leaf in one tree, interior in the
    other), so the bandwidth term tends to 2 S/B, versus 2(n-1)/n S/B for the ring."""
    if n <= 1:
        return 0.0
    c = check_chunks(chunks, size_bytes / 2)
    s = size_bytes / (2 * c)
    trees = double_tree(n)
    d = max(depth(t) for t in trees)
    k = max_degree(trees)
    return (2 * d - 1) * (alpha_s + s / bandwidth_Bps) + c * (alpha_s + k * s / bandwidth_Bps)


def optimal_tree_chunks(n: int, size_bytes: float, alpha_s: float, bandwidth_Bps: float) -> int:
    """The chunk count minimising tree_all_reduce_time: about sqrt((2D-1) S / (2 alpha B))."""
    if n <= 1 or size_bytes <= 0:
        return 1
    d = max(depth(t) for t in double_tree(n))
    guess = math.sqrt((2 * d - 1) * size_bytes / (2 * max(alpha_s, 1e-30) * bandwidth_Bps))
    cands = {max(1, math.floor(guess)), max(1, math.ceil(guess))}
    return min(cands, key=lambda c: tree_all_reduce_time(n, size_bytes, alpha_s, bandwidth_Bps, c))


def tree_broadcast_time(n: int, size_bytes: float, alpha_s: float, bandwidth_Bps: float, chunks: int | None = None) -> float:
    """Pipelined binary tree broadcast (or reduce): (D-1)(alpha + S/(C B)) + C(alpha + k S/(C B)), k = most children."""
    if n <= 1:
        return 0.0
    c = check_chunks(chunks, size_bytes)
    s = size_bytes / c
    parents = bit_tree(n)
    d = depth(parents)
    children = [0] * n
    for p in parents:
        if p >= 0:
            children[p] += 1
    k = max(children)
    return max(d - 1, 0) * (alpha_s + s / bandwidth_Bps) + c * (alpha_s + k * s / bandwidth_Bps)


tree_reduce_time = tree_broadcast_time


# ---- halving-doubling -------------------------------------------------------------------------


def halving_doubling_all_reduce_time(n: int, size_bytes: float, alpha_s: float, bandwidth_Bps: float) -> float:
    """2 log2(p) alpha + 2(p-1)/p S/B with p the largest power of two <= n, plus 2(alpha + S/B) when n != p."""
    if n <= 1:
        return 0.0
    p = 1 << (n.bit_length() - 1)
    t = 2 * math.log2(p) * alpha_s + 2 * (p - 1) / p * size_bytes / bandwidth_Bps
    return t if p == n else t + 2 * (alpha_s + size_bytes / bandwidth_Bps)


def halving_doubling_reduce_scatter_time(n: int, size_bytes: float, alpha_s: float, bandwidth_Bps: float) -> float:
    """log2(n) alpha + (n-1)/n S/B (power-of-two n); the same for all-gather."""
    return 0.0 if n <= 1 else math.log2(n) * alpha_s + (n - 1) / n * size_bytes / bandwidth_Bps


halving_doubling_all_gather_time = halving_doubling_reduce_scatter_time

FLAT_ALL_REDUCE = {
    "ring": ring_all_reduce_time,
    "tree": tree_all_reduce_time,
    "halving_doubling": halving_doubling_all_reduce_time,
}


def _flat_all_reduce(alg: str, n: int, size: float, a: float, b: float, chunks: int | None) -> float:
    if alg == "tree":
        return tree_all_reduce_time(n, size, a, b, chunks)
    return FLAT_ALL_REDUCE[alg](n, size, a, b)


# ---- two-level --------------------------------------------------------------------------------


def hierarchical_all_reduce_time(
    nodes: int,
    per_node: int,
    size_bytes: float,
    intra_alpha_s: float,
    intra_bandwidth_Bps: float,
    inter_alpha_s: float,
    inter_bandwidth_Bps: float,
    intra: str = "ring",
    inter: str = "ring",
    chunks: int | None = None,
) -> float:
    """Intra reduce-scatter (L ranks, S) + inter all-reduce (M nodes, S/L) + intra all-gather (L, S).

    inter_bandwidth_Bps is what each of the L concurrent inter-node streams gets: with L ranks
    sharing one NIC of rate R it is R/L. With intra="tree": tree reduce (L, S) + inter all-reduce
    (M, S) + tree broadcast (L, S) through the node leaders.
    """
    L, M = per_node, nodes
    if intra == "tree":
        return (
            tree_reduce_time(L, size_bytes, intra_alpha_s, intra_bandwidth_Bps, chunks)
            + _flat_all_reduce(inter, M, size_bytes, inter_alpha_s, inter_bandwidth_Bps, chunks)
            + tree_broadcast_time(L, size_bytes, intra_alpha_s, intra_bandwidth_Bps, chunks)
        )
    phase = ring_reduce_scatter_time if intra == "ring" else halving_doubling_reduce_scatter_time
    return (
        2 * phase(L, size_bytes, intra_alpha_s, intra_bandwidth_Bps)
        + _flat_all_reduce(inter, M, size_bytes / L, inter_alpha_s, inter_bandwidth_Bps, chunks)
    )


def torus2d_all_reduce_time(
    rows: int, cols: int, size_bytes: float, row_alpha_s: float, row_bandwidth_Bps: float,
    col_alpha_s: float, col_bandwidth_Bps: float,
) -> float:
    """2 [(C-1) alpha_r + (C-1)/C S/B_r] + 2 (R-1) alpha_c + 2 (R-1)/R (S/C)/B_c for an R x C grid (rows of C)."""
    return hierarchical_all_reduce_time(
        rows, cols, size_bytes, row_alpha_s, row_bandwidth_Bps, col_alpha_s, col_bandwidth_Bps
    )


# ---- parameter server -------------------------------------------------------------------------


def ps_all_reduce_time(
    workers: int, servers: int, colocated: bool, size_bytes: float, alpha_s: float, bandwidth_Bps: float,
    server_delay_s: float = 0.0, partition_bytes: float | None = None,
) -> float:
    """Push + update + pull, each direction bounded by its most loaded link, in P pipelined partitions
    per shard (ps.pipelined_push_pull; P = ceil((S/k) / partition_bytes), 1 without partition_bytes):
    a server takes (W - c) shards of S/k (c = 1 if colocated), a plain worker sends all k shards (S).
    A phase's bound M1 = max(server in, worker out); while partition k+1 is pushed and k pulled, an
    endpoint carries both: M2 = M1 for dedicated servers (workers only send on push, servers only on
    pull), (k - 1 + W - 1) S/k for a colocated server-worker. Time = (P + 1) alpha + delay +
    (2 M1 + (P - 1) M2) / (P B). With P = 1 (one dedicated server: 2 alpha + 2 W S/B; k = W colocated:
    2 alpha + 2 (W-1)/W S/B)."""
    if workers <= 0 or servers <= 0:
        raise ValueError("ps needs at least one worker and one server")
    c = 1 if colocated else 0
    if colocated and servers == workers == 1:
        return server_delay_s
    shard = size_bytes / servers
    parts = _partitions(shard, partition_bytes)
    server_in = (workers - c) * shard
    plain_worker = not colocated or workers > servers
    worker_out = size_bytes if plain_worker else (servers - 1) * shard
    m1 = max(server_in, worker_out)
    m2 = m1 if not colocated else max((servers - 1 + workers - 1) * shard, size_bytes if plain_worker else 0.0)
    return (parts + 1) * alpha_s + server_delay_s + (2 * m1 + (parts - 1) * m2) / (parts * bandwidth_Bps)


# ---- dispatcher -------------------------------------------------------------------------------


def flat_time(op: str, algorithm: str, n: int, size_bytes: float, alpha_s: float, bandwidth_Bps: float, chunks: int | None = None) -> float:
    """Closed form of a flat algorithm's `op` over n ranks (the pairs build_schedule offers)."""
    op = CollectiveOp(op)
    table = {
        ("ring", Op.ALL_REDUCE): lambda: ring_all_reduce_time(n, size_bytes, alpha_s, bandwidth_Bps),
        ("ring", Op.REDUCE_SCATTER): lambda: ring_reduce_scatter_time(n, size_bytes, alpha_s, bandwidth_Bps),
        ("ring", Op.ALL_GATHER): lambda: ring_all_gather_time(n, size_bytes, alpha_s, bandwidth_Bps),
        ("ring", Op.BROADCAST): lambda: chain_time(n, size_bytes, alpha_s, bandwidth_Bps, chunks),
        ("ring", Op.REDUCE): lambda: chain_time(n, size_bytes, alpha_s, bandwidth_Bps, chunks),
        ("ring", Op.ALL_TO_ALL): lambda: ring_all_to_all_time(n, size_bytes, alpha_s, bandwidth_Bps),
        ("tree", Op.ALL_REDUCE): lambda: tree_all_reduce_time(n, size_bytes, alpha_s, bandwidth_Bps, chunks),
        ("tree", Op.BROADCAST): lambda: tree_broadcast_time(n, size_bytes, alpha_s, bandwidth_Bps, chunks),
        ("tree", Op.REDUCE): lambda: tree_reduce_time(n, size_bytes, alpha_s, bandwidth_Bps, chunks),
        ("halving_doubling", Op.ALL_REDUCE): lambda: halving_doubling_all_reduce_time(n, size_bytes, alpha_s, bandwidth_Bps),
        ("halving_doubling", Op.REDUCE_SCATTER): lambda: halving_doubling_reduce_scatter_time(n, size_bytes, alpha_s, bandwidth_Bps),
        ("halving_doubling", Op.ALL_GATHER): lambda: halving_doubling_all_gather_time(n, size_bytes, alpha_s, bandwidth_Bps),
    }
    if (algorithm, op) not in table:
        raise ValueError(f"no closed form for {algorithm} {op}")
    return table[(algorithm, op)]()
