"""Routing: least-cost paths, NVLink preferred over PCIe, ECMP spread, determinism (also across processes)."""
from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdist.topology.build import build_topology
from simdist.topology.routing import Router
from simdist.topology.search import edge_cost
from tests.topology.factory import DGX1_V100, DGX_A100, PCIE_BOX, UNIFORM, cluster


def vpath(t, ids):
    ends = t.links.ends
    return [ends[ids[0]][0]] + [ends[i][1] for i in ids]


def test_direct_nvlink_beats_pcie():
    assert edge_cost(300e9) * 2 < edge_cost(32e9)
    t = build_topology(cluster(1, "single_switch", DGX_A100, nics=8))
    r = Router(t)
    assert vpath(t, r.path(0, 1)) == ["node0/gpu0", "node0/nvswitch", "node0/gpu1"]
    t = build_topology(cluster(1, "single_switch", DGX1_V100, nics=4))
    r = Router(t)
    assert vpath(t, r.path(0, 3)) == ["node0/gpu0", "node0/gpu3"]  # doubled brick
    p = vpath(t, r.path(0, 7))  # two NVLink hops, never PCIe
    assert len(p) == 3 and all(t.graph.edges[a, b]["kind"] == "nvlink" for a, b in zip(p, p[1:]))


def test_fat_tree_path_shape_and_counts():
    t = build_topology(cluster(8, "fat_tree", DGX_A100, nics=8, nodes_per_leaf=2))
    r = Router(t)
    paths = r.equal_cost_paths("node0/gpu0", "node5/gpu3")
    spines = t.graph.graph["fabric"]["spines"]
    assert len(paths) == 2 * spines * 2  # 2 NICs on each side's PCIe switch x spines
    assert {len(p) for p in paths} == {8}
    same_leaf = r.equal_cost_paths("node0/gpu0", "node1/gpu0")
    assert {len(p) for p in same_leaf} == {6} and len(same_leaf) == 4


def test_ecmp_spreads_over_spines():
    t = build_topology(cluster(8, "fat_tree", UNIFORM, gpus=1, nodes_per_leaf=4, oversubscription=1.0))
    assert t.graph.graph["fabric"]["spines"] == 4
    r = Router(t)
    use = Counter()
    flows = 8000
    for k in range(flows):
        p = vpath(t, r.path(k % 4, 4 + (k // 4) % 4, k))
        use[next(v for v in p if v.startswith("spine"))] += 1
    assert len(use) == 4
    assert max(abs(c / flows - 0.25) for c in use.values()) < 0.02


def test_three_level_paths_cross_the_core():
    t = build_topology(cluster(32, "fat_tree", UNIFORM, gpus=1, nodes_per_leaf=2, levels=3, leaves_per_pod=4))
    r = Router(t)
    p = vpath(t, r.path(0, 31, 3))
    assert [re.sub(r"[\d.]+", "", v) for v in p] == ["node/gpu", "node/nvswitch", "node/nic", "leaf", "agg", "core",
                                                     "agg", "leaf", "node/nic", "node/nvswitch", "node/gpu"]
    assert len(r.equal_cost_paths(t.endpoints[0], t.endpoints[31])) == 2 * 4  # aggs x cores per agg


def test_pcie_box_crosses_sockets_only_when_needed():
    t = build_topology(cluster(1, "single_switch", PCIE_BOX, gpus=8, nics=2))
    r = Router(t)
    assert vpath(t, r.path(0, 1)) == ["node0/gpu0", "node0/pcie0", "node0/gpu1"]
    assert "node0/cpu1" in vpath(t, r.path(0, 7))


@pytest.mark.parametrize("topology", ["single_switch", "fat_tree", "ring", "torus2d", "torus3d"])
def test_paths_are_least_cost_and_match_networkx(topology):
    t = build_topology(cluster(6, topology, DGX1_V100, nics=4, nodes_per_leaf=2))
    r = Router(t)
    g = nx.Graph()
    for u, v, d in t.graph.edges(data=True):
        g.add_edge(u, v, w=edge_cost(d["link"].effective_Bps * d.get("multiplicity", 1)))
    for s, d in [(0, 9), (3, 40), (0, 7), (17, 46), (8, 15)]:
        src, dst = t.endpoints[s], t.endpoints[d]
        best = nx.shortest_path_length(g, src, dst, weight="w")
        ids = r.path(s, d, 11)
        p = vpath(t, ids)
        assert p[0] == src and p[-1] == dst
        assert sum(g.edges[a, b]["w"] for a, b in zip(p, p[1:])) == best
        all_paths = sorted(nx.all_shortest_paths(g, src, dst, weight="w"))
        ours = r.equal_cost_paths(src, dst)
        assert ours == [tuple(t.links.index[(q[i], q[i + 1])] for i in range(len(q) - 1)) for q in all_paths]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 63), st.integers(0, 63), st.integers(0, 10**9))
def test_path_endpoints_and_determinism(s, d, key):
    t = _TORUS
    r1, r2 = Router(t), Router(t)
    p = r1.path(s, d, key)
    assert p == r2.path(s, d, key) == r1.path(s, d, key)
    if s == d:
        assert p == ()
    else:
        vs = vpath(t, p)
        assert vs[0] == t.endpoints[s] and vs[-1] == t.endpoints[d] and len(set(vs)) == len(vs)


_TORUS = build_topology(cluster(16, "torus2d", UNIFORM, gpus=4, nics=2))

_SCRIPT = """
from tests.topology.factory import cluster, UNIFORM
from simdist.topology.build import build_topology
from simdist.topology.routing import Router
t = build_topology(cluster(16, "fat_tree", UNIFORM, gpus=2, nodes_per_leaf=2))
r = Router(t)
print([r.path(k % 32, (k * 7 + 3) % 32, k) for k in range(200)])
"""


def test_deterministic_across_processes():
    outs = {subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": seed, "PYTHONPATH": "."}).stdout for seed in ("1", "2")}
    assert len(outs) == 1 and len(next(iter(outs))) > 100


def test_hand_built_graph_without_machine_prefixes():
    from tests.topology.factory import IB200
    from simdist.topology.graph import Topology

    g = nx.Graph()
    for v in ("a", "b"):
        g.add_edge(v, "s", link=IB200, kind="nic")
    r = Router(Topology(g, ("a", "b"), (0, 1), 2))
    assert len(r.path(0, 1)) == 2
