"""What the failure models need to know about a built cluster: node count, NICs, switches, leaves, links.

Names are the topology's own vertex names (`simdist topo --out` draws them): switches 'leaf0',
'spine1', 'agg0.1', 'core3', 'switch'; a link is 'U-V' for an edge between vertices U and V (either
order), e.g. 'leaf0-spine1' or 'node3/nic0-leaf0'.
"""
from __future__ import annotations

from dataclasses import dataclass

from simdist.topology.graph import Topology


def _node_index(vertex: str) -> int | None:
    """3 for 'node3/nic0'; None for fabric vertices and server hosts."""
    if "/" not in vertex:
        return None
    prefix = vertex.split("/", 1)[0]
    return int(prefix[4:]) if prefix.startswith("node") and prefix[4:].isdigit() else None


@dataclass(frozen=True)
class FabricFacts:
    """Counts and names of the parts that can fail."""

    nodes: int
    gpus: int
    node_of_gpu: tuple[int, ...]
    nics: int
    nic_node: tuple[int, ...]  # the node of each NIC
    switches: tuple[str, ...]
    leaves: dict[str, tuple[int, ...]]  # switch -> the nodes cabled to it directly (a rack)
    fabric_links: tuple[str, ...]  # switch-to-switch links, 'U-V'
    edges: frozenset[tuple[str, str]]

    def link_ends(self, name: str) -> tuple[str, str] | None:
        """The edge 'U-V' names (either order), or None."""
        for i in range(len(name)):
            if name[i] != "-":
                continue
            u, v = name[:i], name[i + 1:]
            if (u, v) in self.edges:
                return u, v
            if (v, u) in self.edges:
                return v, u
        return None


def fabric_facts(topology: Topology) -> FabricFacts:
    """The FabricFacts of a built topology (worker nodes only; server hosts are not failure targets here)."""
    g = topology.graph
    switches = tuple(sorted(v for v in g if "/" not in v))
    leaves: dict[str, set[int]] = {}
    nic_node: list[int] = []
    fabric_links = []
    for u, v, data in g.edges(data=True):
        nu, nv = _node_index(u), _node_index(v)
        if data.get("kind") == "nic" and (nu is None) != (nv is None):
            sw, node = (v, nu) if nu is not None else (u, nv)
            nic_node.append(node)
            if "/" not in sw:
                leaves.setdefault(sw, set()).add(node)
        elif nu is None and nv is None and "/" not in u and "/" not in v:
            fabric_links.append(f"{u}-{v}")
    workers = int(g.graph.get("workers", topology.num_nodes))
    return FabricFacts(nodes=workers, gpus=topology.num_gpus,
                       node_of_gpu=tuple(topology.endpoint_node[:topology.num_gpus]), nics=len(nic_node),
                       nic_node=tuple(sorted(nic_node)),
                       switches=switches, leaves={k: tuple(sorted(s)) for k, s in sorted(leaves.items())},
                       fabric_links=tuple(sorted(fabric_links)), edges=frozenset((u, v) for u, v in g.edges()))
