"""NVLS all-reduce: the reduction and the multicast happen inside a third-generation NVSwitch.

Each GPU owns 1/n of the buffer: it asks the switch for the reduced block (multimem.ld_reduce: the
switch reads that block from ALL n GPUs bound to the multicast object, the requester's own copy
included, and adds) and stores the result once (multimem.st: the switch writes it to all n GPUs, the
writer's own memory included). So every GPU's link to the switch carries, per direction, its n
contributions out (n x S/n = S) plus its one result store (S/n) out, and the n - 1 others' stores plus its
own reduced block in: (n + 1)/n x S each way. NCCL pipelines the reduce and the multicast phases (tuning.cc
counts NVLS all-reduce bus bandwidth twice); nccl-tests' busbw is then 2 (n - 1)/(n + 1) x the link's
achieved rate: on 8 H100 (450 GB/s x 0.80 NVLink payload x 0.85 nvlsEfficiency = 306 GB/s) 476 GB/s, which is
what is measured there (NVIDIA/nccl #1442: "a wire bw of 480 GB/s" on p5.48xlarge; the maintainer: 370 GB/s per
direction at app level, "a 30% improvement using NVLink SHARP"). A schedule counting only the (n - 1)/n S a
GPU exchanges with the OTHER GPUs would predict 2 x 306 = 612 GB/s.

Endpoints address GPUs, not the switch, and a transfer cannot go from a GPU to itself, so the schedule is one
step in which every GPU sends every other a block of (n + 1)/(n (n - 1)) x S: that puts exactly the in-switch
pattern's (n + 1)/n S per direction on each GPU's link (the extra is the self traffic, spread over the
n - 1 transfers); no GPU reduces anything (the switch does).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from simdist.collectives._steps import Chain
from simdist.collectives.collnet import _network
from simdist.collectives.node_tree import _chains
from simdist.collectives.schedule import Group, Step, Transfer, TransferArray
from simdist.collectives.tree import double_tree


def nvls_link_bytes(size_bytes: float, n: int) -> float:
    """Bytes each GPU's link to the switch carries per direction in an NVLS all-reduce of `size_bytes`
    over n GPUs: (n + 1)/n x S (its contributions and result store out, the results and its reduced block in)."""
    return size_bytes * (n + 1) / n if n > 1 else 0.0


def nvls_all_reduce(size_bytes: float, ranks: Sequence[int]) -> Chain:
    """All-reduce of `size_bytes` per rank through the node's NVSwitch."""
    n = len(ranks)
    if n <= 1:
        return ()
    block = nvls_link_bytes(size_bytes, n) / (n - 1)
    return (Step(tuple(Transfer(a, b, block) for a in ranks for b in ranks if a != b),
                 label="nvls reduce+multicast"),)


def _switch_pattern(nodes: Sequence[Sequence[int]], size_bytes: float, efficiency: float) -> tuple[np.ndarray, ...]:
    """The NVLS pattern inside every node, (n + 1)/n S per GPU link and direction over NVLS's `efficiency`, as
    one transfer from each GPU to the next: every GPU hangs off the one switch, so that loads each link as the
    pairwise blocks of nvls_all_reduce do, with g transfers a node instead of g (g - 1)."""
    local = np.asarray(nodes, dtype=np.int64)  # (nodes, g)
    src, dst = local.ravel(), np.roll(local, -1, axis=1).ravel()
    return src, dst, np.full(src.size, nvls_link_bytes(size_bytes, local.shape[1]) / efficiency)


def _check_nodes(group: Group, name: str) -> int:
    """GPUs a node; ValueError unless the group spans several nodes of the same size (at least 2 GPUs)."""
    if len(group.nodes) < 2:
        raise ValueError(f"{name} runs between nodes; on one node NCCL runs NVLS")
    sizes = {len(n) for n in group.nodes}
    if len(sizes) != 1 or min(sizes) < 2:
        raise ValueError(f"{name} needs the same number (at least 2) of GPUs on every node, got {sorted(sizes)}")
    return len(group.nodes[0])


# NCCL's NVLSTree latency (tuning.cc, Simple): the NVLS hop inside the node once, the network hop twice per
# level of the tree over nodes (up and down), 2 log2(nodes) x 20.9 us
NVLS_TREE_NET_LATENCY_S = 20.9e-6


