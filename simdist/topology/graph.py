"""The built topology: an undirected networkx graph whose every edge is a full-duplex link.

Vertices are strings ("node3/gpu5", "node3/nvswitch", "node3/nic0", "leaf0", "spine1", ...).
Every edge carries `link` (a LinkSpec) and `kind` (nvlink | pcie | socket | nic | fabric).
Endpoints are what collectives address: the GPUs in global order, then dedicated server hosts.
`links` numbers each direction of each edge, so flows can be routed onto directed link ids.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from simdist.hardware.specs import LinkSpec


@dataclass(frozen=True, eq=False)
class DirectedLinks:
    """Both directions of every edge, numbered: arrays indexed by directed link id."""

    ends: tuple[tuple[str, str], ...]
    capacity_Bps: np.ndarray  # effective bandwidth (line rate x efficiency)
    latency_s: np.ndarray
    index: dict[tuple[str, str], int]

    def name(self, link_id: int) -> str:
        u, v = self.ends[link_id]
        return f"{u}->{v}"

    @classmethod
    def from_graph(cls, graph: nx.Graph) -> "DirectedLinks":
        ends: list[tuple[str, str]] = []
        cap: list[float] = []
        lat: list[float] = []
        for u, v, data in graph.edges(data=True):
            link: LinkSpec = data["link"]
            for a, b in ((u, v), (v, u)):
                ends.append((a, b))
                cap.append(link.effective_Bps * data.get("multiplicity", 1))
                lat.append(link.latency_s)
        return cls(tuple(ends), np.array(cap, dtype=float), np.array(lat, dtype=float),
                   {e: i for i, e in enumerate(ends)})


@dataclass(frozen=True, eq=False)
class Topology:
    """A whole cluster as a graph, plus the endpoint numbering collectives use."""

    graph: nx.Graph
    endpoints: tuple[str, ...]  # vertex of each endpoint id: GPUs (global order), then server hosts
    endpoint_node: tuple[int, ...]  # node (machine) index of each endpoint
    num_gpus: int
    description: str = ""
    links: DirectedLinks = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "links", DirectedLinks.from_graph(self.graph))

    @property
    def num_nodes(self) -> int:
        return max(self.endpoint_node) + 1 if self.endpoint_node else 0
