"""NCCL CollNet all-reduce over SHARP: the InfiniBand switches reduce the nodes' data in-line.

What NCCL does (NVIDIA/nccl src/graph/tuning.cc, src/graph/search.cc, src/enqueue.cc, src/transport/coll_net.cc;
facts, no code): with NCCL_COLLNET_ENABLE=1 and a CollNet net plugin (NVIDIA's nccl-rdma-sharp-plugins over
SHARP-capable switches: Quantum HDR SHARPv2, Quantum-2 NDR SHARPv3), an all-reduce runs inside each node over
NVLink and hands ONE reduced copy per node to the network, where the switches' aggregation trees add the nodes'
copies and multicast the sum back. Each NIC's data therefore goes up once and comes down once: S/k per NIC per
direction for k NICs per node (a ring puts 2 (n - 1)/n x S/k on each), so the inter-node bus bandwidth is about
twice the ring's, held to the NIC rate.

- CollNet Direct (NVSwitch nodes only: tuning.cc disables it where ncclTopoGetNvsCount is 0): every GPU is the
  head of one channel (search.cc: up to NCCL_MAX_DIRECT_ARITY + 1 = 8 heads). The other GPUs send a head their
  1/G of the buffer over NVLink, the head reduces, sends the partial sum to its NIC, receives the network's sum
  and sends it back to the G - 1 others. Per GPU and direction that is 2 (G - 1)/G x S on NVLink and S/G to
  the NIC (S/k per NIC where G/k heads share one).
- CollNet Chain (no NVSwitch): one chain through the node's GPUs per NIC, headed by the GPU next to it;
  partial sums go up the chain, the head's to the network, the result back down the chain.

NCCL's proxy hands the network up to 8 heads' chunks as one collective operation (coll_net.cc
COLLNET_GROUP_NSUBS) and falls back to its point-to-point algorithms where the CollNet connection cannot be
set up. NCCL pipelines all of it chunk by chunk, so the schedule (as node_tree.py's steady step) is one step in which
every link carries its whole share at once. The switch is not an endpoint of a schedule (endpoints are GPUs), so
the up-and-down through the aggregation tree is one transfer per head to the same head on the NEXT node in
group order: each NIC then sends S/k and receives S/k, and a link between switches carries one rail's S/G per
direction where the shift crosses it, which is what each link of a SHARP aggregation tree carries (the tree's
links move the partial sum up and the result down once). The switches' adders are assumed to keep up with the
line rate (SHARPv2/v3 streaming aggregation); SHARP's limits are not modelled: at most 2 streaming-aggregation
flows per switch (HPC-X "NCCL-RDMA-SHARP Plugins": one per HCA rail, with rail-aligned leaf switches), and a
1 GB maximum message per SAT operation (NCCL chunks far below that).

Latency (tuning.cc, Simple only): CollNet Direct 2 (min(1, G - 1) x 3.7 us + (G - 1) x 0.4 us) + 31 us (hwLatencies
NVLink / NET, plus 0.4 us "arity serialization" per peer); CollNet Chain 2 (G - 1) x 2.8 us + 30 us. No base latency.
With one GPU a node the network term is the tree's 14 us, as tuning.cc does.
The schedule charges that as the step's delay (the links' own latencies come on top, as for every algorithm).
"""
from __future__ import annotations

from typing import Sequence

from simdist.collectives._steps import Chain
from simdist.collectives.node_tree import _chains
from simdist.collectives.protocols import HopKind
from simdist.collectives.schedule import Group, Step, Transfer

_US = 1e-6
# tuning.cc hwLatencies, Simple (us): intra-node hop and network, per CollNet algorithm
HW_LATENCY_S = {
    "collnet_direct": {HopKind.NVLINK: 3.7 * _US, HopKind.PCI: 3.7 * _US, HopKind.NET: 31.0 * _US},
    "collnet_chain": {HopKind.NVLINK: 2.8 * _US, HopKind.PCI: 2.8 * _US, HopKind.NET: 30.0 * _US},
}
TREE_NET_LATENCY_S = 14.0 * _US  # tuning.cc hwLatencies NET, tree, Simple: CollNet's with one GPU a node
DIRECT_ARITY_S = 0.4 * _US  # tuning.cc: "0.4 us arity serialization latency" per local peer
ALGORITHMS = tuple(HW_LATENCY_S)


