"""Closed-form core distances on ring and torus fabrics, so routing needs no search from every NIC.

On a complete ring/torus (topology.direct) NIC plane p of every machine forms one torus; the
distance between two NICs of one plane is sum over dimensions of cost_d x the cyclic offset
min(|dx|, size - |dx|), and NICs of different planes are not connected in the core. The metric is
used only after checking that the core graph is exactly that torus (every core edge joins equal NIC
names of torus neighbours at its dimension's cost, and no edge is missing); anything else (a dead
cable, mixed NIC counts, an incomplete torus) keeps the general search.
"""
from __future__ import annotations

import math
from typing import Mapping

INF = math.inf


class TorusMetric:
    """Exact core distances of a verified ring/torus: vertex -> (plane name, coordinates)."""

    def __init__(self, dims: tuple[int, ...], cost: tuple[int, ...], where: dict[str, tuple[str, tuple[int, ...]]]) -> None:
        self.dims = dims
        self.cost = cost
        self.where = where

    def distance(self, a: str, v: str) -> float:
        pa, ca = self.where[a]
        hit = self.where.get(v)
        if hit is None or hit[0] != pa:
            return INF
        total = 0
        for x, y, size, c in zip(ca, hit[1], self.dims, self.cost):
            d = abs(x - y)
            total += c * min(d, size - d)
        return total

    def from_vertex(self, a: str) -> "TorusDistances":
        return TorusDistances(self, a)

    @classmethod
    def verify(cls, fabric: dict, machines: tuple[str, ...], core_adj: Mapping[str, Mapping[str, int]]) -> "TorusMetric | None":
        """The metric when `core_adj` is exactly a complete torus over `machines` (row-major in
        fabric['dims']), one per NIC name; else None."""
        if fabric.get("kind") not in ("ring", "torus2d", "torus3d") or not fabric.get("complete"):
            return None
        dims = tuple(int(d) for d in fabric["dims"])
        if math.prod(dims) != len(machines) or not core_adj:
            return None
        strides = [math.prod(dims[d + 1:]) for d in range(len(dims))]
        index = {m: i for i, m in enumerate(machines)}
        where: dict[str, tuple[str, tuple[int, ...]]] = {}
        for v in core_adj:
            m, sep, local = v.partition("/")
            i = index.get(m)
            if not sep or i is None:
                return None
            where[v] = (local, tuple((i // s) % size for s, size in zip(strides, dims)))
        planes = {p for p, _ in where.values()}
        if len(where) != len(planes) * len(machines):
            return None
        cost: list[int | None] = [None] * len(dims)
        edges = 0
        for u, nbrs in core_adj.items():
            pu, cu = where[u]
            for w, c in nbrs.items():
                pw, cw = where[w]
                diff = [d for d in range(len(dims)) if cu[d] != cw[d]]
                if pw != pu or len(diff) != 1:
                    return None
                d = diff[0]
                step = abs(cu[d] - cw[d])
                if step != 1 and step != dims[d] - 1:
                    return None
                if cost[d] is None:
                    cost[d] = c
                elif cost[d] != c:
                    return None
                edges += 1
        per_plane = sum(len(machines) if size > 2 else (len(machines) // 2 if size == 2 else 0) for size in dims)
        if edges != 2 * per_plane * len(planes):  # directed entries: each edge twice
            return None
        return cls(dims, tuple(c if c is not None else 0 for c in cost), where)


class TorusDistances:
    """Distances from one core vertex, computed on demand (the dict interface Router uses)."""

    __slots__ = ("metric", "a")

    def __init__(self, metric: TorusMetric, a: str) -> None:
        self.metric = metric
        self.a = a

    def get(self, v: str, default: float | None = None) -> float | None:
        d = self.metric.distance(self.a, v)
        return default if d == INF else d

    def __getitem__(self, v: str) -> float:
        d = self.metric.distance(self.a, v)
        if d == INF:
            raise KeyError(v)
        return d
