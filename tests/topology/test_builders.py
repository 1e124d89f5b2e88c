"""Vertex, edge and cable counts of every builder against formulas; node interiors; servers."""
from __future__ import annotations

import math

import pytest

from simdist.hardware.specs import ClusterSpec, FabricSpec, NicSpec, TopologyKind
from simdist.topology.build import build_topology
from simdist.topology.fattree import spread_uplinks
from simdist.topology.intranode import DGX1_P100_BRICKS, DGX1_V100_BRICKS
from tests.topology.factory import (DGX1_P100, DGX1_V100, DGX_A100, IB100, IB200, PAIRS, PCIE_BOX, UNIFORM, cluster,
                                    group)


def kinds(t, kind):
    return [(u, v, d) for u, v, d in t.graph.edges(data=True) if d["kind"] == kind]


def cables(t, kind):
    return sum(d.get("multiplicity", 1) for _, _, d in kinds(t, kind))


@pytest.mark.parametrize("nodes", [1, 3, 8])
def test_single_switch_uniform_counts(nodes):
    t = build_topology(cluster(nodes, "single_switch", UNIFORM, gpus=4, nics=2))
    # per node: 4 gpus + nvswitch + 2 nics; plus the switch
    assert t.graph.number_of_nodes() == nodes * 7 + 1
    assert len(kinds(t, "nvlink")) == nodes * 4 and len(kinds(t, "nic")) == nodes * 2
    assert len(kinds(t, "pcie")) == nodes * 2  # NICs hang off the node switch
    assert t.endpoints[:4] == ("node0/gpu0", "node0/gpu1", "node0/gpu2", "node0/gpu3")
    assert t.endpoint_node == tuple(n for n in range(nodes) for _ in range(4))


def test_dgx_a100_interior():
    t = build_topology(cluster(1, "single_switch", DGX_A100, nics=8))
    g = t.graph
    assert sum(1 for v in g if "/pcie" in v) == 4 and sum(1 for v in g if "/cpu" in v) == 2
    # gpus: nvswitch + pcie; nics: pcie; pcie switches: socket; one socket link
    assert len(kinds(t, "nvlink")) == 8 and len(kinds(t, "pcie")) == 8 + 8 + 4 and len(kinds(t, "socket")) == 1
    assert sorted(g["node0/pcie1"]) == ["node0/cpu0", "node0/gpu2", "node0/gpu3", "node0/nic2", "node0/nic3"]
    assert g.has_edge("node0/pcie3", "node0/cpu1")


@pytest.mark.parametrize("intra,bricks,per_gpu", [(DGX1_V100, DGX1_V100_BRICKS, 6), (DGX1_P100, DGX1_P100_BRICKS, 4)])
def test_cube_mesh_bricks(intra, bricks, per_gpu):
    t = build_topology(cluster(2, "single_switch", intra, nics=4))
    for n in range(2):
        for i in range(8):
            gpu = f"node{n}/gpu{i}"
            nv = sum(d.get("multiplicity", 1) for _, w, d in t.graph.edges(gpu, data=True) if d["kind"] == "nvlink")
            assert nv == per_gpu
    assert cables(t, "nvlink") == 2 * sum(bricks.values()) == 2 * 8 * per_gpu // 2
    assert len(kinds(t, "nvlink")) == 2 * 16  # both DGX-1 wirings join 16 GPU pairs
    # GPUs in pairs under 4 PCIe switches, two per socket, one NIC each
    assert sorted(t.graph["node0/pcie2"]) == ["node0/cpu1", "node0/gpu4", "node0/gpu5", "node0/nic2"]


def test_bricks_symmetric_and_doubled_pairs():
    assert all(a < b for a, b in DGX1_V100_BRICKS)
    assert sum(1 for m in DGX1_V100_BRICKS.values() if m == 2) == 8


def test_pairs_and_pcie_layouts():
    t = build_topology(cluster(1, "single_switch", PAIRS, gpus=4))
    assert len(kinds(t, "nvlink")) == 2 and t.graph.has_edge("node0/gpu2", "node0/gpu3")
    t = build_topology(cluster(1, "single_switch", PCIE_BOX, gpus=8, nics=2))
    assert not kinds(t, "nvlink") and len(kinds(t, "socket")) == 1
    assert len(kinds(t, "pcie")) == 8 + 2 + 4


@pytest.mark.parametrize("nodes,per_leaf,over", [(64, 4, 1.0), (64, 4, 4.0), (10, 4, 2.0), (12, 3, 1.5)])
def test_fat_tree_two_level_counts(nodes, per_leaf, over):
    t = build_topology(cluster(nodes, "fat_tree", UNIFORM, gpus=1, nics=1, link=IB200,
                               nodes_per_leaf=per_leaf, oversubscription=over))
    leaves = math.ceil(nodes / per_leaf)
    uplinks = math.ceil(per_leaf / over - 1e-9)
    meta = t.graph.graph["fabric"]
    assert meta["levels"] == 2 and meta["leaves"] == leaves and meta["spines"] == uplinks
    assert sum(1 for v in t.graph if v.startswith("leaf")) == leaves
    assert sum(1 for v in t.graph if v.startswith("spine")) == uplinks
    assert len(kinds(t, "fabric")) == leaves * uplinks
    # uplink capacity = downlink / oversubscription, even when the link count is fractional
    up = sum(d["link"].bandwidth_Bps for u, v, d in kinds(t, "fabric") if "leaf0" in (u, v))
    assert up == pytest.approx(per_leaf * IB200.bandwidth_Bps / over)


