"""Bytes per rank against formulas, closed forms against hand values and against the uniform-star
timing of the schedules, nccl-tests bus factors."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdist.collectives import cost
from simdist.collectives.algorithms import SUPPORTED_OPS, Algorithm, build_schedule, supports
from simdist.collectives.gloo import gloo_broadcast_time, gloo_reduce_chain, gloo_reduce_time, reduce_segments
from simdist.collectives.ps import ps_chains
from simdist.collectives.schedule import CollectiveOp, Group, Schedule
from simdist.collectives.star import endpoint_bytes, star_time

A, B = 5e-6, 10e9  # alpha 5 us, 10 GB/s


@pytest.mark.parametrize("n", [2, 3, 5, 8, 16])
@pytest.mark.parametrize("alg", ["ring", "halving_doubling"])
def test_all_reduce_bytes_per_rank(n, alg):
    size = 64e6
    sent, recv = endpoint_bytes(build_schedule("all_reduce", alg, size, Group.flat(range(n), n)))
    if alg == "ring" or n & (n - 1) == 0:
        for r in range(n):
            assert sent[r] == pytest.approx(2 * (n - 1) / n * size)
            assert recv[r] == pytest.approx(2 * (n - 1) / n * size)
    else:  # folded ranks send S once and receive S once; the others add S on top of the 2(p-1)/p S
        p = 1 << (n.bit_length() - 1)
        assert sorted(sent.values())[0] == pytest.approx(size)
        assert max(sent.values()) == pytest.approx(2 * (p - 1) / p * size + size)


@pytest.mark.parametrize("n", [2, 4, 7])
@pytest.mark.parametrize("op", ["reduce_scatter", "all_gather"])
def test_ring_half_ops_bytes_per_rank(n, op):
    sent, recv = endpoint_bytes(build_schedule(op, "ring", 30e6, Group.flat(range(n), n)))
    assert all(v == pytest.approx((n - 1) / n * 30e6) for v in list(sent.values()) + list(recv.values()))


@pytest.mark.parametrize("nodes,per_node", [(2, 4), (4, 8), (3, 2)])
def test_hierarchical_bytes_per_rank(nodes, per_node):
    size = 48e6
    sent, _ = endpoint_bytes(build_schedule("all_reduce", "hierarchical", size, Group.flat(range(nodes * per_node), per_node)))
    L, M = per_node, nodes
    expected = 2 * (L - 1) / L * size + 2 * (M - 1) / M * size / L
    assert all(v == pytest.approx(expected) for v in sent.values())


def test_ps_dedicated_single_server_receives_n_times_s():
    n, size = 6, 10e6
    sched = build_schedule("all_reduce", "ps", size, Group.flat(range(n), 1), servers=(n,), server_delay_s=1e-3)
    sent, recv = endpoint_bytes(sched)
    assert recv[n] == pytest.approx(n * size) and sent[n] == pytest.approx(n * size)
    assert all(sent[w] == recv[w] == pytest.approx(size) for w in range(n))
    assert sched.chains[0][0].delay_s == 1e-3
    assert star_time(sched, A, B) == pytest.approx(2 * A + 1e-3 + 2 * n * size / B)
    assert star_time(sched, A, B) == pytest.approx(cost.ps_all_reduce_time(n, 1, False, size, A, B, 1e-3))


@pytest.mark.parametrize("n,k,colocated", [(6, 1, False), (8, 2, False), (8, 8, True), (8, 2, True)])
def test_partitioned_ps_pipelines_push_and_pull(n, k, colocated):
    """communication.ps.partition (4 MB, BytePS's default): push partition j+1 while pulling j. The star
    time equals the closed form; a dedicated server's link then carries push in and pull out at once."""
    size, part = 10e6 * k, 4e6
    servers = tuple(range(0, n, n // k))[:k] if colocated else tuple(range(n, n + k))
    group = Group.flat(range(n), 1)
    sched = Schedule(CollectiveOp.ALL_REDUCE, "ps", size, ps_chains(size, group, servers, 1e-3, partition_bytes=part))
    sent, recv = endpoint_bytes(sched)
    whole_sent, whole_recv = endpoint_bytes(build_schedule("all_reduce", "ps", size, group, servers=servers))
    assert sent == pytest.approx(whole_sent) and recv == pytest.approx(whole_recv)  # same bytes, pipelined
    assert sum(s.delay_s for s in sched.chains[0]) == pytest.approx(1e-3)  # the update, spread per partition
    assert star_time(sched, A, B) == pytest.approx(cost.ps_all_reduce_time(n, k, colocated, size, A, B, 1e-3, part))
    if not colocated:  # 10 MB shards in 3 partitions: 4 alpha + (2 + 2) / 3 of one phase
        phase = max(size, n * size / k) / B
        assert star_time(sched, A, B) == pytest.approx(4 * A + 1e-3 + 4 / 3 * phase)


@pytest.mark.parametrize("n,k", [(4, 4), (8, 8), (8, 2), (6, 3)])
def test_ps_colocated_sharded_wire_bytes(n, k):
    size = 12e6
    servers = tuple(range(0, n, n // k))[:k]
    sched = build_schedule("all_reduce", "ps", size, Group.flat(range(n), 1), servers=servers)
    sent, recv = endpoint_bytes(sched)
    shard = size / k
    for w in range(n):
        own_server = w in servers
        # push: a worker sends every shard except its own; pull: it receives the same shards back;
        # a server also receives the (n-1) other workers' copies of its shard and sends them back
        expected = (k - own_server) * shard + (n - 1) * shard * own_server
        assert sent[w] == pytest.approx(expected) and recv[w] == pytest.approx(expected)
    assert sched.wire_bytes() == pytest.approx(2 * k * (n - 1) * shard)
    assert star_time(sched, A, B) == pytest.approx(cost.ps_all_reduce_time(n, k, True, size, A, B))
    if k == n:
        assert star_time(sched, A, B) == pytest.approx(2 * A + 2 * (n - 1) / n * size / B)


def test_hand_values():
    # ring all-reduce, 4 ranks, 100 MB at 10 GB/s, 5 us: 6 * 5 us + 1.5 * 10 ms
    assert cost.ring_all_reduce_time(4, 100e6, A, B) == pytest.approx(30e-6 + 15e-3)
    assert cost.ring_reduce_scatter_time(4, 100e6, A, B) == pytest.approx(15e-6 + 7.5e-3)
    assert cost.halving_doubling_all_reduce_time(8, 80e6, A, B) == pytest.approx(6 * A + 2 * 7 / 8 * 8e-3)
    assert cost.halving_doubling_all_reduce_time(6, 80e6, A, B) == pytest.approx(4 * A + 1.5 * 8e-3 + 2 * (A + 8e-3))
    assert cost.chain_time(5, 10e6, A, B, chunks=10) == pytest.approx(13 * (A + 1e6 / B))
    assert cost.ring_all_to_all_time(4, 40e6, A, B) == pytest.approx(3 * (A + 1e-3))
    assert cost.ps_all_reduce_time(4, 1, False, 10e6, A, B) == pytest.approx(2 * A + 2 * 4e-3)
    # in 4 MB partitions (3 of the 10 MB shard), push and pull overlap: 4 alpha + (2 + 2) / 3 x 4 ms
    assert cost.ps_all_reduce_time(4, 1, False, 10e6, A, B, partition_bytes=4e6) == pytest.approx(4 * A + 4 / 3 * 4e-3)
    # hierarchical 2 nodes x 4: intra ring RS/AG of 80 MB over 4 ranks at 100 GB/s, inter 2 ranks on 20 MB
    t = cost.hierarchical_all_reduce_time(2, 4, 80e6, 1e-6, 100e9, A, B)
    assert t == pytest.approx(2 * (3e-6 + 0.75 * 0.8e-3) + 2 * A + 20e6 / B)
    # tree, 8 ranks, 4 chunks: depth 3, busiest rank has 4 edges, s = S/8
    d = 3
    s = 8e6 / 8
    assert cost.tree_all_reduce_time(8, 8e6, A, B, chunks=4) == pytest.approx((2 * d - 1) * (A + s / B) + 4 * (A + 4 * s / B))


def test_tree_large_message_bandwidth_term_tends_to_2S_over_B():
    n, size = 64, 1e10
    c = cost.optimal_tree_chunks(n, size, A, B)
    t = cost.tree_all_reduce_time(n, size, A, B, c)
    assert 2 * size / B < t < 2.02 * size / B
    # and the optimum beats its neighbours
    assert t <= cost.tree_all_reduce_time(n, size, A, B, c + 1)
    assert t <= cost.tree_all_reduce_time(n, size, A, B, max(1, c - 1))


FLAT_PAIRS = [(str(a), str(op)) for a in (Algorithm.RING, Algorithm.TREE, Algorithm.HALVING_DOUBLING) for op in SUPPORTED_OPS[a]]


@settings(max_examples=60, deadline=None)
@given(
    pair=st.sampled_from(FLAT_PAIRS),
    n=st.integers(1, 33),
    size=st.floats(1.0, 1e9),
    alpha=st.floats(0.0, 1e-4),
    chunks=st.one_of(st.none(), st.integers(1, 64)),
)
def test_star_timing_of_schedule_equals_closed_form(pair, n, size, alpha, chunks):
    alg, op = pair
    if alg == "halving_doubling" and op != "all_reduce" and n & (n - 1):
        return
    sched = build_schedule(op, alg, size, Group.flat(range(n), 8), chunks=chunks)
    assert star_time(sched, alpha, B) == pytest.approx(cost.flat_time(op, alg, n, size, alpha, B, chunks), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("nodes,per_node", [(2, 4), (4, 2), (3, 8), (1, 8), (8, 1)])
@pytest.mark.parametrize("intra,inter", [("ring", "ring"), ("ring", "tree"), ("tree", "ring"), ("halving_doubling", "halving_doubling")])
def test_hierarchical_star_timing_equals_closed_form(nodes, per_node, intra, inter):
    size = 96e6
    g = Group.flat(range(nodes * per_node), per_node)
    sched = build_schedule("all_reduce", "hierarchical", size, g, intra=intra, inter=inter, chunks=16)
    expected = cost.hierarchical_all_reduce_time(nodes, per_node, size, A, B, A, B, intra, inter, chunks=16)
    assert star_time(sched, A, B) == pytest.approx(expected)


def test_torus2d_grid_and_cost():
    g = Group.flat(range(12), 1)  # 3 x 4 grid
    sched = build_schedule("all_reduce", "torus2d", 12e6, g)
    assert star_time(sched, A, B) == pytest.approx(cost.torus2d_all_reduce_time(3, 4, 12e6, A, B, A, B))
    assert star_time(sched, A, B) == pytest.approx(2 * (3 * A + 0.75 * 12e6 / B) + 2 * (2 * A + 2 / 3 * 3e6 / B))


def test_bus_factors_and_bandwidths():
    assert cost.bus_factor("all_reduce", 8) == pytest.approx(1.75)
    for op in ("reduce_scatter", "all_gather", "all_to_all"):
        assert cost.bus_factor(op, 8) == pytest.approx(0.875)
    assert cost.bus_factor("broadcast", 8) == cost.bus_factor("reduce", 8) == 1.0
    assert cost.algbw_Bps(1e9, 0.1) == pytest.approx(1e10)
    assert cost.busbw_Bps("all_reduce", 4, 1e9, 0.1) == pytest.approx(1.5e10)
    # ring all-reduce's busbw approaches the link bandwidth when alpha vanishes
    t = cost.ring_all_reduce_time(16, 1e9, 0.0, B)
    assert cost.busbw_Bps("all_reduce", 16, 1e9, t) == pytest.approx(B)


def test_gloo_reduce_is_about_1_5_S_over_B_for_two_ranks():
    size = 64e6
    t = gloo_reduce_time(2, size, 0.0, B)
    assert 1.45 < t / (size / B) < 1.5
    sched = Schedule("reduce", "gloo_reduce", size, (gloo_reduce_chain(size, (0, 1)),))
    assert star_time(sched, A, B) == pytest.approx(gloo_reduce_time(2, size, A, B))
    seg, count = reduce_segments(2, size)
    assert seg == 1024 * 1024 and count % 2 == 0 and count * seg >= size


def test_gloo_broadcast_binomial_with_concurrent_sends():
    # 8 ranks: root sends 3 copies at once, then rank 1 two, then rank 3 one: 6 S/B
    assert gloo_broadcast_time(8, 1e6, 0.0, B) == pytest.approx(6 * 1e6 / B)
    assert gloo_broadcast_time(2, 1e6, A, B) == pytest.approx(A + 1e6 / B)


def test_registry_and_errors():
    assert supports("all_reduce", "tree") and not supports("all_gather", "tree")
    assert not supports("broadcast", "ps") and not supports("nope", "ring")
    g = Group.flat(range(4), 2)
    with pytest.raises(ValueError, match="tree has no all_gather"):
        build_schedule("all_gather", "tree", 1e6, g)
    with pytest.raises(ValueError, match="unknown algorithm"):
        build_schedule("all_reduce", "butterfly", 1e6, g)
    with pytest.raises(ValueError, match="power-of-two"):
        build_schedule("reduce_scatter", "halving_doubling", 1e6, Group.flat(range(6), 6))
    with pytest.raises(ValueError, match="at least one server"):
        build_schedule("all_reduce", "ps", 1e6, g)
    with pytest.raises(ValueError, match="same number of ranks"):
        build_schedule("all_reduce", "hierarchical", 1e6, Group.flat(range(5), 2))
    with pytest.raises(ValueError, match="chunks"):
        build_schedule("broadcast", "ring", 1e6, g, chunks=0)


@pytest.mark.parametrize("alg", [str(a) for a in Algorithm])
def test_single_rank_groups_have_no_transfers(alg):
    kwargs = {"servers": (0,)} if alg == "ps" else {}
    for op in SUPPORTED_OPS[Algorithm(alg)]:
        sched = build_schedule(op, alg, 1e6, Group.flat([7] if alg != "ps" else [0], 1), **kwargs)
        assert sched.wire_bytes() == 0 and star_time(sched, A, B) == 0.0


def test_ring_at_16384_ranks_is_two_steps_sharing_one_transfer_tuple():
    n = 16384
    sched = build_schedule("all_reduce", "ring", 1e9, Group.flat(range(n), 8))
    (rs, ag), = sched.chains
    assert rs.transfers is ag.transfers and len(rs.transfers) == n
    assert rs.repeat + ag.repeat == 2 * (n - 1)
    assert sched.wire_bytes() == pytest.approx(2 * (n - 1) * 1e9)
    assert math.isclose(star_time(sched, A, B), cost.ring_all_reduce_time(n, 1e9, A, B))
