"""A cluster's topology and routes are built once per process (the context cache keeps them) and shared by every
run on it."""
from __future__ import annotations

from dataclasses import replace

import simpy

from simdist.engine.context_cache import ContextCache, shared_topology
from simdist.network.analytical import AnalyticalNetwork
from simdist.network.flows import FlowNetwork
from simdist.topology.build import build_topology
from simdist.topology.routing import shared_router
from tests.network.topos import one_step
from tests.topology.factory import DGX_A100, cluster


def test_equal_specs_share_one_topology_and_router():
    spec = cluster(4, "fat_tree", DGX_A100, nics=2, nodes_per_leaf=2)
    equal = replace(spec, node_groups=tuple(replace(g) for g in spec.node_groups))  # another object, equal
    a, b = shared_topology(spec), shared_topology(equal)
    assert a is b and shared_router(a) is shared_router(b)
    assert shared_topology(replace(spec, fabric=replace(spec.fabric, nodes_per_leaf=1))) is not a
    assert build_topology(spec) is not a  # build_topology keeps nothing


def test_the_cache_keeps_the_latest_topologies_and_clear_forgets_them():
    cache = ContextCache(max_topologies=2)
    specs = [cluster(4, "fat_tree", DGX_A100, nics=2, nodes_per_leaf=n) for n in (1, 2, 4)]
    first = cache.topology(specs[0])
    assert cache.topology(specs[0]) is first and cache.stats.topologies_built == 1
    cache.topology(specs[1]), cache.topology(specs[2])  # the first is the least recently used: out
    assert cache.topology(specs[0]) is not first and cache.stats.topologies_built == 4
    kept = cache.topology(specs[0])
    cache.clear()
    assert cache.topology(specs[0]) is not kept


def test_models_on_one_topology_share_compiled_steps_until_one_loses_a_link():
    topo = build_topology(cluster(4, "fat_tree", DGX_A100, nics=1, nodes_per_leaf=2))
    step = one_step([(0, 31, 1e6)]).chains[0][0]
    flow, est = FlowNetwork(simpy.Environment(), topo), AnalyticalNetwork(topo)
    assert flow.steps is est.steps and flow.steps.get(step) is est.steps.get(step)
    before = est.steps.get(step).groups[0].links.tolist()
    spine = next(topo.links.name(i) for i in before if "spine" in topo.links.name(i))
    flow.fail_link(spine)
    assert flow.steps is not est.steps  # its own routes now; the shared ones are untouched
    assert est.steps.get(step).groups[0].links.tolist() == before
    assert all(flow.capacity_Bps[i] > 0 for i in flow.steps.get(step).groups[0].links)
