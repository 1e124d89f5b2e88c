"""Routing as fabrics do it: InfiniBand D-mod-K, Ethernet ECMP per flow, NCCL spraying a connection."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import simpy

from simdist.cluster import data_parallel_group
from simdist.collectives.algorithms import build_schedule
from simdist.errors import ScenarioError
from simdist.hardware.specs import RoutingKind
from simdist.network.analytical import AnalyticalNetwork
from simdist.network.flows import FlowNetwork
from simdist.topology.build import build_topology
from tests.topology.factory import DGX_A100, cluster

SIZE = 512e6
B_NIC = 25e9 * 0.9  # IB200 effective
FABRIC_LAT = 3e-6  # IB200 latency, per fabric hop


def _hd_time(topology: str, routing: str = "auto", **fabric) -> tuple[float, str]:
    c = cluster(16, topology, DGX_A100, nics=8, **fabric)
    c = dataclasses.replace(c, fabric=dataclasses.replace(c.fabric, routing=RoutingKind(routing)))
    t = build_topology(c)
    schedule = build_schedule("all_reduce", "halving_doubling", SIZE, data_parallel_group(c, t))
    return FlowNetwork(simpy.Environment(), t).schedule_time(schedule), t.graph.graph["routing"]


def test_dmodk_halving_doubling_on_a_non_blocking_fat_tree_equals_one_switch():
    # 16 DGX nodes (8 rails) under 4 leaves of 4: D-mod-K sends the 32 flows leaving a leaf to 32
    # different spines, so only latency differs: 4 cross-leaf steps x 2 more fabric hops.
    one, _ = _hd_time("single_switch")
    tree, routing = _hd_time("fat_tree", nodes_per_leaf=4)
    assert routing == "dmodk"  # auto, rdma NICs
    assert tree == pytest.approx(one + 4 * 2 * FABRIC_LAT, rel=1e-9)


def test_ecmp_collides_and_spray_blunts_it():
    one, _ = _hd_time("single_switch")
    ecmp, r1 = _hd_time("fat_tree", "ecmp", nodes_per_leaf=4)
    spray, r2 = _hd_time("fat_tree", "spray", nodes_per_leaf=4)
    assert (r1, r2) == ("ecmp", "spray")
    assert one * 1.5 < ecmp  # hashed flows share spines
    assert one < spray < ecmp


def test_oversubscription_slows_halving_doubling_by_the_hand_factor():
    # The two largest halving steps (partners 4 and 8 nodes away: 256 MB and 128 MB per rank) and
    # their doubling mirrors cross leaves: 768 MB per rank at NIC rate when non-blocking, at a quarter
    # of it under 4:1 (32 flows share 8 uplinks' worth): 3 x 768 MB / B more.
    base, _ = _hd_time("fat_tree", nodes_per_leaf=4)
    slow, _ = _hd_time("fat_tree", nodes_per_leaf=4, oversubscription=4.0)
    assert slow == pytest.approx(base + 3 * 2 * (256e6 + 128e6) / B_NIC, rel=1e-9)


def test_spray_splits_each_connection_over_several_paths():
    c = cluster(8, "fat_tree", DGX_A100, nics=1, nodes_per_leaf=4)  # 4 spines
    c = dataclasses.replace(c, fabric=dataclasses.replace(c.fabric, routing=RoutingKind.SPRAY))
    t = build_topology(c)
    net = AnalyticalNetwork(t)
    from tests.network.topos import one_step
    (g,) = net.steps.get(one_step([(0, 32, 1e9)]).chains[0][0]).groups
    spines = [i for i in g.links if "spine" in t.links.name(int(i)).split("->")[1]]
    assert len(spines) > 1 and g.link_bytes.max() == pytest.approx(1e9)  # host links carry it all
    assert sum(g.link_bytes[list(g.links).index(i)] for i in spines) == pytest.approx(1e9)


ROOT = Path(__file__).resolve().parents[2]


def test_auto_follows_the_transport_and_dmodk_needs_a_switched_fabric():
    from simdist.io.load import load_scenario

    ib = load_scenario(ROOT / "scenarios/default.yaml")
    eth = load_scenario(ROOT / "scenarios/examples/ethernet-16node-100g.yaml")
    assert build_topology(ib.cluster).graph.graph["routing"] == "dmodk"
    assert build_topology(eth.cluster).graph.graph["routing"] == "ecmp"
    with pytest.raises(ScenarioError, match="cluster.fabric.routing"):
        load_scenario(ROOT / "scenarios/examples/torus2d-64node.yaml", ["cluster.fabric.routing=dmodk"])
    with pytest.raises(ScenarioError, match="cluster.fabric.routing"):
        load_scenario(ROOT / "scenarios/default.yaml", ["cluster.fabric.routing=random"])


@pytest.mark.parametrize("shift", [32, 40, 96])
def test_dmodk_sends_a_shift_up_distinct_spines(shift):
    # 16 nodes x 8 rails under 4 leaves: every flow of GPU i -> i + shift leaving leaf 0 takes its own spine
    c = cluster(16, "fat_tree", DGX_A100, nics=8, nodes_per_leaf=4)
    t = build_topology(c)
    from simdist.topology.routing import Router
    router = Router(t)
    ups = []
    for src in range(32):  # the GPUs of leaf 0
        names = [t.links.name(i) for i in router.path(src, (src + shift) % 128)]
        ups += [n for n in names if n.startswith("leaf0->spine")]
    assert len(ups) == 32 and len(set(ups)) == 32
