"""Two-level all-reduce: reduce-scatter inside each node, all-reduce across nodes among the ranks
with the same local index (all local indices concurrently), all-gather inside each node.

Every node must hold the same number of ranks (the inter-node groups are "columns" of local index
l). The three phases are built per subgroup and zipped into one chain, so a phase of every node
(or every column) is one step. With intra="tree" there is no tree reduce-scatter, so the classic
leader scheme is used instead: tree reduce to each node's first rank, all-reduce among those
leaders with the inter algorithm, tree broadcast back. The same composition on a 2D grid is the
torus2d algorithm (torus2d.py).
"""
from __future__ import annotations

from simdist.collectives._steps import Chain, merge_parallel
from simdist.collectives.flat import FLAT_BUILDERS, flat_chain
from simdist.collectives.schedule import CollectiveOp, Group

Op = CollectiveOp


def _check(group: Group, intra: str, inter: str) -> None:
    for name, alg in (("intra", intra), ("inter", inter)):
        if alg not in FLAT_BUILDERS:
            raise ValueError(f"hierarchical {name} algorithm {alg!r} unknown; expected one of {sorted(FLAT_BUILDERS)}")
    sizes = {len(node) for node in group.nodes}
    if len(sizes) > 1:
        raise ValueError(f"hierarchical needs the same number of ranks on every node, got node sizes {sorted(sizes)}")


def hierarchical_chain(
    size_bytes: float, group: Group, intra: str = "ring", inter: str = "ring", chunks: int | None = None
) -> Chain:
    """All-reduce of `size_bytes` per rank over `group`, two-level."""
    _check(group, intra, inter)
    if group.size <= 1:
        return ()
    nodes = group.nodes
    per_node = len(nodes[0])
    if intra == "tree":
        leaders = tuple(node[0] for node in nodes)
        return (
            merge_parallel([flat_chain("tree", Op.REDUCE, size_bytes, node, chunks) for node in nodes])
            + flat_chain(inter, Op.ALL_REDUCE, size_bytes, leaders, chunks)
            + merge_parallel([flat_chain("tree", Op.BROADCAST, size_bytes, node, chunks) for node in nodes])
        )
    shard = size_bytes / per_node
    columns = [tuple(node[l] for node in nodes) for l in range(per_node)]
    return (
        merge_parallel([flat_chain(intra, Op.REDUCE_SCATTER, size_bytes, node, chunks) for node in nodes])
        + merge_parallel([flat_chain(inter, Op.ALL_REDUCE, shard, col, chunks) for col in columns])
        + merge_parallel([flat_chain(intra, Op.ALL_GATHER, size_bytes, node, chunks) for node in nodes])
    )
