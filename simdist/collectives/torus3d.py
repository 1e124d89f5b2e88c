"""3-D torus collectives, the dimension-by-dimension schedules of XLA's collectives on a TPU slice's torus.
all_reduce: ring reduce-scatter along z, then along y on the z-shards, then along x on the yz-shards; ring
all-gather back along x, y and z. reduce_scatter is that schedule's first half and all_gather its second (the
sharded data parallelism of ZeRO-3 / FSDP over a torus, and the weight and gradient collectives of GSPMD's data
axis).

Grid: the group's n ranks, in order, on an X x Y x Z grid in row-major order (the last dimension fastest), with
(X, Y, Z) the shape that `topology.direct` gives a torus3d fabric of n machines without `dims`, or the `dims`
given (io/ refuses a torus3d fabric whose dims are not that shape under strategy torus3d). A data-parallel group
of a tp layout (its ranks a constant stride s apart) lies on the sub-lattice of that shape for s n machines that
it occupies (`group_dims`): under tp 12 on a 16x16x12 pod, a 16x16 plane, whose rings are torus rings. With one rank per
node, rank k is machine k of the torus and every ring step goes to a torus neighbour. Dimensions of size 1
are skipped. Phases run the last dimension first, so with several ranks per node the node's own ranks reduce
first, as a hierarchical all-reduce does.

Both directions: a torus link is full duplex and a ring uses one direction of it, so the buffer is split in two
halves that run the same schedule at once, one with every ring forward and one with every ring reversed
(`torus3d_chains`), the bidirectional rings of a torus dimension. One dimension is in use at a time: XLA may
also split the buffer across dimensions so that all six links of a chip carry data at once; that schedule is
not modelled here (docs/catalog.md, "Google TPU pods").

Closed forms (`torus3d_all_reduce_time`; `torus3d_half_time`, half of it, for a reduce-scatter or an all-gather):
a dimension of k ranks reduce-scatters the D bytes each rank holds then in k - 1 steps of D / (2k) bytes per direction, so the whole all-reduce takes
    sum over dimensions d of 2 (k_d - 1) alpha + (N - 1) / N x S / B
for N = X Y Z ranks, S bytes per rank, per-hop latency alpha and per-direction link bandwidth B: the data term
of a bidirectional ring over all N ranks, with the latency of the rings' X + Y + Z - 3 steps each way.
"""
from __future__ import annotations

import itertools
import math

from simdist.collectives._steps import Chain, merge_parallel
from simdist.collectives.flat import flat_chain
from simdist.collectives.schedule import CollectiveOp, Group
from simdist.topology.direct import default_dims

Op = CollectiveOp
TORUS3D_OPS = frozenset({Op.ALL_REDUCE, Op.REDUCE_SCATTER, Op.ALL_GATHER})


def grid_dims(n: int) -> tuple[int, ...]:
    """The X x Y x Z shape n ranks are laid out on: a torus3d fabric's default shape for n machines."""
    return default_dims(n, 3)


def _lines(ranks: tuple[int, ...], dims: tuple[int, ...], d: int) -> list[tuple[int, ...]]:
    """The rings along dimension d: for every position of the other dimensions, the ranks at d = 0 .. k-1."""
    strides = [math.prod(dims[e + 1:]) for e in range(len(dims))]
    others = [range(s) for e, s in enumerate(dims) if e != d]
    lines = []
    for rest in itertools.product(*others):
        coords = list(rest)
        coords.insert(d, 0)
        base = sum(c * s for c, s in zip(coords, strides))
        lines.append(tuple(ranks[base + i * strides[d]] for i in range(dims[d])))
    return lines


