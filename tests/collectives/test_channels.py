"""Multi-channel rings: channel counts, rotated ring orders (distinct entry/exit positions), data flow,
and on DGX-like nodes the closed form 2(N-1) alpha + 2(N-1)/N (S/C)/B_channel in both network models."""
from __future__ import annotations

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from simdist.collectives.algorithms import build_schedule
from simdist.collectives.backends import build_backend_schedule
from simdist.collectives.cost import busbw_Bps, ring_all_reduce_time, ring_reduce_scatter_time
from simdist.collectives.ring import channel_rings, effective_channels
from simdist.collectives.schedule import Group
from simdist.hardware.specs import IntraNodeLayout, IntraNodeSpec, LinkSpec
from simdist.network.analytical import AnalyticalNetwork
from simdist.network.flows import FlowNetwork
from simdist.topology.build import build_topology
from simdist.topology.routing import ring_channels
from tests.topology.factory import DGX_A100, IB200, cluster

from .symbolic import full, initial, run_phases

NIC_Bps = IB200.effective_Bps  # 22.5 GB/s


def test_effective_channels_rules():
    assert effective_channels(Group.flat(range(16), 8), None) == 1
    assert effective_channels(Group.flat(range(16), 8), 8) == 8
    assert effective_channels(Group.flat(range(16), 8), 32) == 8  # capped by ranks per node
    assert effective_channels(Group.flat(range(8), 8), 8) == 1  # single node
    assert effective_channels(Group.flat(range(8), 1), 8) == 1  # single-GPU nodes
    assert effective_channels(Group(tuple(range(6)), ((0, 1, 2, 3), (4, 5))), 4) == 2
    with pytest.raises(ValueError):
        effective_channels(Group.flat(range(16), 8), 0)
    with pytest.raises(ValueError):
        build_schedule("all_reduce", "ring", 1e6, Group.flat(range(16), 8), channels=1.5)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 5), st.integers(2, 8), st.integers(1, 8))
