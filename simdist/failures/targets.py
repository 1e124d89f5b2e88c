"""What the failure models need to know about a built cluster: node count, NICs, switches, leaves, links.

Names are the topology's own vertex names (`simdist topo --out` draws them): switches 'leaf0',
'spine1', 'agg0.1', 'core3', 'switch'; a link is 'U-V' for an edge between vertices U and V (either
order), e.g. 'leaf0-spine1' or 'node3/nic0-leaf0'.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from simdist.topology.graph import Topology


def _node_index(vertex: str) -> int | None:
    """3 for 'node3/nic0'; None for fabric vertices and server hosts."""
    if "/" not in vertex:
        return None
    prefix = vertex.split("/", 1)[0]
    return int(prefix[4:]) if prefix.startswith("node") and prefix[4:].isdigit() else None


class BlockIndex:
    """The topology graph cut into *blocks*: the connected pieces left when every switch-to-switch edge is
    removed (a leaf with its machines, a spine alone). A fault that kills only switch-to-switch edges
    changes connectivity between blocks only, so it is a union-find over the live switch-to-switch edges
    (thousands of operations) instead of a search of the whole graph (tens of thousands of vertices)."""

    def __init__(self, edges) -> None:
        import networkx as nx

        self.graph = nx.Graph()
        self.graph.add_edges_from(edges)
        at: dict[str, list] = {}
        for e in sorted(edges):
            for v in e:
                if "/" not in v:
                    at.setdefault(v, []).append(e)
        self.at_switch = {k: tuple(v) for k, v in at.items()}
        fabric = [e for e in edges if "/" not in e[0] and "/" not in e[1]]
        rest = nx.Graph()
        rest.add_nodes_from(self.graph)
        rest.add_edges_from(e for e in edges if "/" in e[0] or "/" in e[1])
        self.block: dict[str, int] = {}
        for i, c in enumerate(nx.connected_components(rest)):
            self.block.update((v, i) for v in c)
        self.blocks = i + 1 if self.block else 0
        node_blocks: dict[int, set[int]] = {}
        for v, b in self.block.items():
            n = _node_index(v)
            if n is not None:
                node_blocks.setdefault(n, set()).add(b)
        self.node_blocks = node_blocks
        self.fabric = sorted((tuple(sorted(e)), self.block[e[0]], self.block[e[1]]) for e in fabric)

    def node_components(self, dead) -> dict[int, set[int]]:
        """Worker node -> the components its vertices lie in, with `dead` switch-to-switch edges down."""
        gone = {tuple(sorted(e)) for e in dead}
        parent = list(range(self.blocks))

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for e, a, b in self.fabric:
            if e not in gone:
                ra, rb = find(a), find(b)
                if ra != rb:
                    parent[ra] = rb
        return {n: {find(b) for b in bs} for n, bs in self.node_blocks.items()}

    def node_components_slow(self, dead) -> dict[int, set[int]]:
        """The same for any dead edges (e.g. a NIC cable): a search of the whole graph."""
        import networkx as nx

        g = self.graph
        gone = [e for e in {tuple(sorted(e)) for e in dead} if g.has_edge(*e)]
        g.remove_edges_from(gone)  # put back below
        try:
            comp: dict[str, int] = {}
            for i, c in enumerate(nx.connected_components(g)):
                comp.update((v, i) for v in c)
        finally:
            g.add_edges_from(gone)
        out: dict[int, set[int]] = {}
        for v, i in comp.items():
            n = _node_index(v)
            if n is not None:
                out.setdefault(n, set()).add(i)
        return out


@dataclass(frozen=True)
class FailureTargets:
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
        return self.index.at_switch.get(switch, ())

    def cut_off(self, dead: "tuple[tuple[str, str], ...]") -> tuple[int, ...]:
        """The worker nodes the fabric no longer connects to the rest when the `dead` edges are down: the
        nodes with a vertex outside the component that holds the most whole nodes (ties: the lowest node).
        Empty when every rank still reaches every other (the flow network reroutes around the dead edges)."""
        index = self.index
        if all("/" not in u and "/" not in v for u, v in dead):
            node_comps = index.node_components(dead)
        else:
            node_comps = index.node_components_slow(dead)
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

    @cached_property
    def index(self) -> BlockIndex:
        """The graph of `edges` and its blocks, built on first use and kept by these facts."""
        return BlockIndex(self.edges)

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


def failure_targets(topology: Topology) -> FailureTargets:
    """The FailureTargets of a built topology (worker nodes only; server hosts are not failure targets here)."""
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
    return FailureTargets(nodes=workers, gpus=topology.num_gpus,
                       node_of_gpu=tuple(topology.endpoint_node[:topology.num_gpus]), nics=len(nic_node),
                       nic_node=tuple(sorted(nic_node)),
                       switches=switches, leaves={k: tuple(sorted(s)) for k, s in sorted(leaves.items())},
                       fabric_links=tuple(sorted(fabric_links)), edges=frozenset((u, v) for u, v in g.edges()))
