"""Flows walked hop by hop over least-cost paths: at each branching hop the next vertex is picked by a
stable hash of (src, dst, flow_key, vertex) (ecmp, spray), or at switches by successive digits of the
destination port (dmodk); between machines through the rail NICs a flow is pinned to (waypoints).
Every answer is kept: the rail waypoints per vertex pair, the next hops per pair and vertex (its DAG).
"""
from __future__ import annotations

from simdist.errors import InfeasibleError
from simdist.topology.distances import Distances
from simdist.topology.routegraph import RouteGraph
from simdist.topology.search import INF, flow_hash, mix64


class Walker:
    """Least-cost walks over `graph` with the distances and next hops of `dist`."""

    def __init__(self, graph: RouteGraph, dist: Distances) -> None:
        self._dist = dist
        self._machine, self._vid, self._port = graph.machine, graph.vid, graph.port
        self._rail, self._planes = graph.rail, graph.planes
        self._links = graph.topology.links
        # memos
        self._via: dict[tuple, tuple[str, ...]] = {}
        self._dag: dict[tuple[str, str], dict[str, tuple[str, ...]]] = {}
        self._paths: dict[tuple[str, str], list[tuple[int, ...]]] = {}
        self._mhash: dict[tuple[int, int, int], int] = {}  # (src node, dst node, key) -> flow hash

    def machine_pair_hash(self, src_node: int, dst_node: int, flow_key: int) -> int:
        """A railed GPU's flow hash: one per (source machine, destination machine, key), whichever rail."""
        key = (src_node, dst_node, flow_key)
        h = self._mhash.get(key)
        if h is None:
            h = self._mhash[key] = flow_hash(-1 - src_node, -1 - dst_node, flow_key)
        return h

    def waypoints(self, src_vertex: str, dst_vertex: str) -> tuple[str, ...]:
        """The rail NICs a flow between two machines is pinned to: the source's rail NIC, then the
        destination's, each kept only when it lies on a least-cost path (so paths stay least-cost)."""
        key = (src_vertex, dst_vertex)
        hit = self._via.get(key)
        if hit is not None:
            return hit
        hit = self._via[key] = self._least_cost_via(src_vertex, dst_vertex, self._rail.get(src_vertex),
                                                    self._rail.get(dst_vertex))
        return hit

    def _least_cost_via(self, src_vertex: str, dst_vertex: str, src_rail: "str | None",
                        dst_rail: "str | None") -> tuple[str, ...]:
        """The NICs `src_rail`, then `dst_rail`, each kept only when it lies on a least-cost path."""
        via: list[str] = []
        if src_vertex != dst_vertex and self._machine[dst_vertex] != self._machine[src_vertex]:
            here = src_vertex
            total = None  # distance(here, dst_vertex), carried over when `here` moves to a rail
            for rail in (src_rail, dst_rail):
                if rail is not None and rail != here:
                    if total is None:
                        total = self._dist.distance(here, dst_vertex)
                    if total < INF:
                        rest = self._dist.distance(rail, dst_vertex)
                        if self._dist.distance(here, rail) + rest == total:
                            via.append(rail)
                            here, total = rail, rest
        return tuple(via)

    def plane_waypoints(self, src_vertex: str, dst_vertex: str, flow_key: int) -> tuple[str, ...]:
        """waypoints for flow key `flow_key` of a connection whose GPU owns several fabric planes: it leaves
        (enters) through plane flow_key mod its planes, so a connection split over `planes` keys uses each."""
        rails = []
        for v in (src_vertex, dst_vertex):
            planes = self._planes.get(v)
            rails.append(planes[flow_key % len(planes)] if planes else self._rail.get(v))
        key = (src_vertex, dst_vertex, rails[0], rails[1])
        hit = self._via.get(key)
        if hit is None:
            hit = self._via[key] = self._least_cost_via(src_vertex, dst_vertex, rails[0], rails[1])
        return hit

    def vertex_path(self, src_vertex: str, dst_vertex: str, flow_hash_: int = 0, offset: int = 0) -> list[str]:
        """One least-cost vertex path; at each branching hop the next vertex is picked by `flow_hash_`.

        Between machines the path goes through the rail NICs of `waypoints` (NIC affinity); `offset`
        shifts every ECMP pick (rails of one machine pair apart)."""
        path = [src_vertex]
        via = self.waypoints(src_vertex, dst_vertex)
        for v in via + (dst_vertex,):
            path.extend(self.walk(path[-1], v, flow_hash_, offset, reachable=bool(via))[1:])
        return path

    def links(self, src_vertex: str, dst_vertex: str, flow_hash_: int, offset: int,
               via: "tuple[str, ...] | None" = None) -> list[int]:
        """vertex_path as directed link ids; a stretch inside one machine without an equal-cost branch
        (GPU to its rail NIC) is its machine template's fixed path, which the walk would follow too."""
        index = self._links.index
        machine = self._machine
        out: list[int] = []
        here = src_vertex
        if via is None:
            via = self.waypoints(src_vertex, dst_vertex)
        for v in via + (dst_vertex,):
            m = machine[here]
            fixed = self._dist.fixed_local(m, here, v) if m is not None and m == machine[v] else None
            if fixed is not None:
                out.extend(fixed)
            else:
                p = self.walk(here, v, flow_hash_, offset, reachable=bool(via))
                out.extend(index[(p[i], p[i + 1])] for i in range(len(p) - 1))
            here = v
        return out

    def walk(self, src_vertex: str, dst_vertex: str, flow_hash_: int, offset: int = 0,
              reachable: bool = False) -> list[str]:
        """One least-cost vertex path by per-hop hashing; `reachable`: the caller checked the distance."""
        path = [src_vertex]
        if src_vertex == dst_vertex:
            return path
        dag = self._dag.get((src_vertex, dst_vertex))
        if dag is None:
            if not reachable and self._dist.distance(src_vertex, dst_vertex) == INF:
                raise InfeasibleError(f"no route from {src_vertex} to {dst_vertex}")
            dag = self._dag[(src_vertex, dst_vertex)] = {}
        v = src_vertex
        if self._port:  # dmodk: at switches, successive digits of the destination port pick the next hop
            digits = self._port.get(dst_vertex, self._vid[dst_vertex])
            machine = self._machine
            while v != dst_vertex:
                hops = dag.get(v) or self._hops(dag, src_vertex, dst_vertex, v)
                if len(hops) == 1:
                    v = hops[0]
                elif machine[v] is None:
                    v = hops[digits % len(hops)]
                    digits //= len(hops)
                else:
                    v = hops[(mix64(flow_hash_ ^ self._vid[v]) + offset) % len(hops)]
                path.append(v)
            return path
        while v != dst_vertex:
            hops = dag.get(v) or self._hops(dag, src_vertex, dst_vertex, v)
            v = hops[0] if len(hops) == 1 else hops[(mix64(flow_hash_ ^ self._vid[v]) + offset) % len(hops)]
            path.append(v)
        return path

    def _hops(self, dag: dict, s: str, t: str, v: str) -> tuple[str, ...]:
        hops = dag.get(v)
        if hops is None:
            hops = dag[v] = self._dist.next_hops(s, t, v)
            if not hops:
                raise InfeasibleError(f"no route from {s} to {t} (stuck at {v})")
        return hops

    def equal_cost_paths(self, src_vertex: str, dst_vertex: str) -> list[tuple[int, ...]]:
        """All least-cost paths between two vertices, as directed link id tuples, sorted by vertex names.

        Enumerates every path: meant for small cases and tests; flows use `path` (per-hop hashing).
        """
        key = (src_vertex, dst_vertex)
        if key not in self._paths:
            if src_vertex == dst_vertex:
                self._paths[key] = [()]
                return self._paths[key]
            self.walk(src_vertex, dst_vertex, 0)  # checks reachability, creates the DAG
            dag = self._dag[key]
            found: list[list[str]] = []
            stack = [[src_vertex]]
            while stack:
                p = stack.pop()
                if p[-1] == dst_vertex:
                    found.append(p)
                    continue
                stack.extend(p + [w] for w in self._hops(dag, src_vertex, dst_vertex, p[-1]))
            index = self._links.index
            self._paths[key] = [tuple(index[(p[i], p[i + 1])] for i in range(len(p) - 1)) for p in sorted(found)]
        return self._paths[key]
