"""Routed paths as numpy arrays with their latencies, cached per (src, dst, flow_key).

Routing itself (shortest paths, ECMP) is simdist.topology.routing.Router's; this table only keeps
its answers in the form the network models use, and can be cleared when routes change (a dead link).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from simdist.topology.graph import Topology
from simdist.topology.routing import SPRAY_PATHS, Router, shared_router


class PathTable:
    """Directed link ids and latency of each routed (src, dst, flow_key), computed once."""

    def __init__(self, topology: Topology, router: Router | None = None) -> None:
        self.topology = topology
        self.router = router if router is not None else shared_router(topology)
        self._cache: dict[tuple[int, int, int], tuple[np.ndarray, float]] = {}
        self._tuples: dict[tuple[int, int, int], tuple[int, ...]] = {}

    def path(self, src: int, dst: int, flow_key: int = 0) -> tuple[np.ndarray, float]:
        """(directed link ids, path latency in s) from endpoint src to endpoint dst."""
        key = (src, dst, flow_key)
        hit = self._cache.get(key)
        if hit is None:
            links = np.asarray(self.router.path(src, dst, flow_key), dtype=np.int64)
            latency = float(self.topology.links.latency_s[links].sum()) if links.size else 0.0
            hit = (links, latency)
            self._cache[key] = hit
        return hit

    def link_tuple(self, src: int, dst: int, flow_key: int = 0) -> tuple[int, ...]:
        """The directed link ids of one routed (src, dst, flow_key), as the router gives them (cached)."""
        key = (src, dst, flow_key)
        hit = self._tuples.get(key)
        if hit is None:
            hit = self._tuples[key] = tuple(self.router.path(src, dst, flow_key))
        return hit

    def link_tuples(self, pairs: "tuple[tuple[int, int], ...]") -> list[tuple[int, ...]]:
        """link_tuple of every (src, dst) pair with flow key 0, in order (no per-pair numpy array)."""
        cache, route = self._tuples, self.router.path
        out = []
        append = out.append
        for src, dst in pairs:
            key = (src, dst, 0)
            hit = cache.get(key)
            if hit is None:
                hit = cache[key] = tuple(route(src, dst, 0))
            append(hit)
        return out

    def link_arrays(self, pairs) -> tuple[np.ndarray, np.ndarray]:
        """(every pair's directed link ids, path after path; each path's number of links) for the
        (src, dst) pairs with flow key 0, in order: a step's routes in one pass, without keeping a tuple
        per pair (a step's routes are kept whole by the step cache instead)."""
        flat_paths = getattr(self.router, "paths_flat", None)
        if flat_paths is None:  # a router of another kind: pair by pair
            return flatten(self.link_tuples(pairs))
        flat, lengths = flat_paths(pairs)
        return np.array(flat, dtype=np.int64), np.array(lengths, dtype=np.int64)

    @property
    def spread(self) -> int:
        """Paths each (src, dst) connection is split over: SPRAY_PATHS with routing 'spray', else the fabric
        planes a GPU owns on a direct-connect fabric (Router.planes: one flow key per plane), else 1."""
        planes = getattr(self.router, "planes", 1)
        return math.lcm(SPRAY_PATHS, planes) if getattr(self.router, "routing", "") == "spray" else planes

    def paths(self, src: int, dst: int) -> list[tuple[np.ndarray, float]]:
        """The `spread` paths of one connection (flow keys 0..spread-1), each with its latency."""
        return [self.path(src, dst, k) for k in range(self.spread)]

    def clear(self) -> None:
        """Forget every path (after the router has been told to route around a dead link)."""
        self._cache.clear()
        self._tuples.clear()


def flatten(routed) -> tuple[np.ndarray, np.ndarray]:
    """(the paths' link ids one after another, each path's number of links) of a sequence of link-id tuples."""
    lengths = np.fromiter(map(len, routed), dtype=np.int64, count=len(routed))
    flat = np.fromiter(itertools.chain.from_iterable(routed), dtype=np.int64, count=int(lengths.sum()))
    return flat, lengths
