"""NCCL-style double binary tree, pipelined in chunks (all-reduce), and a single pipelined binary
tree for broadcast and reduce.

Tree A over positions 0..n-1 is the "bit" tree NCCL describes in src/graph/trees.cc: position r
with lowest set bit b hangs under r+b (when bit 2b of r is clear) or r-b (when set); if r+b is out
of range it hangs under r-b; position 0 is the root. Every position has at most two children and
the depth is about log2(n). Tree B mirrors A (r -> n-1-r) when n is even and shifts it by one
(r -> r+1 mod n) when n is odd, so most interior positions of one tree are leaves of the other.
All-reduce sends half the buffer through each tree: chunks go up (reduced at each hop) and, once at
the root, back down; reduce and broadcast of different chunks overlap.

Schedule: a steady step where every tree edge carries one chunk up and one down (repeat C) and a
fill step of one edge (repeat 2D-1, D = depth) for the pipeline's head and tail. Chunk count C
defaults to ceil(S/2 / 512 KiB) per tree (NCCL's Simple-protocol chunk); cost.optimal_tree_chunks
gives the C that minimises the closed form when alpha and B are known.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

from simdist.collectives._steps import Chain, check_chunks
from simdist.collectives.schedule import CollectiveOp, Step, Transfer


def _bit_parent(r: int, n: int) -> int:
    b = r & -r
    p = r - b if r & (b << 1) else r + b
    return r - b if p >= n else p


@lru_cache(maxsize=64)
def bit_tree(n: int) -> tuple[int, ...]:
    """Parent position of each position in tree A (-1 for the root, position 0)."""
    return (-1,) + tuple(_bit_parent(r, n) for r in range(1, n))


@lru_cache(maxsize=64)
def double_tree(n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Parents in tree A and tree B (B = A mirrored for even n, shifted by one for odd n)."""
    a = bit_tree(n)
    if n % 2 == 0:
        b = tuple(-1 if a[n - 1 - r] < 0 else n - 1 - a[n - 1 - r] for r in range(n))
    else:
        # r plays the role of s(r) = (r+1) % n in tree A
        b = tuple(-1 if a[(r + 1) % n] < 0 else (a[(r + 1) % n] - 1) % n for r in range(n))
    return a, b


def depth(parents: Sequence[int]) -> int:
    """Edges on the longest root-to-leaf path."""
    memo: dict[int, int] = {}

    def d(r: int) -> int:
        if parents[r] < 0:
            return 0
        if r not in memo:
            memo[r] = d(parents[r]) + 1
        return memo[r]

    best = 0
    for r in range(len(parents)):  # iterative enough: depth is O(log n)
        best = max(best, d(r))
    return best


def max_degree(trees: Sequence[Sequence[int]]) -> int:
    """Most tree edges (to parent or children, over all trees) at any one position."""
    n = len(trees[0])
    deg = [0] * n
    for parents in trees:
        for r, p in enumerate(parents):
            if p >= 0:
                deg[r] += 1
                deg[p] += 1
    return max(deg)


def tree_chain(op: CollectiveOp, size_bytes: float, ranks: Sequence[int], chunks: int | None = None) -> Chain:
    """Steps of `op` over `ranks` (broadcast/reduce root = ranks[0])."""
    n = len(ranks)
    if n <= 1:
        return ()
    if op == CollectiveOp.ALL_REDUCE:
        c = check_chunks(chunks, size_bytes / 2)
        chunk = size_bytes / (2 * c)
        trees = double_tree(n)
        edges = [(r, p) for parents in trees for r, p in enumerate(parents) if p >= 0]
        up = tuple(Transfer(ranks[r], ranks[p], chunk) for r, p in edges)
        down = tuple(Transfer(ranks[p], ranks[r], chunk) for r, p in edges)
        d = max(depth(t) for t in trees)
        return (
            Step(up[:1], repeat=2 * d - 1, reduce_bytes=chunk, label="double tree pipeline fill"),
            Step(up + down, repeat=c, reduce_bytes=2 * chunk, label="double tree reduce+broadcast"),
        )
    if op in (CollectiveOp.BROADCAST, CollectiveOp.REDUCE):
        c = check_chunks(chunks, size_bytes)
        chunk = size_bytes / c
        parents = bit_tree(n)
        if op == CollectiveOp.BROADCAST:
            moves = tuple(Transfer(ranks[p], ranks[r], chunk) for r, p in enumerate(parents) if p >= 0)
            red = 0.0
        else:
            moves = tuple(Transfer(ranks[r], ranks[p], chunk) for r, p in enumerate(parents) if p >= 0)
            red = 2 * chunk
        d = depth(parents)
        steps = [Step(moves, repeat=c, reduce_bytes=red, label=f"tree {op}")]
        if d > 1:
            steps.insert(0, Step(moves[:1], repeat=d - 1, reduce_bytes=red and chunk, label=f"tree {op} pipeline fill"))
        return tuple(steps)
    raise ValueError(f"tree has no {op} schedule (trees serve all_reduce, broadcast and reduce; use ring)")