def test_rings_enter_and_leave_each_node_at_distinct_positions(nodes, k, channels):
    group = Group.flat(range(nodes * k), k)
    rings = channel_rings(group, channels)
    c_total = min(channels, k)
    assert len(rings) == c_total
    entries, exits = set(), set()
    for c, ring in enumerate(rings):
        assert sorted(ring) == list(range(nodes * k))
        for i in range(nodes):
            block = ring[i * k:(i + 1) * k]
            assert {r // k for r in block} == {i}  # a node's ranks stay contiguous
            assert block[0] % k == -(-c * k // c_total)  # enters at position ceil(c k / C)
        entries.add(ring[0] % k)
        exits.add(ring[k - 1] % k)
    assert len(entries) == len(exits) == c_total
    if c_total == 1:
        assert rings == [tuple(range(nodes * k))]


@pytest.mark.parametrize("nodes, k, channels", [(2, 4, 4), (3, 4, 2), (2, 3, 3)])
def test_every_channel_all_reduces_its_share(nodes, k, channels):
    n = nodes * k
    group = Group.flat(range(n), k)
    blocks = 4 * n
    sched = build_schedule("all_reduce", "ring", float(blocks * channels), group, channels=channels)
    assert len(sched.chains) == channels
    assert sched.wire_bytes() == pytest.approx(2 * (n - 1) * blocks * channels)  # = one ring's bytes
    for chain in sched.chains:
        state = initial(range(n), blocks)
        run_phases(state, chain, {r: list(range(blocks)) for r in range(n)}, 1.0)
        assert all(state[r][b] == full(range(n)) for r in range(n) for b in range(blocks))


def test_other_ops_and_gloo_keep_one_ring():
    g = Group.flat(range(16), 8)
    assert len(build_schedule("broadcast", "ring", 1e6, g, channels=8).chains) == 1
    assert len(build_schedule("all_reduce", "tree", 1e6, g, channels=8).chains) == 1
    assert len(build_backend_schedule("gloo", "all_reduce", 1e9, g, channels=8).chains) == 1
    assert len(build_backend_schedule("nccl", "all_reduce", 1e9, g, channels=8).chains) == 8  # nccl picks ring


def _times(topo, schedule):
    return (FlowNetwork(simpy.Environment(), topo).schedule_time(schedule),
            AnalyticalNetwork(topo).schedule_time(schedule))


def _alpha(topo, src, dst):
    from simdist.network.paths import PathTable
    return PathTable(topo).path(src, dst)[1]


def _ring_alpha(topo, schedule):
    """A pipelined ring step pays the mean hop latency of its ring (the same for every channel here)."""
    from simdist.network.paths import PathTable
    table = PathTable(topo)
    means = {round(sum(table.path(t.src, t.dst)[1] for t in chain[0].transfers) / len(chain[0].transfers), 15)
             for chain in schedule.chains}
    assert len(means) == 1
    return means.pop()


@pytest.mark.parametrize("nodes", [2, 4])
@pytest.mark.parametrize("nics", [8, 4, 2])
def test_dgx_channels_closed_form_and_busbw(nodes, nics):
    topo = build_topology(cluster(nodes, "single_switch", DGX_A100, nics=nics))
    group = Group.flat(range(8 * nodes), 8)
    c = ring_channels(topo, group.nodes)
    assert c == nics
    size, n = 1e9, 8 * nodes
    sched = build_schedule("all_reduce", "ring", size, group, channels=c)
    alpha = _ring_alpha(topo, sched)  # mean of 7 NVSwitch hops and 1 inter-node hop per node
    assert _alpha(topo, 0, 1) < alpha < _alpha(topo, 7, 8)
    expected = ring_all_reduce_time(n, size / c, alpha, NIC_Bps)  # each channel has its own NIC
    for t in _times(topo, sched):
        assert t == pytest.approx(expected, rel=1e-6)
    busbw = busbw_Bps("all_reduce", n, size, expected)
    assert busbw == pytest.approx(nics * NIC_Bps, rel=0.06)  # the node's NICs together, less latency
    rs = build_schedule("reduce_scatter", "ring", size, group, channels=c)
    expected_rs = ring_reduce_scatter_time(n, size / c, alpha, NIC_Bps)
    assert FlowNetwork(simpy.Environment(), topo).schedule_time(rs) == pytest.approx(expected_rs, rel=1e-6)


@pytest.mark.parametrize("nodes", [2, 3])
def test_one_nic_per_node_is_unchanged(nodes):
    topo = build_topology(cluster(nodes, "single_switch", DGX_A100, nics=1))
    group = Group.flat(range(8 * nodes), 8)
    c = ring_channels(topo, group.nodes)
    assert c == 1
    one = build_schedule("all_reduce", "ring", 1e9, group)
    assert build_schedule("all_reduce", "ring", 1e9, group, channels=c) == one
    t = FlowNetwork(simpy.Environment(), topo).schedule_time(one)
    assert busbw_Bps("all_reduce", 8 * nodes, 1e9, t) == pytest.approx(NIC_Bps, rel=0.06)


def test_switch_link_shared_by_the_channels_bounds_them():
    """NICs on the NVSwitch (no PCIe): each GPU's switch link carries all C channels, so a slow
    switch link (100 GB/s < 8 x 22.5) gives B_channel = 100/8 GB/s."""
    slow = IntraNodeSpec("slow", IntraNodeLayout.SWITCH, LinkSpec(100e9, 1e-6, name="nvs"))
    topo = build_topology(cluster(2, "single_switch", slow, nics=8))
    group = Group.flat(range(16), 8)
    sched = build_schedule("all_reduce", "ring", 1e9, group, channels=8)
    expected = ring_all_reduce_time(16, 1e9 / 8, _ring_alpha(topo, sched), 100e9 / 8)
    for t in _times(topo, sched):
        assert t == pytest.approx(expected, rel=1e-6)


def test_channels_spread_bytes_over_every_nic():
    topo = build_topology(cluster(2, "single_switch", DGX_A100, nics=8))
    net = FlowNetwork(simpy.Environment(), topo)
    proc = net.env.process(net.run(net.env, build_schedule("all_reduce", "ring", 1e9, Group.flat(range(16), 8),
                                                          channels=8)))
    net.env.run(proc)
    carried = net.link_bytes()
    up = [carried[topo.links.index[(f"node0/nic{m}", "switch")]] for m in range(8)]
    assert min(up) == pytest.approx(max(up), rel=1e-9) and min(up) > 0


def test_merged_hierarchical_and_torus_rings_stay_pipelined():
    # merge_parallel keeps Step.pipelined: the inter-node rings of hierarchical and torus2d pay the
    # mean hop latency per step, like flat rings, not the worst
    from simdist.collectives.algorithms import build_schedule as bs
    from simdist.collectives.schedule import Group as G

    g = G.flat(range(32), 8)
    for alg in ("hierarchical", "torus2d"):
        sched = bs("all_reduce", alg, 8e6, g)
        ring_steps = [s for c in sched.chains for s in c if s.label.startswith("ring")]
        assert ring_steps and all(s.pipelined for s in ring_steps), alg