def group_dims(group: Group) -> tuple[int, ...]:
    """The grid a group's ranks lie on. A group of the whole torus (ranks 0 .. n-1) lies on grid_dims(n). A group
    whose ranks step by a constant stride s (a data-parallel group under tp = s, each tp group s consecutive
    chips) lies on the sub-lattice of grid_dims(s n) that its members occupy: the distinct coordinates along each
    axis, the group's ranks being that lattice in row-major order (a 16x16x12 pod under tp 12 gives every dp group
    a 16x16x1 plane). Anything else falls back to grid_dims(n)."""
    ranks, n = group.ranks, group.size
    stride = ranks[1] - ranks[0] if n > 1 else 1
    if stride < 1 or any(b - a != stride for a, b in zip(ranks, ranks[1:])) or ranks[0] >= stride:
        return grid_dims(n)
    world = grid_dims(stride * n)
    if math.prod(world) != stride * n:
        return grid_dims(n)
    coords = [_coords(r, world) for r in ranks]
    axes = [sorted({c[d] for c in coords}) for d in range(len(world))]
    sub = tuple(len(a) for a in axes)
    if math.prod(sub) != n or coords != [tuple(c) for c in itertools.product(*axes)]:
        return grid_dims(n)
    return sub


def _coords(rank: int, dims: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for size in reversed(dims):
        out.append(rank % size)
        rank //= size
    return tuple(reversed(out))


def torus3d_chain(size_bytes: float, group: Group, dims: tuple[int, ...] | None = None,
                  chunks: int | None = None, reverse: bool = False, op: CollectiveOp = Op.ALL_REDUCE) -> Chain:
    """`op` of `size_bytes` (nccl-tests' convention) on the group's grid (`dims`, default group_dims), rings
    forward (or all reversed). all_reduce: reduce-scatter along each dimension, last first, then all-gather back
    in the opposite order; reduce_scatter: its first half; all_gather: its second half."""
    op = CollectiveOp(op)
    if op not in TORUS3D_OPS:
        raise ValueError(f"torus3d has no {op} schedule; it offers {sorted(str(o) for o in TORUS3D_OPS)}")
    dims = tuple(dims) if dims is not None else group_dims(group)
    if math.prod(dims) != group.size:
        raise ValueError(f"torus3d grid {'x'.join(map(str, dims))} does not hold the group's {group.size} ranks")
    order = [d for d in reversed(range(len(dims))) if dims[d] > 1]
    scatter: Chain = ()
    gather: Chain = ()
    size = float(size_bytes)
    for d in order:
        lines = _lines(group.ranks, dims, d)
        if reverse:
            lines = [tuple(reversed(line)) for line in lines]
        scatter += merge_parallel([flat_chain("ring", Op.REDUCE_SCATTER, size, line, chunks) for line in lines])
        gather = merge_parallel([flat_chain("ring", Op.ALL_GATHER, size, line, chunks) for line in lines]) + gather
        size /= dims[d]
    if op == Op.REDUCE_SCATTER:
        return scatter
    if op == Op.ALL_GATHER:
        return gather
    return scatter + gather


def torus3d_chains(size_bytes: float, group: Group, dims: tuple[int, ...] | None = None,
                   chunks: int | None = None, op: CollectiveOp = Op.ALL_REDUCE) -> tuple[Chain, Chain]:
    """The two concurrent halves, forward and reverse (see the module docstring)."""
    return (torus3d_chain(size_bytes / 2, group, dims, chunks, op=op),
            torus3d_chain(size_bytes / 2, group, dims, chunks, reverse=True, op=op))


def torus3d_all_reduce_time(dims: tuple[int, ...], size_bytes: float, alpha_s: float, bandwidth_Bps: float) -> float:
    """sum_d 2 (k_d - 1) [alpha + S_d / (2 k_d B)], S_d the bytes per rank entering dimension d's reduce-scatter
    (S divided by the sizes of the dimensions before it): 2 alpha (X + Y + Z - 3) + (N - 1) / N x S / B."""
    total, size = 0.0, float(size_bytes)
    for k in reversed(dims):
        if k > 1:
            total += 2 * (k - 1) * (alpha_s + size / (2 * k) / bandwidth_Bps)
            size /= k
    return total


def torus3d_half_time(dims: tuple[int, ...], size_bytes: float, alpha_s: float, bandwidth_Bps: float) -> float:
    """A reduce-scatter of `size_bytes` (the total input per rank) or an all-gather of that total output: half the
    all-reduce, (X + Y + Z - 3) alpha + (N - 1) / N x S / (2 B)."""
    return torus3d_all_reduce_time(dims, size_bytes, alpha_s, bandwidth_Bps) / 2
