"""LinkGraph (topology.plain) against networkx: the builders give the same graph in the same order, the
same directed links, routes and bisection whether they build on a LinkGraph or an nx.Graph (that
the built-in fabrics never import networkx: tests/test_startup.py)."""
from __future__ import annotations

import networkx as nx
import pytest

import simdist.topology.build as build
from simdist.collectives.fabric import from_topology
from simdist.collectives.schedule import Group
from simdist.topology.bisection import bisection_bandwidth_Bps, max_flow_bisection_Bps
from simdist.topology.plain import LinkGraph
from simdist.topology.routing import Router
from tests.topology.factory import DGX1_P100, DGX1_V100, DGX_A100, PAIRS, PCIE_BOX, UNIFORM, cluster
from tests.topology.test_validate_bisection import GRAPHML

CASES = {
    "single_switch": lambda: cluster(3, "single_switch", DGX_A100, nics=8),
    "fat_tree_2": lambda: cluster(8, "fat_tree", DGX_A100, nics=8, nodes_per_leaf=2),
    "fat_tree_3": lambda: cluster(8, "fat_tree", UNIFORM, gpus=2, nics=2, nodes_per_leaf=1, levels=3,
                                  leaves_per_pod=2),
    "oversubscribed": lambda: cluster(6, "fat_tree", DGX1_V100, nics=4, nodes_per_leaf=2, oversubscription=3.0),
    "leaf_spine_p100": lambda: cluster(4, "leaf_spine", DGX1_P100, nics=2, nodes_per_leaf=2),
    "ring": lambda: cluster(5, "ring", PAIRS, gpus=4, nics=2),
    "torus2d": lambda: cluster(12, "torus2d", UNIFORM, gpus=2, nics=2),
    "torus2d_2x2": lambda: cluster(4, "torus2d", PCIE_BOX, gpus=4, nics=1, dims=(2, 2)),
    "torus3d": lambda: cluster(8, "torus3d", UNIFORM, gpus=1),
}


def _state(g) -> tuple:
    """Everything order-sensitive about a graph: attributes, vertices with theirs, each adjacency in order."""
    return (dict(g.graph), list(g.nodes(data=True)), [(u, list(nbrs.items())) for u, nbrs in g.adj.items()],
            list(g.edges(data=True)))


def _both(make, monkeypatch, server_hosts: int = 0):
    """(topology built on LinkGraph, the same built on nx.Graph)."""
    plain = build._build(make(), server_hosts, None)
    with monkeypatch.context() as m:
        m.setattr(build, "LinkGraph", nx.Graph)
        ref = build._build(make(), server_hosts, None)
    assert isinstance(plain.graph, LinkGraph) and type(ref.graph) is nx.Graph
    return plain, ref


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_graph_links_routes_and_bisection(name, monkeypatch):
    plain, ref = _both(CASES[name], monkeypatch, server_hosts=1 if name == "fat_tree_2" else 0)
    assert _state(plain.graph) == _state(ref.graph)
    assert plain.links.ends == ref.links.ends and plain.links.index == ref.links.index
    assert (plain.links.capacity_Bps == ref.links.capacity_Bps).all()
    assert (plain.links.latency_s == ref.links.latency_s).all()
    assert plain.endpoints == ref.endpoints and plain.description == ref.description
    rp, rr = Router(plain), Router(ref)
    n = len(plain.endpoints)
    for s in range(n):
        for d in range(n):
            for key in (0, 3):
                assert rp.path(s, d, key) == rr.path(s, d, key), (s, d, key)
    assert bisection_bandwidth_Bps(plain) == bisection_bandwidth_Bps(ref)
    assert max_flow_bisection_Bps(plain) == max_flow_bisection_Bps(ref)
    nodes: dict[int, list[int]] = {}
    for e, m in enumerate(plain.endpoint_node):
        nodes.setdefault(m, []).append(e)
    group = Group(tuple(range(n)), tuple(tuple(v) for v in nodes.values()))
    assert from_topology(plain, group) == from_topology(ref, group)


def test_custom_graphml_same_as_networkx(tmp_path, monkeypatch):
    f = tmp_path / "fabric.graphml"
    f.write_text(GRAPHML)
    plain, ref = _both(lambda: cluster(3, "custom", UNIFORM, gpus=2, graphml=str(f)), monkeypatch)
    assert _state(plain.graph) == _state(ref.graph)
    assert [Router(plain).path(0, d) for d in range(6)] == [Router(ref).path(0, d) for d in range(6)]
    assert max_flow_bisection_Bps(plain) == max_flow_bisection_Bps(ref)


def test_to_networkx_keeps_order_and_runs_networkx_algorithms():
    t = build._build(CASES["fat_tree_2"](), 0, None)
    g = t.graph.to_networkx()
    assert type(g) is nx.Graph and _state(g) == _state(t.graph)
    assert g.edges["leaf0", "spine0"] is not t.graph.edges["leaf0", "spine0"]  # copied
    assert nx.is_connected(g) and nx.is_connected(t.graph)  # networkx's own algorithms read a LinkGraph too


def test_graph_api_matches_networkx():
    """The calls simdist and its tests make, on one hand-built graph of each kind."""
    ops = [("add_edge", ("a", "b"), {"w": 1}), ("add_node", ("c",), {"x": 2}), ("add_edge", ("b", "c"), {}),
           ("add_edges_from", ([("c", "d"), ("d", "a", {"w": 5})],), {"k": 1}),
           ("add_nodes_from", (["e", ("f", {"y": 3}), "a"],), {}), ("add_edge", ("a", "b"), {"w": 7}),
           ("add_node", ("c",), {"x": 4})]
    graphs = [LinkGraph(), nx.Graph()]
    for g in graphs:
        for op, args, kw in ops:
            getattr(g, op)(*args, **kw)
    p, r = graphs
    assert _state(p) == _state(r)
    assert list(p) == list(r) and len(p) == len(r) and ("a" in p) == ("a" in r) and ([] in p) is False
    assert p.number_of_nodes() == r.number_of_nodes() and p.number_of_edges() == r.number_of_edges()
    assert [p.degree(v) for v in p] == [r.degree(v) for v in r] and list(p.degree()) == list(r.degree())
    assert [p.degree[v] for v in p] == [r.degree[v] for v in r] and list(p.degree) == list(r.degree)
    assert list(p.neighbors("a")) == list(r.neighbors("a")) and dict(p["c"]) == dict(r["c"])
    assert list(p.edges("c", data=True)) == list(r.edges("c", data=True))
    assert list(p.edges(["a", "c", "zz"])) == list(r.edges(["a", "c", "zz"]))
    assert list(p.edges) == list(r.edges) and len(p.edges) == len(r.edges)
    assert p.edges["a", "b"] == r.edges["a", "b"] and (("b", "a") in p.edges) == (("b", "a") in r.edges)
    assert p.has_edge("a", "d") and not p.has_edge("a", "e") and not p.has_edge("zz", "a")
    assert list(p.nodes(data="x")) == list(r.nodes(data="x")) and p.nodes["f"] == r.nodes["f"]
    assert list(p.nodes.data()) == list(r.nodes.data()) and list(p.edges.data("w")) == list(r.edges.data("w"))
    assert _state(p.subgraph(["d", "a", "c"])) == _state(r.subgraph(["d", "a", "c"]))
    q, s = p.copy(), r.copy()
    for g in (q, s):
        g.remove_edges_from([("a", "b"), ("e", "f")])
    assert _state(q) == _state(s) and p.has_edge("a", "b")
