"""Analytical (static congestion) model: closed forms, per-step sharing across chains, accounting."""
from __future__ import annotations

import pytest
import simpy

from simdist.collectives.schedule import CollectiveOp, Schedule, Step, Transfer
from simdist.network.analytical import AnalyticalNetwork
from tests.network.topos import dumbbell, one_step, ring_allreduce, single_switch


def test_ring_closed_form():
    n, size = 16, 1e9
    t = AnalyticalNetwork(single_switch(n, efficiency=0.5)).schedule_time(ring_allreduce(n, size))
    expected = 2 * (n - 1) / n * size / 5e9 + 2 * (n - 1) * 2e-6
    assert t == pytest.approx(expected, rel=1e-12)


def test_steps_of_the_same_index_share_links_statically():
    topo = dumbbell(2, 2, latency_s=0.0)
    a = (Step((Transfer(0, 2, 1e9),)),)
    b = (Step((Transfer(1, 3, 1e9),)), Step((Transfer(1, 3, 1e9),)))
    sched = Schedule(CollectiveOp.ALL_TO_ALL, "hand", 0.0, (a, b))
    # step 0: the core carries two transfers (5 GB/s each, 0.2 s); b's step 1 is alone (0.1 s)
    assert AnalyticalNetwork(topo).schedule_time(sched) == pytest.approx(0.3)


def test_lockstep_counts_members_on_a_link():
    topo = single_switch(3, latency_s=0.0)
    # 0->1 and 0->2 in lockstep: gpu0's uplink carries both, each at 5 GB/s
    assert AnalyticalNetwork(topo).schedule_time(one_step([(0, 1, 1e9), (0, 2, 1e9)], lockstep=True)) == pytest.approx(0.2)


def test_delay_and_repeat():
    topo = single_switch(2, latency_s=1e-6)
    step = Step((Transfer(0, 1, 1e8),), repeat=3, delay_s=0.5)
    sched = Schedule(CollectiveOp.BROADCAST, "hand", 1e8, ((step,),))
    assert AnalyticalNetwork(topo).schedule_time(sched) == pytest.approx(3 * (2e-6 + 0.01) + 0.5)


def test_run_waits_schedule_time_and_accounts_bytes():
    topo = dumbbell(1, 1, latency_s=0.0)
    net = AnalyticalNetwork(topo)
    env = simpy.Environment()
    env.process(net.run(env, one_step([(0, 1, 1e9)])))
    env.run()
    assert env.now == pytest.approx(0.1)
    assert net.link_bytes.sum() == pytest.approx(3e9)
    assert net.link_utilization(0.1)["A->B"] == pytest.approx(1.0)


def test_degraded_link_slows_later_schedules():
    topo = dumbbell(1, 1, latency_s=0.0)
    net = AnalyticalNetwork(topo)
    net.set_link_capacity(topo.links.index[("A", "B")], 2.5e9)
    assert net.schedule_time(one_step([(0, 1, 1e9)])) == pytest.approx(0.4)


def test_answer_follows_capacity_changes():
    topo = dumbbell(1, 1, latency_s=0.0)
    net = AnalyticalNetwork(topo)
    sched = one_step([(0, 1, 1e9)])
    assert net.schedule_time(sched) == pytest.approx(0.1)
    net.set_link_capacity(topo.links.index[("A", "B")], 5e9)
    assert net.schedule_time(sched) == pytest.approx(0.2)


def test_dead_link_is_infeasible():
    from simdist.errors import InfeasibleError

    topo = dumbbell(1, 1)
    net = AnalyticalNetwork(topo)
    net.set_link_capacity(topo.links.index[("A", "B")], 0.0)
    with pytest.raises(InfeasibleError):
        net.schedule_time(one_step([(0, 1, 1e6)]))
