"""Ring/torus routing by closed-form distances: the same distances and the same paths as the search."""
from __future__ import annotations

import pytest

from simdist.topology.build import build_topology
from simdist.topology.routing import Router
from simdist.topology.search import dijkstra
from tests.topology.factory import DGX_A100, cluster

SHAPES = [("ring", 5, None), ("ring", 2, None), ("torus2d", 16, (4, 4)), ("torus2d", 6, (3, 2)),
          ("torus3d", 24, (2, 3, 4)), ("torus3d", 8, (2, 2, 2))]


def _search(router: Router) -> Router:
    """The same router with the closed form switched off (the general search)."""
    slow = Router(router.topology)
    slow.distances._metric = None  # what the distances read: no closed form
    return slow


@pytest.mark.parametrize("kind, nodes, dims", SHAPES)
def test_closed_form_distances_equal_dijkstra(kind, nodes, dims):
    topo = build_topology(cluster(nodes, kind, DGX_A100, nics=2, **({"dims": dims} if dims else {})))
    router = Router(topo)
    assert router.graph.metric is not None
    core = router.graph.core_adj
    for a in list(core)[:: max(1, len(core) // 7)]:
        exact = dijkstra(core, {a: 0})
        for v in core:
            assert router.graph.metric.from_vertex(a).get(v) == exact.get(v)


@pytest.mark.parametrize("kind, nodes, dims", SHAPES)
def test_paths_are_those_of_the_search(kind, nodes, dims):
    topo = build_topology(cluster(nodes, kind, DGX_A100, nics=2, **({"dims": dims} if dims else {})))
    fast, slow = Router(topo), _search(Router(topo))
    n = len(topo.endpoints)
    for src in range(0, n, 3):
        for dst in range(0, n, 5):
            for key in (0, 7):
                assert fast.path(src, dst, key) == slow.path(src, dst, key)


def test_incomplete_torus_or_dead_cable_keeps_the_search():
    incomplete = build_topology(cluster(7, "torus2d", DGX_A100, nics=1, dims=(3, 3)))
    assert Router(incomplete).graph.metric is None
    full = build_topology(cluster(9, "torus2d", DGX_A100, nics=1, dims=(3, 3)))
    router = Router(full)
    assert router.graph.metric is not None
    (u, v) = next((u, v) for u, v in full.graph.edges if u.endswith("nic0") and v.endswith("nic0"))
    assert router.without(frozenset({(u, v)})).graph.metric is None
