"""A ring step's lockstep group (every member the same size) equals the general per-member computation,
and a ring's TransferArray steps compile like the same steps held as Transfer tuples."""
from __future__ import annotations

import numpy as np

from simdist.collectives.ring import ring_chain
from simdist.collectives.schedule import CollectiveOp, Step, Transfer
from simdist.network.paths import PathTable
from simdist.network.steps import RoutedPairs, StepCache, compile_step
from simdist.topology.build import build_topology
from tests.topology.factory import DGX_A100, cluster


def _general(routes: RoutedPairs, sizes: np.ndarray, repeat: int):
    live = (sizes > 0) & (routes.lengths > 0)
    weights = np.repeat(np.where(live, sizes, 0.0), routes.lengths) * repeat
    member = np.repeat(live, routes.lengths).astype(float)
    counts = np.bincount(routes.inverse, weights=member, minlength=routes.links.size)
    link_bytes = np.bincount(routes.inverse, weights=weights, minlength=routes.links.size)
    used = counts > 0
    return routes.links[used], counts[used], float(sizes[live].max() * repeat), link_bytes[used]


def test_uniform_group_equals_the_general_computation():
    topo = build_topology(cluster(4, "fat_tree", DGX_A100, nics=8, nodes_per_leaf=2))
    paths = PathTable(topo)
    ranks = list(range(len(topo.endpoints)))
    pairs = tuple((ranks[i], ranks[(i + 1) % len(ranks)]) for i in range(len(ranks)))
    routes = RoutedPairs.route(pairs, paths)
    for size, repeat in ((1.0e6 / 3, 31), (7.0, 1), (0.1, 3)):
        sizes = np.full(len(pairs), size)
        g = routes.group(sizes, repeat)
        links, counts, total, link_bytes = _general(routes, sizes, repeat)
        assert np.array_equal(g.links, links) and np.array_equal(g.counts, counts)
        assert g.size_bytes == total and np.array_equal(g.link_bytes, link_bytes)


def test_transfer_array_steps_compile_like_transfer_tuples():
    topo = build_topology(cluster(4, "fat_tree", DGX_A100, nics=8, nodes_per_leaf=2))
    ranks = tuple(range(len(topo.endpoints)))
    (rs, ag) = ring_chain(CollectiveOp.ALL_REDUCE, 3.0e7, ranks)
    as_tuple = Step(tuple(rs.transfers), repeat=rs.repeat, reduce_bytes=rs.reduce_bytes, label=rs.label,
                    pipelined=True)
    assert rs == as_tuple and all(isinstance(t, Transfer) for t in rs.transfers)
    fast, slow = StepCache(PathTable(topo)), StepCache(PathTable(topo))
    assert fast.key(rs) == slow.key(as_tuple)
    a, b = fast.get(rs), compile_step(as_tuple, PathTable(topo))
    assert a.latency_s == b.latency_s and a.delay_s == b.delay_s and len(a.groups) == len(b.groups)
    for x, y in zip(a.groups, b.groups):
        assert np.array_equal(x.links, y.links) and np.array_equal(x.counts, y.counts)
        assert x.size_bytes == y.size_bytes and np.array_equal(x.link_bytes, y.link_bytes)
