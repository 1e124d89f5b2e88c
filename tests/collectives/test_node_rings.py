"""Intra-node rings built from the node's own graph (node_rings.py): every NVLink of every GPU used."""
from __future__ import annotations

from collections import Counter

import pytest

from simdist.collectives.node_rings import channel_orders, group_node_orders, ring_orders
from simdist.engine.simulation import simulate
from simdist.io.load import load_scenario
from simdist.topology.build import build_topology
from simdist.topology.intranode import DGX1_P100_BRICKS, DGX1_V100_BRICKS
from simdist.collectives.schedule import Group
from simdist.topology.routing import ring_channels
from tests.topology.factory import DGX1_V100, DGX_A100, PAIRS, PCIE_BOX, cluster

IB = "scenarios/examples/ib-512gpu.yaml"


def _pairs(bricks):
    return frozenset((a, b, m) for (a, b), m in bricks.items())


@pytest.mark.parametrize("bricks,per_gpu", [(DGX1_V100_BRICKS, 6), (DGX1_P100_BRICKS, 4)])
def test_cube_mesh_rings_use_every_brick_once_each_way(bricks, per_gpu):
    # NVIDIA, DGX-1 with Tesla V100 System Architecture whitepaper (as reproduced at
    # https://www.iitr.ac.in/dgx): "The topology can also be thought of as three interwoven rings of
    # single NVLink connections." Three cycles, each run both ways, use all six bricks of a V100.
    rings = ring_orders(8, _pairs(bricks), False)
    assert len(rings) == per_gpu  # three (two) Hamiltonian cycles, each in both directions
    use = Counter((r[i], r[(i + 1) % 8]) for r in rings for i in range(8))
    for (a, b), m in bricks.items():
        assert use[(a, b)] == use[(b, a)] == m  # a doubled pair carries two rings each way
    assert sum(use.values()) == 8 * per_gpu  # no hop outside a brick


def test_bridged_pairs_keep_pairs_adjacent_both_directions():
    rings = ring_orders(8, frozenset({(0, 1, 12), (2, 3, 12), (4, 5, 12), (6, 7, 12)}), False)
    assert rings == ((0, 1, 2, 3, 4, 5, 6, 7), (0, 7, 6, 5, 4, 3, 2, 1))


@pytest.mark.parametrize("intra", [DGX_A100, PCIE_BOX])
def test_switch_and_pcie_nodes_keep_one_ring(intra):
    t = build_topology(cluster(1, "single_switch", intra))
    assert group_node_orders(t, Group.flat(range(8), 8), 1) == (tuple(range(8)),)


def test_pairs_topology_gives_two_rings():
    t = build_topology(cluster(1, "single_switch", PAIRS))
    assert len(group_node_orders(t, Group.flat(range(8), 8), 1)) == 2


def test_multi_node_channels_enter_and_leave_through_distinct_nics():
    t = build_topology(cluster(4, "single_switch", DGX1_V100, nics=4))
    g = Group.flat(range(32), 8)
    orders = group_node_orders(t, g, ring_channels(t, g.nodes))
    rail = [j * 4 // 8 for j in range(8)]
    assert len(orders) == 4
    assert sorted(rail[o[0]] for o in orders) == [0, 1, 2, 3]  # entries
    assert sorted(rail[o[-1]] for o in orders) == [0, 1, 2, 3]  # exits
    # on a switch layout the rotation is the plain rail rotation of ring.channel_rings
    assert channel_orders((tuple(range(8)),), [j for j in range(8)], 8) == [
        tuple(range(c, 8)) + tuple(range(c)) for c in range(8)]


def _dgx1(*overrides):
    base = ["cluster.nodes.0.count=1", "cluster.nodes.0.gpu=v100-sxm2-32gb", "cluster.nodes.0.intra_node=cube-mesh-v100",
            'cluster.nodes.0.nic={bandwidth: "100 Gb/s", latency: "2 us", count: 4, transport: rdma}',
            "cluster.fabric={topology: single_switch}", 'workload.benchmark.sizes=["1 GB"]',
            "communication.strategy=ring", "run.fidelity=simulate"]
    return simulate(load_scenario(IB, base + list(overrides))).collectives[0]


@pytest.mark.parametrize("backend", ["textbook", "nccl"])
def test_dgx1_v100_all_reduce_runs_over_all_six_nvlinks(backend):
    row = _dgx1(f"communication.backend={backend}")
    # one NVLink2 brick: 25 GB/s x the catalog's NVLink efficiency 0.80; six per GPU
    brick = 25e9 * 0.80
    assert row.busbw_GBps == pytest.approx(6 * brick / 1e9, rel=0.02)  # 120 GB/s (one ring alone: 20)
    assert row.algorithm.startswith("ring")


@pytest.mark.parametrize("alg", ["ring", "tree"])
def test_dgx1_multi_node_channels_load_every_nic_alike(alg):
    # 4 DGX-1 V100 with 4 NICs: ring channels and tree pairs follow the graph rings, one NIC each
    from simdist.collectives.backends import nccl_candidate
    from simdist.collectives.fabric import from_topology
    from simdist.network.analytical import AnalyticalNetwork
    import simpy

    t = build_topology(cluster(4, "single_switch", DGX1_V100, nics=4))
    g = Group.flat(range(32), 8)
    c = ring_channels(t, g.nodes)
    sched = nccl_candidate("all_reduce", alg, "Simple", 64e6, g, fabric=from_topology(t, g), channels=c,
                           node_orders=group_node_orders(t, g, c))
    net = AnalyticalNetwork(t)
    env = simpy.Environment()
    env.process(net.run(env, sched))
    env.run()
    out = [net.link_bytes[i] for i, (u, v) in enumerate(t.links.ends) if "/nic" in u and "/" not in v]
    assert len(out) == 16 and min(out) > 0  # every NIC of every node carries its channel
    if alg == "ring":
        assert min(out) == pytest.approx(max(out), rel=0.05)
    else:  # tree: a NIC carries (edges of its node in tree A + in tree B) x S/(2 x 4 pairs)
        from simdist.collectives.tree import double_tree, max_degree

        # (+ the fill: one chunk per hop of the deepest path)
        assert max(out) == pytest.approx(max_degree(double_tree(4)) * 64e6 / 8 / 0.92, rel=0.05)


def test_ll128_follows_the_hardware():
    from simdist.collectives.fabric import from_topology
    from tests.topology.factory import DGX1_P100

    g = Group.flat(range(8), 8)
    assert from_topology(build_topology(cluster(1, "single_switch", DGX1_V100, nics=4)), g).ll128
    assert not from_topology(build_topology(cluster(1, "single_switch", DGX1_P100, nics=4)), g).ll128  # Pascal
    assert not from_topology(build_topology(cluster(1, "single_switch", PCIE_BOX)), g).ll128
    assert not from_topology(build_topology(cluster(1, "single_switch", PAIRS)), g).ll128
