"""Shortest-path routing with ECMP: equal-cost paths are chosen per flow by a deterministic hash."""
from __future__ import annotations

import zlib

import networkx as nx

from simdist.topology.graph import Topology


class Router:
    """Routes endpoint-to-endpoint flows onto directed link ids; paths are cached per vertex pair."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self._paths: dict[tuple[str, str], list[tuple[int, ...]]] = {}

    def equal_cost_paths(self, src_vertex: str, dst_vertex: str) -> list[tuple[int, ...]]:
        """All shortest (fewest-hop) paths between two vertices, as directed link id tuples."""
        key = (src_vertex, dst_vertex)
        if key not in self._paths:
            index = self.topology.links.index
            paths = sorted(nx.all_shortest_paths(self.topology.graph, src_vertex, dst_vertex))
            self._paths[key] = [tuple(index[(p[i], p[i + 1])] for i in range(len(p) - 1)) for p in paths]
        return self._paths[key]

    def path(self, src: int, dst: int, flow_key: int = 0) -> tuple[int, ...]:
        """Directed link ids from endpoint `src` to endpoint `dst`; ECMP picks by hash of (src, dst, key)."""
        if src == dst:
            return ()
        eps = self.topology.endpoints
        paths = self.equal_cost_paths(eps[src], eps[dst])
        if len(paths) == 1:
            return paths[0]
        h = zlib.crc32(f"{src}:{dst}:{flow_key}".encode())
        return paths[h % len(paths)]
