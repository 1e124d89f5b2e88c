"""Exact core distances of a uniform-cost core graph from its twin classes, instead of one
breadth-first search per exit vertex.

Two vertices with the same neighbour set ("false twins": every leaf of a pod, every core switch of
one group, all leaves and all spines of a two-level fat tree) are at the same distance from every
other vertex, since every path from one starts with a neighbour the other shares; two twins are
never adjacent (each would be its own neighbour), so they are two hops apart when they have any
neighbour. Distances therefore come from a breadth-first search on the quotient graph (one vertex
per class, an edge where members are adjacent), one search per class: on a three-level fat tree of
131,072 GPUs that is 32 searches over ~2,000 class edges instead of 1,024 searches over ~64,000
edges, and the answers are the same integers a search on the full graph gives (tested).
"""
from __future__ import annotations

import math
from typing import Mapping

from simdist.topology.search import bfs

INF = math.inf


class TwinMetric:
    """Hop distances (x the uniform edge cost `step`) over the twin-class quotient of `adj`."""

    def __init__(self, adj: Mapping[str, Mapping[str, int]], step: int) -> None:
        self.step = step
        classes: dict[frozenset, int] = {}
        self.cls: dict[str, int] = {}
        members: list[list[str]] = []
        for v, nbrs in adj.items():
            key = frozenset(nbrs)
            c = classes.get(key)
            if c is None:
                c = classes[key] = len(members)
                members.append([])
            self.cls[v] = c
            members[c].append(v)
        self.has_neighbours = [bool(adj[m[0]]) for m in members]
        self.qadj: list[tuple[int, ...]] = []
        for m in members:
            self.qadj.append(tuple(sorted({self.cls[w] for w in adj[m[0]]})))
        self._rows: dict[int, dict[int, int]] = {}

    def _row(self, c: int) -> dict[int, int]:
        """Class hop distances from class c (a breadth-first search on the quotient)."""
        hit = self._rows.get(c)
        if hit is None:
            hit = self._rows[c] = bfs(self.qadj, c, 1)
        return hit

    def distance(self, a: str, v: str) -> float:
        if a == v:
            return 0
        ca, cv = self.cls[a], self.cls.get(v)
        if cv is None:
            return INF
        if ca == cv:
            return 2 * self.step if self.has_neighbours[ca] else INF
        hops = self._row(ca).get(cv)
        return INF if hops is None else hops * self.step

    def from_vertex(self, a: str) -> "TwinDistances":
        return TwinDistances(self, a)


class TwinDistances:
    """Distances from one core vertex, computed on demand (the dict interface Router uses)."""

    __slots__ = ("metric", "a", "_row", "_ca")

    def __init__(self, metric: TwinMetric, a: str) -> None:
        self.metric = metric
        self.a = a
        self._ca = metric.cls[a]
        self._row = metric._row(self._ca)

    def get(self, v: str, default: "float | None" = None) -> "float | None":
        if v == self.a:
            return 0
        m = self.metric
        cv = m.cls.get(v)
        if cv is None:
            return default
        if cv == self._ca:
            return 2 * m.step if m.has_neighbours[cv] else default
        hops = self._row.get(cv)
        return default if hops is None else hops * m.step

    def __getitem__(self, v: str) -> float:
        d = self.get(v)
        if d is None:
            raise KeyError(v)
        return d
