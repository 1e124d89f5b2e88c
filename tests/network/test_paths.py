"""FastRouter finds exactly Router's equal-cost paths (and so makes the same ECMP choices)."""
from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from simdist.hardware.specs import LinkSpec
from simdist.network.paths import FastRouter, PathTable, equal_cost_vertex_paths
from simdist.topology.graph import Topology
from simdist.topology.routing import Router
from tests.network.topos import dumbbell


def _random_topology(n: int, m: int, seed: int) -> Topology:
    g = nx.gnm_random_graph(n, m, seed=seed)
    g = g.subgraph(max(nx.connected_components(g), key=len)).copy()
    g = nx.relabel_nodes(g, {v: f"v{v:02d}" for v in g})
    for u, v in g.edges:
        g.edges[u, v]["link"] = LinkSpec(1e9, 1e-6)
    verts = tuple(sorted(g))
    return Topology(g, verts, tuple(range(len(verts))), len(verts))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 14), st.integers(1, 40), st.integers(0, 10_000))
def test_fast_router_matches_router(n, m, seed):
    topo = _random_topology(n, min(m, n * (n - 1) // 2), seed)
    slow, fast = Router(topo), FastRouter(topo)
    k = len(topo.endpoints)
    for s in range(k):
        for d in range(k):
            assert fast.equal_cost_paths(topo.endpoints[s], topo.endpoints[d]) == \
                slow.equal_cost_paths(topo.endpoints[s], topo.endpoints[d])
            assert fast.path(s, d, 7) == slow.path(s, d, 7)


def test_fat_tree_like_ecmp_paths():
    g = nx.Graph()
    link = LinkSpec(1e9, 1e-6)
    for leaf in ("l0", "l1"):
        for spine in ("s0", "s1", "s2"):
            g.add_edge(leaf, spine, link=link)
    g.add_edge("a", "l0", link=link)
    g.add_edge("b", "l1", link=link)
    paths = equal_cost_vertex_paths(g, "a", "b")
    assert paths == [["a", "l0", s, "l1", "b"] for s in ("s0", "s1", "s2")]


def test_path_table_latency_and_cache():
    topo = dumbbell(1, 1, latency_s=1e-6)
    table = PathTable(topo)
    links, lat = table.path(0, 1)
    assert links.size == 3 and abs(lat - 3e-6) < 1e-15
    assert table.path(0, 1)[0] is links
    assert table.path(0, 0)[0].size == 0