def test_spread_uplinks_multiplicity_and_scaling():
    u = spread_uplinks(40 * 25e9, IB200, limit=32)
    assert (u.switches, u.multiplicity, u.link.bandwidth_Bps) == (20, 2, 25e9)
    u = spread_uplinks(2.5 * 25e9, IB200)
    assert (u.switches, u.multiplicity) == (3, 1) and u.capacity_Bps == pytest.approx(2.5 * 25e9)


def test_three_level_counts():
    t = build_topology(cluster(32, "fat_tree", UNIFORM, gpus=1, nics=1, nodes_per_leaf=2, levels=3, leaves_per_pod=4))
    meta = t.graph.graph["fabric"]
    assert (meta["leaves"], meta["pods"], meta["aggs_per_pod"]) == (16, 4, 2)
    aggs = [v for v in t.graph if v.startswith("agg")]
    cores = [v for v in t.graph if v.startswith("core")]
    assert len(aggs) == 8 and len(cores) == meta["cores"] == 2 * 4
    assert cables(t, "fabric") == 16 * 2 + 8 * 4  # leaf->agg, agg->core (4 per agg: non-blocking)
    assert all(t.graph.degree(c) == 4 for c in cores)  # one link per pod


def test_auto_three_levels_for_large_trees():
    t = build_topology(cluster(130 * 2, "fat_tree", UNIFORM, gpus=1, nics=1, nodes_per_leaf=2))
    assert t.graph.graph["fabric"]["levels"] == 3
    t = build_topology(cluster(64 * 2, "fat_tree", UNIFORM, gpus=1, nics=1, nodes_per_leaf=2))
    assert t.graph.graph["fabric"]["levels"] == 2


@pytest.mark.parametrize("n", [3, 5, 8])
def test_ring_counts(n):
    t = build_topology(cluster(n, "ring", UNIFORM, gpus=2, nics=2))
    assert len(kinds(t, "fabric")) == 2 * n  # two planes
    assert all(t.graph.degree(f"node{i}/nic0") == 3 for i in range(n))  # 2 neighbours + node switch


def test_ring_of_two_is_a_double_cable():
    t = build_topology(cluster(2, "ring", UNIFORM, gpus=1))
    assert kinds(t, "fabric")[0][2]["multiplicity"] == 2


@pytest.mark.parametrize("topology,dims", [("torus2d", (4, 3)), ("torus3d", (3, 3, 2)), ("torus2d", (2, 2))])
def test_torus_wraparound_degree(topology, dims):
    n = math.prod(dims)
    t = build_topology(cluster(n, topology, UNIFORM, gpus=1, dims=dims))
    for i in range(n):
        fabric = [d.get("multiplicity", 1) for _, _, d in t.graph.edges(f"node{i}/nic0", data=True) if d["kind"] == "fabric"]
        assert sum(fabric) == 2 * len(dims)
    assert cables(t, "fabric") == n * len(dims)
    # wrap-around: the first and last of a row are neighbours
    assert t.graph.has_edge("node0/nic0", f"node{(dims[0] - 1) * math.prod(dims[1:])}/nic0")


def test_torus_default_shape_with_holes_stays_connected():
    import networkx as nx

    t = build_topology(cluster(7, "torus2d", UNIFORM, gpus=1))
    assert t.graph.graph["fabric"]["dims"] == (3, 3) and nx.is_connected(t.graph)


def test_servers_follow_gpus():
    nic = NicSpec(IB100, 2)
    t = build_topology(cluster(5, "fat_tree", UNIFORM, gpus=2, nodes_per_leaf=2), server_hosts=3, server_nic=nic)
    assert t.endpoints[-3:] == ("server0/cpu0", "server1/cpu0", "server2/cpu0")
    assert t.endpoint_node[-3:] == (5, 6, 7) and t.num_gpus == 10 and t.num_nodes == 8
    assert t.graph.has_edge("server0/nic1", "leaf2")  # fills node4's leaf
    assert t.graph.has_edge("server1/nic0", "leaf3")  # then an extra leaf
    assert t.graph.edges["server0/nic0", "leaf2"]["link"] == IB100


def test_heterogeneous_groups_keep_their_interiors():
    c = ClusterSpec((group(2, DGX_A100, 8, 8), group(3, PCIE_BOX, 4, 1, IB100)),
                    FabricSpec(TopologyKind.SINGLE_SWITCH, IB200))
    t = build_topology(c)
    assert t.num_gpus == 28 and t.endpoints[16] == "node2/gpu0" and t.endpoint_node[16] == 2
    assert "node1/nvswitch" in t.graph and "node2/nvswitch" not in t.graph
    assert t.graph.edges["node4/nic0", "switch"]["link"] == IB100


def test_every_edge_has_link_and_kind():
    for topo in ("single_switch", "fat_tree", "ring", "torus2d", "torus3d"):
        t = build_topology(cluster(8, topo, DGX1_V100, nics=4, nodes_per_leaf=2))
        for _, _, d in t.graph.edges(data=True):
            assert d["kind"] in ("nvlink", "pcie", "socket", "nic", "fabric") and d["link"].bandwidth_Bps > 0
