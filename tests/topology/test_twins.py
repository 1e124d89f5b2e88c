"""Twin-class core distances (topology.twins) equal a breadth-first search on the full core graph."""
from __future__ import annotations

import pytest

from simdist.topology.build import build_topology
from simdist.topology.distances import Distances
from simdist.topology.routing import Router
from simdist.topology.search import bfs
from simdist.topology.twins import TwinMetric
from tests.topology.factory import DGX_A100, UNIFORM, cluster

CASES = [
    cluster(8, "fat_tree", DGX_A100, nics=8, nodes_per_leaf=2),
    cluster(32, "fat_tree", UNIFORM, gpus=1, nodes_per_leaf=2, levels=3, leaves_per_pod=4),
    cluster(12, "fat_tree", UNIFORM, gpus=2, nodes_per_leaf=4, oversubscription=2.0),
]


def _check(adj, step):
    metric = TwinMetric(adj, step)
    for a in adj:
        want = bfs(adj, a, step)
        got = metric.from_vertex(a)
        for v in adj:
            assert got.get(v) == want.get(v), (a, v)
            assert metric.distance(a, v) == want.get(v, float("inf"))
        assert got.get("not-a-vertex") is None


@pytest.mark.parametrize("spec", CASES)
def test_twin_distances_equal_bfs(spec):
    router = Router(build_topology(spec))
    assert router.graph.core_step is not None
    _check(router.graph.core_adj, router.graph.core_step)


def test_twin_distances_with_a_dead_cable():
    topo = build_topology(CASES[1])
    router = Router(topo, frozenset({("leaf0", "agg0.0")}))
    _check(router.graph.core_adj, router.graph.core_step)


def test_disconnected_and_isolated_vertices():
    adj = {"a": {"b": 1}, "b": {"a": 1}, "c": {}, "d": {"e": 1}, "e": {"d": 1}, "f": {"e": 1}}
    adj["e"]["f"] = 1
    _check(adj, 1)


@pytest.mark.parametrize("spec", CASES + [cluster(8, "torus2d", UNIFORM, gpus=4, nics=2),
                                          cluster(6, "ring", DGX_A100, nics=8)])
def test_shared_exit_shapes_and_twins_route_like_the_general_search(spec, monkeypatch):
    """Routes with exits shared across machines (Distances.gateway_signature) and twin distances equal those of
    a router that computes every destination's exits itself and runs a BFS per exit."""
    topo = build_topology(spec)
    fast = Router(topo)
    slow = Router(topo)
    d, g = slow.distances, slow.graph
    monkeypatch.setattr(d, "gateway_signature", lambda m: None)
    monkeypatch.setattr(d, "core_dist", lambda a: d._dcore.setdefault(
        a, bfs(g.core_adj, a, g.core_step) if g.core_step is not None and g.metric is None
        else Distances.core_dist(d, a)))
    n = len(topo.endpoints)
    for src in range(n):
        for dst in range(n):
            for key in (0, 3):
                assert fast.path(src, dst, key) == slow.path(src, dst, key), (src, dst, key)
