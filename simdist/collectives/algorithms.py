"""Entry point: `build_schedule(op, algorithm, size_bytes, group, ...)` and the registry of which
(algorithm, op) pairs exist.

size_bytes follows nccl-tests: the per-rank buffer for all_reduce, broadcast and reduce; the total
output for all_gather; the total input for reduce_scatter; the per-rank send buffer for all_to_all.
Broadcast and reduce use group.ranks[0] as the root. `channels` (ring all_reduce, reduce_scatter,
all_gather only) runs that many concurrent rings, NCCL-style (ring.py); None or 1 = one ring. The
caller picks it from the hardware: simdist.topology.routing.ring_channels(topology, group.nodes) gives the
NICs per node (NCCL opens at least one channel per NIC), capped by the ranks per node. `node_orders`
(node_rings.py) are the rings NCCL finds in the node's own graph: inside one node, one ring per
order (every NVLink used); across nodes, channel c's path through every node.
"""
from __future__ import annotations

from enum import StrEnum
from typing import Sequence

from simdist.collectives.flat import FLAT_OPS, flat_chain
from simdist.collectives.hierarchical import hierarchical_chain
from simdist.collectives.ps import ps_chains
from simdist.collectives.ring import CHANNEL_OPS, channel_chains, effective_channels
from simdist.collectives.schedule import CollectiveOp, Group, Schedule
from simdist.collectives.torus2d import torus2d_chains
from simdist.collectives.torus3d import TORUS3D_OPS, torus3d_chains

Op = CollectiveOp


class Algorithm(StrEnum):
    """Algorithms spelled as communication.strategy in the scenario."""

    RING = "ring"
    TREE = "tree"
    HALVING_DOUBLING = "halving_doubling"
    HIERARCHICAL = "hierarchical"
    TORUS2D = "torus2d"
    TORUS3D = "torus3d"
    PS = "ps"


SUPPORTED_OPS: dict[Algorithm, frozenset[CollectiveOp]] = {
    Algorithm.RING: FLAT_OPS["ring"],
    Algorithm.TREE: FLAT_OPS["tree"],
    Algorithm.HALVING_DOUBLING: FLAT_OPS["halving_doubling"],
    Algorithm.HIERARCHICAL: frozenset({Op.ALL_REDUCE}),
    Algorithm.TORUS2D: frozenset({Op.ALL_REDUCE}),
    Algorithm.TORUS3D: TORUS3D_OPS,
    Algorithm.PS: frozenset({Op.ALL_REDUCE}),
}


def supports(op: str, algorithm: str, ranks: int | None = None) -> bool:
    """Whether `algorithm` has a schedule for `op` (on a group of `ranks`, when given: halving-doubling's
    reduce-scatter and all-gather exist for power-of-two groups only)."""
    try:
        op, alg = CollectiveOp(op), Algorithm(algorithm)
    except ValueError:
        return False
    if op not in SUPPORTED_OPS[alg]:
        return False
    power_of_two = ranks is None or ranks & (ranks - 1) == 0
    return power_of_two or not (alg == Algorithm.HALVING_DOUBLING and op in (CollectiveOp.REDUCE_SCATTER,
                                                                             CollectiveOp.ALL_GATHER))


def build_schedule(
    op: str,
    algorithm: str,
    size_bytes: float,
    group: Group,
    *,
    intra: str = "ring",
    inter: str = "ring",
    servers: Sequence[int] = (),
    server_delay_s: float = 0.0,
    chunks: int | None = None,
    channels: int | None = None,
    node_orders: Sequence[tuple[int, ...]] | None = None,
) -> Schedule:
    """The schedule of `op` with `algorithm` over `group`; ValueError for unknown or absent pairs."""
    try:
        op = CollectiveOp(op)
    except ValueError:
        raise ValueError(f"unknown collective op {op!r}; expected one of {[str(o) for o in CollectiveOp]}") from None
    try:
        alg = Algorithm(algorithm)
    except ValueError:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {[str(a) for a in Algorithm]}") from None
    if op not in SUPPORTED_OPS[alg]:
        raise ValueError(f"{alg} has no {op} schedule; it offers {sorted(str(o) for o in SUPPORTED_OPS[alg])}")
    if not size_bytes >= 0:
        raise ValueError(f"size_bytes must be >= 0, got {size_bytes!r}")
    if len(set(group.ranks)) != len(group.ranks):
        raise ValueError("group ranks must be distinct")
    n_channels = effective_channels(group, channels)
    if alg == Algorithm.PS:
        chains = ps_chains(size_bytes, group, servers, server_delay_s)
    elif alg == Algorithm.HIERARCHICAL:
        chains = (hierarchical_chain(size_bytes, group, intra, inter, chunks),)
    elif alg == Algorithm.RING and op in CHANNEL_OPS and (n_channels > 1 or (node_orders and len(group.nodes) == 1)):
        chains = channel_chains(op, size_bytes, group, channels, node_orders)
    elif alg == Algorithm.TORUS2D:
        chains = torus2d_chains(size_bytes, group, chunks)
    elif alg == Algorithm.TORUS3D:
        chains = torus3d_chains(size_bytes, group, chunks=chunks, op=op)
    else:
        chains = (flat_chain(str(alg), op, size_bytes, group.ranks, chunks),)
    return Schedule(op=op, algorithm=str(alg), size_bytes=float(size_bytes), chains=chains)
