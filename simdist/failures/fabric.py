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

    def switch_edges(self, switch: str) -> tuple[tuple[str, str], ...]:
        """Every edge at `switch` (a switch failure takes all its links down)."""
        return tuple(sorted(e for e in self.edges if switch in e))

    def cut_off(self, dead: "tuple[tuple[str, str], ...]") -> tuple[int, ...]:
        """The worker nodes the fabric no longer connects to the rest when the `dead` edges are down: the
        nodes with a vertex outside the component that holds the most whole nodes (ties: the lowest node).
        Empty when every rank still reaches every other (the flow network reroutes around the dead edges)."""
        import networkx as nx

        gone = {frozenset(e) for e in dead}
        g = nx.Graph()
        g.add_edges_from(e for e in self.edges if frozenset(e) not in gone)
        g.add_nodes_from(v for e in self.edges for v in e)
        comp: dict[str, int] = {}
        for i, c in enumerate(nx.connected_components(g)):
            comp.update((v, i) for v in c)
        node_comps: dict[int, set[int]] = {}
        for v, i in comp.items():
            n = _node_index(v)
            if n is not None:
                node_comps.setdefault(n, set()).add(i)
        if not node_comps:
            return ()
        whole: dict[int, list[int]] = {}
        for n, cs in sorted(node_comps.items()):
            if len(cs) == 1:
                whole.setdefault(next(iter(cs)), []).append(n)
        if not whole:
            return tuple(sorted(node_comps))
        main = max(whole, key=lambda i: (len(whole[i]), -whole[i][0]))
        return tuple(n for n, cs in sorted(node_comps.items()) if cs != {main})

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
