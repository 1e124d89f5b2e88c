"""The built topology: an undirected graph whose every edge is a full-duplex link.

Vertices are strings ("node3/gpu5", "node3/nvswitch", "node3/nic0", "leaf0", "spine1", ...).
Every edge carries `link` (a LinkSpec) and `kind` (nvlink | pcie | socket | nic | fabric).
Endpoints are what collectives address: the GPUs in global order, then dedicated server hosts.
`links` numbers each direction of each edge, so flows can be routed onto directed link ids.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from simdist.hardware.specs import LinkSpec
from simdist.topology.plain import LinkGraph

if TYPE_CHECKING:
    import networkx as nx

# what a Topology's graph may be: the builders' LinkGraph, or an nx.Graph built by hand (both read alike)
AnyGraph = Union[LinkGraph, "nx.Graph"]


@dataclass(frozen=True, eq=False)
class DirectedLinks:
    """Both directions of every edge, numbered: arrays indexed by directed link id."""

    ends: tuple[tuple[str, str], ...]
    capacity_Bps: np.ndarray  # effective bandwidth (line rate x efficiency)
    latency_s: np.ndarray
    index: dict[tuple[str, str], int]
    # per directed link, the most one flow achieves on it (LinkSpec.flow_cap_Bps, inf where none);
    # None when no link of the graph has a per-flow cap (the flow model then skips the check)
    flow_cap_Bps: np.ndarray | None = None
    # per directed link, the most one TCP stream achieves on it (LinkSpec.stream_cap_Bps, inf where none);
    # None when no link has one
    stream_cap_Bps: np.ndarray | None = None

    def member_caps(self, streams: int = 1) -> np.ndarray | None:
        """Per directed link, the most one connection of `streams` streams moves: min(flow cap, streams x
        stream cap); None when the graph limits neither."""
        if self.stream_cap_Bps is None:
            return self.flow_cap_Bps
        cache = self.__dict__.setdefault("_member_caps", {})
        caps = cache.get(streams)
        if caps is None:
            caps = self.stream_cap_Bps * max(1, int(streams))
            if self.flow_cap_Bps is not None:
                caps = np.minimum(caps, self.flow_cap_Bps)
            cache[streams] = caps
        return caps

    def name(self, link_id: int) -> str:
        u, v = self.ends[link_id]
        return f"{u}->{v}"

    @classmethod
    def from_graph(cls, graph: AnyGraph) -> "DirectedLinks":
        """Edges in graph.edges() order (each node's neighbours in insertion order, an edge once),
        both directions of each numbered consecutively; a link class's figures are read once."""
        ends: list[tuple[str, str]] = []
        rows: list[tuple[float, float, float, float]] = []  # per edge: capacity, latency, flow cap, stream cap
        figures: dict[tuple[int, int], tuple[float, float, float, float]] = {}  # (id(link), multiplicity) -> row
        seen: set = set()
        adj = getattr(graph, "_adj", None) or graph.adj  # the graph's own dict of dicts: no view per row
        for u, nbrs in adj.items():
            for v, data in nbrs.items():
                if v in seen:
                    continue
                link: LinkSpec = data["link"]
                key = (id(link), data.get("multiplicity", 1))
                row = figures.get(key)
                if row is None:
                    row = figures[key] = (link.effective_Bps * key[1], link.latency_s,
                                          link.flow_cap_Bps or np.inf, link.stream_cap_Bps or np.inf)
                ends.append((u, v))
                ends.append((v, u))
                rows.append(row)
            seen.add(u)
        columns = np.array(rows, dtype=float).reshape(-1, 4).T
        cap, lat, flow_cap, stream_cap = (np.repeat(c, 2) for c in columns)  # once per direction, each its own array
        return cls(tuple(ends), cap, lat, dict(zip(ends, range(len(ends)))),
                   flow_cap if np.isfinite(flow_cap).any() else None,
                   stream_cap if np.isfinite(stream_cap).any() else None)


@dataclass
class SharedRoutes:
    """What every network model on one topology shares, built on first use and kept as long as the
    topology: its default Router (topology.routing.shared_router) and the steps compiled on its routes
    (network.steps.shared_steps). Typed loosely: both classes live in modules that import this one."""

    router: Any = None
    steps: Any = None


@dataclass(frozen=True, eq=False)
class Topology:
    """A whole cluster as a graph, plus the endpoint numbering collectives use; `shared` holds the routes
    and compiled steps every network model on it reuses (a sweep over one cluster routes each step once)."""

    graph: AnyGraph  # LinkGraph from the builders; an nx.Graph built by hand works alike
    endpoints: tuple[str, ...]  # vertex of each endpoint id: GPUs (global order), then server hosts
    endpoint_node: tuple[int, ...]  # node (machine) index of each endpoint
    num_gpus: int
    description: str = ""
    links: DirectedLinks = field(init=False)
    shared: SharedRoutes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "links", DirectedLinks.from_graph(self.graph))
        object.__setattr__(self, "shared", SharedRoutes())

    @property
    def num_nodes(self) -> int:
        return max(self.endpoint_node) + 1 if self.endpoint_node else 0