def collnet_latency_s(algorithm: str, ppn: int, intra: HopKind = HopKind.NVLINK) -> float:
    """NCCL's latency of one CollNet all-reduce with `ppn` GPUs per node (tuning.cc)."""
    lat = HW_LATENCY_S[algorithm]
    net = TREE_NET_LATENCY_S if ppn == 1 else lat[HopKind.NET]  # "with ppn=1 ... use the Tree network latency"
    if algorithm == "collnet_direct":
        return 2 * (min(1, ppn - 1) * lat[intra] + (ppn - 1) * DIRECT_ARITY_S) + net
    return 2 * (ppn - 1) * lat[intra] + net


def collnet_nic_bytes(size_bytes: float, nics: int) -> float:
    """Bytes each NIC carries per direction in a CollNet all-reduce of `size_bytes`: S/k (up once, down once)."""
    return size_bytes / max(1, nics)


def _check(group: Group) -> None:
    if len(group.nodes) < 2:
        raise ValueError("CollNet runs between nodes; a one-node group has no network to reduce in")
    sizes = {len(n) for n in group.nodes}
    if len(sizes) != 1:
        raise ValueError(f"CollNet needs the same number of GPUs on every node, got {sorted(sizes)}")


def _network(heads: list[list[int]], share: float) -> list[Transfer]:
    """Every head's share up to the aggregation switch and the sum back: head h of node i to head h of node
    i + 1 (see the module docstring)."""
    n = len(heads)
    return [Transfer(heads[i][h], heads[(i + 1) % n][h], share) for i in range(n) for h in range(len(heads[i]))]


def collnet_direct_all_reduce(size_bytes: float, group: Group, intra: HopKind = HopKind.NVLINK) -> Chain:
    """CollNet Direct all-reduce of `size_bytes` per rank: every GPU heads 1/G of the buffer."""
    _check(group)
    g = len(group.nodes[0])
    share = size_bytes / g
    local = [Transfer(a, b, share) for node in group.nodes for a in node for b in node if a != b]
    back = [Transfer(t.dst, t.src, share) for t in local]  # each head returns the sum to its peers
    net = _network([list(node) for node in group.nodes], share)
    delay = collnet_latency_s("collnet_direct", g, intra)
    return (Step(tuple(local + net + back), lockstep=False, delay_s=delay, reduce_bytes=share * (g - 1),
                 label="collnet direct: scatter to heads, SHARP up+down, heads broadcast"),)


def collnet_chain_all_reduce(size_bytes: float, group: Group, nics: int, intra: HopKind = HopKind.NVLINK,
                             node_orders: Sequence[tuple[int, ...]] | None = None) -> Chain:
    """CollNet Chain all-reduce of `size_bytes` per rank: one chain per NIC (at most one per GPU), each the ring
    path the node's graph gives that channel (`node_orders`, node_rings.py) or the node's ranks rotated to start
    at NIC c's GPU, as node_tree.py's chains."""
    _check(group)
    g = len(group.nodes[0])
    channels = max(1, min(int(nics), g))
    share = size_bytes / channels
    up: list[Transfer] = []
    heads: list[list[int]] = [[] for _ in group.nodes]
    for per_node in _chains(group, channels, node_orders):
        for i, chain in enumerate(per_node):
            heads[i].append(chain[0])
            up += [Transfer(chain[j + 1], chain[j], share) for j in range(g - 1)]
    down = [Transfer(t.dst, t.src, share) for t in up]
    delay = collnet_latency_s("collnet_chain", g, intra)
    return (Step(tuple(up + _network(heads, share) + down), lockstep=False, delay_s=delay, reduce_bytes=share,
                 label="collnet chain: reduce up the chain, SHARP up+down, broadcast down"),)
