"""The class-cached cross-machine routes (topology.classroutes) equal the Router's general walk link for
link: fat trees of two and three levels, with rails, oversubscribed, every routing mode, dedicated server
hosts, a dead cable; all pairs on small trees, a random sample on a 4,096-GPU one."""
from __future__ import annotations

import dataclasses
import random

import pytest

from simdist.hardware.specs import RoutingKind
from simdist.topology.build import build_topology
from simdist.topology.routing import Router
from tests.topology.factory import DGX_A100, DGX1_V100, PCIE_BOX, UNIFORM, cluster

MODES = [RoutingKind.ECMP, RoutingKind.DMODK, RoutingKind.SPRAY]

SHAPES = {
    "2lvl-dgx-rails": cluster(8, "fat_tree", DGX_A100, nics=8, nodes_per_leaf=2),
    "2lvl-4nics-oversub": cluster(10, "fat_tree", DGX_A100, nics=4, nodes_per_leaf=3, oversubscription=3.0),
    "3lvl-1gpu": cluster(32, "fat_tree", UNIFORM, gpus=1, nodes_per_leaf=2, levels=3, leaves_per_pod=4),
    "3lvl-dgx-rails": cluster(16, "fat_tree", DGX_A100, nics=8, nodes_per_leaf=2, levels=3, leaves_per_pod=2),
    "3lvl-cube-oversub": cluster(12, "fat_tree", DGX1_V100, nics=2, nodes_per_leaf=2, levels=3, leaves_per_pod=2,
                                 oversubscription=2.0),
    "2lvl-pcie-1nic": cluster(6, "fat_tree", PCIE_BOX, gpus=4, nics=1, nodes_per_leaf=2),
    "single-switch": cluster(4, "single_switch", DGX_A100, nics=8),
}


def with_routing(spec, mode):
    return dataclasses.replace(spec, fabric=dataclasses.replace(spec.fabric, routing=mode))


def assert_same(topo, pairs, down=frozenset(), keys=(0, 1)):
    fast = Router(topo, down)
    slow = Router(topo, down, classes=False)
    assert fast.classes is not None and slow.classes is None
    for src, dst in pairs:
        for key in keys:
            assert fast.path(src, dst, key) == slow.path(src, dst, key), (src, dst, key)


def all_pairs(topo):
    n = len(topo.endpoints)
    return [(a, b) for a in range(n) for b in range(n)]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("name", list(SHAPES))
def test_all_pairs_equal_the_general_walk(name, mode):
    topo = build_topology(with_routing(SHAPES[name], mode))
    assert_same(topo, all_pairs(topo))


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_with_server_hosts(mode):
    topo = build_topology(with_routing(SHAPES["3lvl-dgx-rails"], mode), server_hosts=3)
    assert_same(topo, all_pairs(topo))


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("name, cable", [("3lvl-dgx-rails", ("leaf0", "agg0.0")),
                                         ("3lvl-dgx-rails", ("node0/nic3", "leaf0")),
                                         ("2lvl-dgx-rails", ("leaf1", "spine0")),
                                         ("3lvl-1gpu", ("agg1.0", "core0"))])
def test_a_dead_cable_reroutes_alike(name, cable, mode):
    topo = build_topology(with_routing(SHAPES[name], mode))
    assert topo.graph.has_edge(*cable)
    assert_same(topo, all_pairs(topo), down=frozenset({cable}))
    # and the without() copy keeps the fast path
    assert Router(topo).without(frozenset({cable})).classes is not None


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("shape", [{}, {"nodes_per_leaf": 4, "leaves_per_pod": 8, "levels": 3}],
                         ids=["default", "16-pods"])
def test_sample_of_a_4096_gpu_tree(mode, shape):
    spec = with_routing(cluster(512, "fat_tree", DGX_A100, nics=8, **shape), mode)
    topo = build_topology(spec)
    if shape:
        assert topo.graph.graph["fabric"]["pods"] == 16
    rng = random.Random(7)
    n = len(topo.endpoints)
    pairs = [(rng.randrange(n), rng.randrange(n)) for _ in range(1500)]
    pairs += [(a, 7) for a in range(0, n, 37)]  # many sources to one destination (a PS server)
    assert_same(topo, pairs, keys=(0,))


def test_ring_and_torus_fabrics_unchanged():
    for spec in (cluster(6, "ring", DGX_A100, nics=8), cluster(8, "torus2d", UNIFORM, gpus=4, nics=2)):
        topo = build_topology(spec)
        assert_same(topo, all_pairs(topo))
