"""PathTable: the router's paths as arrays, their latency, and the cache."""
from __future__ import annotations

from simdist.network.paths import PathTable
from simdist.topology.routing import Router
from tests.network.topos import dumbbell


def test_path_table_matches_router_and_sums_latency():
    topo = dumbbell(1, 1, latency_s=1e-6)
    table = PathTable(topo)
    links, lat = table.path(0, 1)
    assert tuple(links) == Router(topo).path(0, 1)
    assert links.size == 3 and abs(lat - 3e-6) < 1e-15


def test_path_table_caches_and_clears():
    topo = dumbbell(1, 1)
    table = PathTable(topo)
    first = table.path(0, 1)[0]
    assert table.path(0, 1)[0] is first
    table.clear()
    assert table.path(0, 1)[0] is not first


def test_self_path_is_empty():
    links, latency = PathTable(dumbbell(1, 1)).path(0, 0)
    assert links.size == 0 and latency == 0.0