def nvls_tree_nic_bytes(size_bytes: float, nics: int, n_nodes: int) -> float:
    """Bytes each NIC sends (and receives) in an NVLSTree all-reduce of `size_bytes` with `nics` heads a node:
    S/k on two nodes (each tree's edge carries its half up and down once), 2 S/k on more (the double binary
    tree's interior node forwards two children's halves up and back down, as node_tree.py)."""
    k = max(1, nics)
    return size_bytes / k if n_nodes <= 2 else 2 * size_bytes / k


def nvls_tree_all_reduce(size_bytes: float, group: Group, heads: int, efficiency: float = 1.0) -> Chain:
    """NCCL's NVLSTree all-reduce (NCCL 2.18 and later, third-generation NVSwitch nodes): inside each node
    the switch reduces each head's 1/k of the buffer and multicasts the result (the NVLS pattern above, every
    GPU link (n + 1)/n S per direction, held to NVLS's `efficiency`); between nodes the k heads (one per NIC,
    the GPU next to NIC c, as node_tree.py's chains) run a double binary tree over the nodes, each tree half
    of the head's 1/k share. All of it is pipelined chunk by chunk, so it is one step whose delay is NCCL's
    tree latency over the nodes (tuning.cc: 2 log2(nodes) network hops)."""
    nodes = group.nodes
    g = _check_nodes(group, "NVLSTree")
    k = max(1, min(int(heads), g))
    intra_src, intra_dst, intra_size = _switch_pattern(nodes, size_bytes, efficiency)
    # between nodes: each head's share, half on each of the two trees, up to the parent and back down
    heads_of = np.asarray([[chain[0] for chain in per_node] for per_node in _chains(group, k)], dtype=np.int64)
    net_src, net_dst = [], []
    for parents in double_tree(len(nodes)):
        child = np.asarray([i for i, p in enumerate(parents) if p >= 0], dtype=np.int64)
        parent = np.asarray([p for p in parents if p >= 0], dtype=np.int64)
        up_src, up_dst = heads_of[:, child].ravel(), heads_of[:, parent].ravel()
        net_src += [up_src, up_dst]
        net_dst += [up_dst, up_src]
    src = np.concatenate([intra_src, *net_src])
    dst = np.concatenate([intra_dst, *net_dst])
    size = np.concatenate([intra_size, np.full(src.size - intra_src.size, size_bytes / k / 2)])
    levels = len(nodes).bit_length() - 1  # tuning.cc log2i(nodes): floor(log2)
    delay = 2 * levels * NVLS_TREE_NET_LATENCY_S
    return (Step(TransferArray(src, dst, size), lockstep=False, delay_s=delay, reduce_bytes=size_bytes / k,
                 label="nvls tree: switch reduce, tree over nodes up+down, switch multicast"),)


# tuning.cc hwLatencies NET for NVLS (Simple): the network part of a multi-node NVLS call (NVLS over CollNet)
NVLS_NET_LATENCY_S = 18e-6


def nvls_collnet_all_reduce(size_bytes: float, group: Group, heads: int, efficiency: float = 1.0) -> Chain:
    """NCCL's multi-node NVLS all-reduce, which needs CollNet (NCCL_COLLNET_ENABLE=1 over SHARP switches;
    tuning.cc disables NVLS on several nodes without it): the switch reduces each head's 1/k of the buffer inside
    the node, the head hands it to the network, whose switches add the nodes' copies and multicast the sum back
    (collnet.py's up-and-down, S/k per NIC and direction on any node count), and the switch multicasts it inside
    the node. One pipelined step; its delay is NCCL's NVLS network latency (18 us)."""
    g = _check_nodes(group, "multi-node NVLS")
    k = max(1, min(int(heads), g))
    intra_src, intra_dst, intra_size = _switch_pattern(group.nodes, size_bytes, efficiency)
    heads_of = [[chain[0] for chain in per_node] for per_node in _chains(group, k)]  # [channel][node]
    net = _network([[heads_of[c][i] for c in range(k)] for i in range(len(group.nodes))], size_bytes / k)
    src = np.concatenate([intra_src, [t.src for t in net]])
    dst = np.concatenate([intra_dst, [t.dst for t in net]])
    size = np.concatenate([intra_size, [t.size_bytes for t in net]])
    return (Step(TransferArray(src, dst, size), lockstep=False, delay_s=NVLS_NET_LATENCY_S, reduce_bytes=0.0,
                 label="nvls over collnet: switch reduce, SHARP up+down, switch multicast"),)
