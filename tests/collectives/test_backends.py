"""Backend-faithful algorithm choice: textbook passes through, gloo's fixed algorithms, NCCL's
tuning model (tree for small messages across many nodes, ring for large ones and inside a node)."""
from __future__ import annotations

import pytest

from simdist.collectives.gloo import reduce_segments
from simdist.collectives.backends import build_backend_schedule, select_algorithm
from simdist.collectives.nccl import nccl_choice, nccl_predicted_time_s
from simdist.collectives.schedule import Group
from simdist.collectives.star import endpoint_bytes

G64 = Group.flat(range(64 * 8), 8)  # 64 nodes of 8
G1 = Group.flat(range(8), 8)


def test_textbook_runs_what_is_asked():
    for alg in ("ring", "tree", "halving_doubling", "hierarchical"):
        assert select_algorithm("textbook", "all_reduce", 1e6, G1, requested=alg) == alg


@pytest.mark.parametrize("size", [1e3, 1e6, 1e9])
def test_gloo_allreduce_is_ring_and_its_own_reduce_broadcast(size):
    assert select_algorithm("gloo", "all_reduce", size, G64, requested="tree") == "ring"
    assert select_algorithm("gloo", "reduce", size, G64) == "gloo_reduce"
    assert select_algorithm("gloo", "broadcast", size, G64) == "gloo_broadcast"
    assert select_algorithm("gloo", "all_gather", size, G64) == "ring"
    assert select_algorithm("gloo", "all_reduce", size, G64, requested="ps") == "ps"


def test_gloo_hierarchical_goes_through_node_leaders():
    g = Group.flat(range(4), 2)  # 2 x 2 racks, as on the emulated cluster
    sched = build_backend_schedule("gloo", "all_reduce", 16e6, g, requested="hierarchical")
    assert sched.algorithm == "gloo_hierarchical"
    sent, recv = endpoint_bytes(sched)
    # the leaders (0, 2) run a 2-rank ring: each sends 2(n-1)/n S = S; non-leaders stay inside the node
    inter = sum(t.size_bytes * s.repeat for s in sched.chains[0] for t in s.transfers if {t.src, t.dst} == {0, 2})
    assert inter == pytest.approx(2 * 16e6)
    # a non-leader receives gloo's reduce-scatter segments (n_seg - 2 of them) plus the broadcast back
    seg, count = reduce_segments(2, 16e6)
    assert recv[1] == pytest.approx((count - 2) * seg + 16e6) and recv[3] == recv[1]


def test_nccl_closed_form_picks_tree_for_small_messages_on_many_nodes_and_ring_inside_a_node():
    # without a timer the tuner ranks by NCCL's closed form on the default NodeFabric
    assert select_algorithm("nccl", "all_reduce", 1e3, G64).startswith("tree/")
    assert select_algorithm("nccl", "all_reduce", 1e6, G64).startswith("tree/")
    for size in (1e3, 1e6, 1e9):
        assert select_algorithm("nccl", "all_reduce", size, G1).startswith("ring/")
        assert select_algorithm("nccl", "all_gather", size, G64).startswith("ring/")


def test_nccl_model_shape():
    # tree latency grows with log2(nodes), ring latency linearly: the crossover size grows with nodes
    def crossover(nodes):
        size = 64.0
        while nccl_choice("all_reduce", size, nodes * 8, nodes)[0] == "tree" and size < 1e12:
            size *= 2
        return size

    assert crossover(4) < crossover(16) < crossover(128)
    assert nccl_predicted_time_s("all_gather", "tree", "Simple", 1e6, 16, 2) is None
    t_small = nccl_predicted_time_s("all_reduce", "ring", "LL", 8, 16, 2)
    t_big = nccl_predicted_time_s("all_reduce", "ring", "LL", 8e6, 16, 2)
    assert 0 < t_small < t_big


def test_nccl_schedule_says_algorithm_and_protocol():
    sched = build_backend_schedule("nccl", "all_reduce", 1e3, G64)
    assert sched.algorithm == f"tree/{sched.protocol}" and sched.protocol in ("LL", "LL128", "Simple")


def test_unknown_backend():
    with pytest.raises(ValueError, match="unknown backend"):
        select_algorithm("mpi", "all_reduce", 1e6, G1)
