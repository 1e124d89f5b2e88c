"""2D all-reduce on a grid: ring reduce-scatter along rows, ring all-reduce along columns, ring
all-gather along rows (the row/column schedule of 2D-torus all-reduce, Mikami et al. 2018).

Grid mapping: when the group's nodes hold more than one rank each, row i is group.nodes[i] (in
order) and column j is the j-th rank of every node, so rows run over the fast intra-node links.
When every node holds a single rank (one endpoint per torus vertex), the n ranks are laid out
row-major on an R x C grid with R the largest divisor of n not above sqrt(n) (C = n / R >= R), so
rank k sits at row k // C, column k % C, matching a row-major torus2d topology.

Both directions: a torus link is full duplex, and a ring uses one direction of it. The buffer is
split in two halves that run the same schedule at once, one with every row and column ring in the
forward direction and one in reverse (`torus2d_chains`), so every torus link carries data both ways
(the bidirectional-ring form of Mikami et al.'s 2D torus all-reduce).
"""
from __future__ import annotations

import math

from simdist.collectives._steps import Chain
from simdist.collectives.hierarchical import hierarchical_chain
from simdist.collectives.schedule import Group


def grid_rows(group: Group) -> tuple[tuple[int, ...], ...]:
    """The rows of the grid the group is laid out on (see the module docstring)."""
    if any(len(node) > 1 for node in group.nodes):
        return group.nodes
    n = group.size
    r = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0) if n else 1
    c = n // r if n else 0
    return tuple(group.ranks[i * c : (i + 1) * c] for i in range(r))


def torus2d_chain(size_bytes: float, group: Group, chunks: int | None = None, reverse: bool = False) -> Chain:
    """All-reduce of `size_bytes` per rank on the group's grid, rings forward (or all reversed)."""
    rows = grid_rows(group)
    sizes = {len(row) for row in rows}
    if len(sizes) > 1:
        raise ValueError(f"torus2d needs rows of equal length, got node sizes {sorted(sizes)}")
    if reverse:  # reversed rows and reversed row order: every row and column ring runs backwards
        rows = tuple(tuple(reversed(row)) for row in reversed(rows))
    return hierarchical_chain(size_bytes, Group(tuple(r for row in rows for r in row), rows), "ring", "ring", chunks)


def torus2d_chains(size_bytes: float, group: Group, chunks: int | None = None) -> tuple[Chain, Chain]:
    """The two concurrent halves, forward and reverse (see the module docstring)."""
    return (torus2d_chain(size_bytes / 2, group, chunks), torus2d_chain(size_bytes / 2, group, chunks, reverse=True))
