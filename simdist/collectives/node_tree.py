"""NCCL's double binary tree all-reduce: trees over NODES, a chain inside each node, chunks pipelined.

As NCCL builds it (src/graph/trees.cc, src/graph/connect.cc): the nodes form two binary trees
(tree.double_tree over node indices: tree B mirrors or shifts tree A, so a node interior in one is
a leaf in the other); inside a node the GPUs form a chain whose head connects to the parent and the
child nodes' heads. Channels come in pairs, one on each tree, and pair p's chain starts at the GPU
of NIC p (the rail rotation ring.channel_rings uses), so every NIC carries one channel of each tree:
4 tree edges per NIC (3 where the node is interior, 1 where it is a leaf), 2S/(m B) per NIC for m
NICs of rate B, the same bandwidth term as the ring's 2(n-1)/n S/(m B).

Schedule: the pipeline fill (every hop of the deepest leaf-to-root-to-leaf path but the last, one
chunk each, in order: that is where the latency is paid) and one steady step in which every tree
edge of every channel carries its whole share S/(2P) at once (NCCL keeps 8 chunks in flight per
connection, so the steady state is bandwidth-bound and pays a hop latency once, not per chunk). The fill's chunks are extra bytes on the deepest path's
links (at most two chunks per link), the same approximation as ring.pipelined_chain's fill.
"""
from __future__ import annotations

from typing import Sequence

from simdist.collectives._steps import PIPELINE_CHUNK_BYTES, Chain
from simdist.collectives.schedule import Group, Step, Transfer
from simdist.collectives.tree import depth, double_tree


def tree_pairs(group: Group, pairs: int | None) -> int:
    """Channel pairs used: `pairs` (one per NIC), capped by the fewest ranks on a node; at least 1."""
    if pairs is None:
        return 1
    if int(pairs) != pairs or pairs < 1:
        raise ValueError(f"tree channel pairs must be a positive integer, got {pairs!r}")
    return max(1, min(int(pairs), min(len(n) for n in group.nodes)))


def _chains(group: Group, pairs: int, node_orders: Sequence[tuple[int, ...]] | None = None
            ) -> list[list[tuple[int, ...]]]:
    """For each pair, every node's chain (head first): node_orders[p] (the ring path the node's graph
    gives channel p, node_rings.channel_orders) when given, else the node's ranks rotated so the
    head sits on NIC p's GPU."""
    out = []
    for p in range(pairs):
        per_node = []
        for node in group.nodes:
            k = len(node)
            if node_orders and len(node_orders[p % len(node_orders)]) == k:
                per_node.append(tuple(node[i] for i in node_orders[p % len(node_orders)]))
                continue
            start = -(-p * k // pairs)
            per_node.append(tuple(node[start:] + node[:start]))
        out.append(per_node)
    return out


def _deepest_path(parents: tuple[int, ...]) -> list[int]:
    """Node indices from the deepest leaf up to the root."""
    d = {}

    def dep(r: int) -> int:
        if parents[r] < 0:
            return 0
        if r not in d:
            d[r] = dep(parents[r]) + 1
        return d[r]

    leaf = max(range(len(parents)), key=lambda r: (dep(r), -r))
    path = [leaf]
    while parents[path[-1]] >= 0:
        path.append(parents[path[-1]])
    return path


def node_tree_all_reduce(
    size_bytes: float, group: Group, pairs: int | None = None, chunk_bytes: float = PIPELINE_CHUNK_BYTES,
    node_orders: Sequence[tuple[int, ...]] | None = None,
) -> Chain:
    """All-reduce of `size_bytes` per rank over `group` with NCCL's node-level double binary tree."""
    if group.size <= 1:
        return ()
    n_pairs = tree_pairs(group, pairs)
    share = size_bytes / (2 * n_pairs)
    trees = double_tree(len(group.nodes)) if len(group.nodes) > 1 else ((-1,), (-1,))
    up: list[Transfer] = []
    all_chains = _chains(group, n_pairs, node_orders)
    for chains in all_chains:
        for parents in trees:
            for i, chain in enumerate(chains):
                up += [Transfer(chain[j + 1], chain[j], share) for j in range(len(chain) - 1)]
                if parents[i] >= 0:
                    up.append(Transfer(chain[0], chains[parents[i]][0], share))
    down = [Transfer(t.dst, t.src, t.size_bytes) for t in up]
    # the fill: the deepest path of pair 0 (tail of the deepest leaf node -> its head -> root head), up and back
    chains0 = all_chains[0]
    tree = max(trees, key=depth)
    path_nodes = _deepest_path(tree)
    hops_up: list[tuple[int, int]] = []
    leaf_chain = chains0[path_nodes[0]]
    hops_up += [(leaf_chain[j + 1], leaf_chain[j]) for j in range(len(leaf_chain) - 2, -1, -1)]
    hops_up += [(chains0[a][0], chains0[b][0]) for a, b in zip(path_nodes, path_nodes[1:])]
    hops = hops_up + [(b, a) for a, b in reversed(hops_up)]
    chunk = min(chunk_bytes, share)
    fill = [
        Step((Transfer(a, b, chunk),), reduce_bytes=chunk if i < len(hops_up) else 0.0, label="node tree fill")
        for i, (a, b) in enumerate(hops[:-1])
    ]
    steady = Step(tuple(up + down), reduce_bytes=share, label="node tree reduce+broadcast")
    return tuple(fill) + (steady,)
