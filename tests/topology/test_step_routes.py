"""A step's routes in one pass (Router.paths_flat) and the twin-shared core next hops equal the Router's
answers pair by pair and vertex by vertex."""
from __future__ import annotations

import dataclasses
import math

import pytest

from simdist.hardware.specs import RoutingKind
from simdist.topology.build import build_topology
from simdist.topology.routing import Router
from tests.topology.factory import DGX_A100, UNIFORM, cluster

TREES = {
    "3lvl-dgx-rails": cluster(16, "fat_tree", DGX_A100, nics=8, nodes_per_leaf=2, levels=3, leaves_per_pod=2),
    "3lvl-1gpu": cluster(32, "fat_tree", UNIFORM, gpus=1, nodes_per_leaf=2, levels=3, leaves_per_pod=4),
    "2lvl-dgx-rails": cluster(8, "fat_tree", DGX_A100, nics=8, nodes_per_leaf=2),
}


def _topology(name: str, mode: RoutingKind):
    spec = TREES[name]
    return build_topology(dataclasses.replace(spec, fabric=dataclasses.replace(spec.fabric, routing=mode)))


@pytest.mark.parametrize("mode", [RoutingKind.ECMP, RoutingKind.DMODK], ids=lambda m: m.value)
@pytest.mark.parametrize("name", list(TREES))
def test_paths_flat_is_path_pair_by_pair(name, mode):
    topo = _topology(name, mode)
    n = len(topo.endpoints)
    pairs = [(a, b) for a in range(n) for b in range(n)]  # self pairs, same node, same and other leaves
    flat, lengths = Router(topo).paths_flat(pairs)
    reference = Router(topo, classes=False)
    at = 0
    for (src, dst), k in zip(pairs, lengths):
        assert tuple(flat[at:at + k]) == reference.path(src, dst, 0), (src, dst)
        at += k
    assert at == len(flat)


@pytest.mark.parametrize("name", list(TREES))
def test_twin_shared_core_next_hops_are_each_vertex_own(name):
    topo = _topology(name, RoutingKind.ECMP)
    r = Router(topo)
    core = sorted(r.graph.core_adj)
    shared = 0
    for a in core:
        dist = r.distances.core_dist(a)
        for v in core:
            if v == a or dist.get(v) is None:
                continue
            own = tuple(sorted(w for w, c in r.graph.core_adj[v].items() if dist.get(w, math.inf) + c == dist[v]))
            shared += r.distances._twin_key(a, v) is not None and (r.distances._twin_key(a, v) in r.distances._nh_twin)
            assert r.distances.core_next(a, v) == own, (a, v)
    assert shared or name.startswith("2lvl")  # used on three levels (two: every spine is next to every leaf)
