"""Flow-level model: closed forms on idle fabrics, sharing between concurrent schedules, invariants."""
from __future__ import annotations

import math

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from simdist.collectives.schedule import CollectiveOp, Schedule, Step, Transfer
from simdist.errors import InfeasibleError
from simdist.network.analytical import AnalyticalNetwork
from simdist.network.flows import FlowNetwork
from tests.network.topos import dumbbell, one_step, ring_allreduce, single_switch

B = 10e9 * 0.8  # effective NIC rate of single_switch(..., efficiency=0.8)
ALPHA = 2e-6  # NIC up + NIC down


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * abs(b)


def _flow_time(topo, schedule) -> float:
    return FlowNetwork(simpy.Environment(), topo).schedule_time(schedule)


@pytest.mark.parametrize("n", [2, 3, 8, 16])
def test_ring_all_reduce_equals_closed_form(n):
    topo = single_switch(n, efficiency=0.8)
    size = 1e9
    expected = 2 * (n - 1) / n * size / B + 2 * (n - 1) * ALPHA
    assert _close(_flow_time(topo, ring_allreduce(n, size)), expected)


@pytest.mark.parametrize("op", [CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_GATHER])
def test_ring_reduce_scatter_and_all_gather(op):
    n, size = 8, 256e6
    step = Step(tuple(Transfer(i, (i + 1) % n, size / n) for i in range(n)), repeat=n - 1)
    schedule = Schedule(op, "ring", size, ((step,),))
    expected = (n - 1) / n * size / B + (n - 1) * ALPHA
    assert _close(_flow_time(single_switch(n, efficiency=0.8), schedule), expected)


def halving_doubling(n: int, size: float) -> Schedule:
    steps = []
    k = int(math.log2(n))
    for j in range(k):  # reduce-scatter by recursive halving
        chunk = size / 2 ** (j + 1)
        steps.append(Step(tuple(Transfer(i, i ^ (1 << j), chunk) for i in range(n))))
    for j in reversed(range(k)):  # all-gather by recursive doubling
        chunk = size / 2 ** (j + 1)
        steps.append(Step(tuple(Transfer(i, i ^ (1 << j), chunk) for i in range(n))))
    return Schedule(CollectiveOp.ALL_REDUCE, "halving_doubling", size, (tuple(steps),))


def test_halving_doubling_power_of_two():
    n, size = 16, 1e9
    expected = 2 * (n - 1) / n * size / B + 2 * math.log2(n) * ALPHA
    assert _close(_flow_time(single_switch(n, efficiency=0.8), halving_doubling(n, size)), expected)


def test_ps_incast_is_bound_by_the_server_link():
    n, size = 8, 100e6
    topo = single_switch(n, servers=1)  # endpoint n is the dedicated server
    push = Step(tuple(Transfer(w, n, size) for w in range(n)), lockstep=False)
    pull = Step(tuple(Transfer(n, w, size) for w in range(n)), lockstep=False)
    schedule = Schedule(CollectiveOp.ALL_REDUCE, "ps", size, ((push, pull),))
    expected = 2 * (n * size / 10e9 + ALPHA)
    assert _close(_flow_time(topo, schedule), expected)
    assert _close(AnalyticalNetwork(topo).schedule_time(schedule), expected)


def _run_together(topo, schedules, starts=None):
    """Run schedules concurrently on one FlowNetwork; return each one's finish time and the network."""
    env = simpy.Environment()
    net = FlowNetwork(env, topo)
    ends: dict[int, float] = {}
    starts = starts or [0.0] * len(schedules)

    def proc(env, k, sched, t0):
        yield env.timeout(t0)
        yield from net.run(env, sched)
        ends[k] = env.now

    for k, (s, t0) in enumerate(zip(schedules, starts)):
        env.process(proc(env, k, s, t0))
    env.run()
    return [ends[k] for k in range(len(schedules))], net


def test_two_schedules_sharing_a_link_take_longer_than_one():
    topo = dumbbell(2, 2, latency_s=0.0)
    a = one_step([(0, 2, 1e9)])
    b = one_step([(1, 3, 1e9)])
    alone = _flow_time(topo, a)
    assert _close(alone, 0.1)
    ends, _ = _run_together(topo, [a, b])
    assert _close(ends[0], 0.2) and _close(ends[1], 0.2)


def test_late_start_shares_then_speeds_up():
    # a starts alone at 10 GB/s; b joins at 0.05 s; both at 5 GB/s; a has 0.5 GB left -> ends 0.15;
    # b then moved 0.5 GB and finishes its other 0.5 GB alone at 10 GB/s -> 0.2.
    topo = dumbbell(2, 2, latency_s=0.0)
    ends, _ = _run_together(topo, [one_step([(0, 2, 1e9)]), one_step([(1, 3, 1e9)])], starts=[0.0, 0.05])
    assert _close(ends[0], 0.15) and _close(ends[1], 0.2)


@pytest.mark.parametrize("lockstep, x_end", [(True, 0.15), (False, 0.2)])
def test_lockstep_group_moves_at_its_slowest_members_pace(lockstep, x_end):
    # G = {0->1, 2->3}; Z, W share 0's uplink with 0->1 (3 ways: 10/3 GB/s); X shares 2's uplink with 2->3.
    # lockstep: 2->3 is held to 10/3 too, so X gets 20/3 GB/s and ends at 0.15 s; independent: X gets 5.
    topo = single_switch(7, latency_s=0.0)
    g = one_step([(0, 1, 1e9), (2, 3, 1e9)], lockstep=lockstep)
    x = one_step([(2, 4, 1e9)])
    zw = one_step([(0, 5, 1e9), (0, 6, 1e9)])
    ends, _ = _run_together(topo, [g, x, zw])
    assert _close(ends[0], 0.3)
    assert _close(ends[1], x_end)
    assert _close(ends[2], 0.3)


def test_repeated_lockstep_step_is_one_group():
    topo = single_switch(4, latency_s=0.0)
    env = simpy.Environment()
    net = FlowNetwork(env, topo)
    env.process(net.run(env, ring_allreduce(4, 1e9)))
    env.run()
    assert net.fabric.solves == 1


def test_capacity_change_mid_transfer():
    # 1 GB at 10 GB/s; at 0.05 s the core drops to 2.5 GB/s: 0.5 GB left takes 0.2 s more.
    topo = dumbbell(1, 1, latency_s=0.0)
    env = simpy.Environment()
    net = FlowNetwork(env, topo)
    core = topo.links.index[("A", "B")]
    done = {}

    def worker(env):
        yield from net.run(env, one_step([(0, 1, 1e9)]))
        done["t"] = env.now

    def degrade(env):
        yield env.timeout(0.05)
        net.set_link_capacity(core, 2.5e9)

    env.process(worker(env))
    env.process(degrade(env))
    env.run()
    assert _close(done["t"], 0.25)


def test_dead_link_is_infeasible_alone():
    topo = dumbbell(1, 1)
    net = FlowNetwork(simpy.Environment(), topo)
    net.set_link_capacity(topo.links.index[("A", "B")], 0.0)
    with pytest.raises(InfeasibleError):
        net.schedule_time(one_step([(0, 1, 1e6)]))


def test_zero_bytes_and_self_transfers_take_only_latency():
    topo = single_switch(3)
    assert _close(_flow_time(topo, one_step([(0, 1, 0.0), (2, 2, 1e9)])), 2e-6)


def test_utilization_of_a_lone_transfer():
    topo = dumbbell(1, 1, latency_s=0.0)
    ends, net = _run_together(topo, [one_step([(0, 1, 1e9)])])
    util = net.link_utilization(ends[0])
    assert set(util) == {"h0->A", "A->B", "B->h1"}
    assert all(_close(u, 1.0) for u in util.values())


transfers = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.floats(1e3, 1e9)), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None)
@given(st.lists(transfers, min_size=1, max_size=3), st.booleans(), st.integers(1, 3))
def test_bytes_are_conserved(steps, lockstep, repeat):
    topo = dumbbell(3, 3)
    schedules = [one_step(ts, lockstep=lockstep and len({s for _, _, s in ts}) == 1, repeat=repeat) for ts in steps]
    ends, net = _run_together(topo, schedules)
    # no link carries more than its capacity allows over the whole run
    assert np.all(net.link_bytes() <= topo.links.capacity_Bps * max(ends) * (1 + 1e-9))
    from simdist.network.paths import PathTable
    paths = PathTable(topo)
    expected = sum(b * repeat * paths.path(s, d)[0].size for ts in steps for s, d, b in ts)
    assert abs(net.link_bytes().sum() - expected) <= 1e-9 * expected


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(1e9, 1e11), min_size=8, max_size=8), st.lists(st.floats(1.0, 4.0), min_size=8, max_size=8))
def test_more_bandwidth_is_never_slower(caps, factors):
    topo = single_switch(4)
    ring = ring_allreduce(4, 1e8)
    slow = FlowNetwork(simpy.Environment(), topo)
    fast = FlowNetwork(simpy.Environment(), topo)
    for link, (c, f) in enumerate(zip(caps, factors)):
        slow.set_link_capacity(link, c)
        fast.set_link_capacity(link, c * f)
    assert fast.schedule_time(ring) <= slow.schedule_time(ring) * (1 + 1e-12)


@settings(max_examples=30, deadline=None)
@given(st.lists(transfers, min_size=1, max_size=3), st.floats(1.0, 10.0))
def test_scaling_every_link_up_is_never_slower(steps, factor):
    topo = dumbbell(3, 3)
    schedule = Schedule(CollectiveOp.ALL_TO_ALL, "hand", 0.0,
                        tuple((Step(tuple(Transfer(s, d, b) for s, d, b in ts), lockstep=False),) for ts in steps))
    slow = FlowNetwork(simpy.Environment(), topo)
    fast = FlowNetwork(simpy.Environment(), topo)
    for link in range(topo.links.capacity_Bps.size):
        fast.set_link_capacity(link, topo.links.capacity_Bps[link] * factor)
    assert fast.schedule_time(schedule) <= slow.schedule_time(schedule) * (1 + 1e-9)


@settings(max_examples=30, deadline=None)
@given(st.permutations(range(8)), st.lists(st.floats(1e3, 1e9), min_size=1, max_size=4), st.booleans())
def test_flows_equal_analytical_without_contention(perm, sizes, lockstep):
    # disjoint pairs on a single switch never contend: both models must agree exactly.
    topo = single_switch(8)
    pairs = [(perm[2 * i], perm[2 * i + 1]) for i in range(4)]
    steps = tuple(Step(tuple(Transfer(s, d, size) for s, d in pairs), repeat=1 + k % 3, lockstep=lockstep,
                       delay_s=1e-6 * k) for k, size in enumerate(sizes))
    schedule = Schedule(CollectiveOp.ALL_TO_ALL, "hand", 0.0, (steps,))
    a = AnalyticalNetwork(topo).schedule_time(schedule)
    assert _close(_flow_time(topo, schedule), a)


def test_deterministic():
    topo = dumbbell(3, 3)
    scheds = [one_step([(0, 3, 3e8), (1, 4, 1e8)]), ring_allreduce(6, 5e8), one_step([(2, 5, 7e8)], repeat=2)]
    e1, n1 = _run_together(topo, scheds, starts=[0.0, 0.01, 0.02])
    e2, n2 = _run_together(topo, scheds, starts=[0.0, 0.01, 0.02])
    assert e1 == e2
    assert np.array_equal(n1.link_bytes(), n2.link_bytes())


def test_schedule_time_is_remembered_until_a_capacity_changes():
    topo = dumbbell(1, 1, latency_s=0.0)
    net = FlowNetwork(simpy.Environment(), topo)
    sched = one_step([(0, 1, 1e9)])
    assert _close(net.schedule_time(sched), 0.1)
    assert _close(net.schedule_time(one_step([(0, 1, 1e9)])), 0.1)  # an equal schedule
    net.set_link_capacity(topo.links.index[("A", "B")], 5e9)
    assert _close(net.schedule_time(sched), 0.2)


def test_busy_intervals_are_recorded_when_asked():
    topo = dumbbell(1, 1, latency_s=0.0)
    env = simpy.Environment()
    net = FlowNetwork(env, topo, record_intervals=True)
    env.process(net.run(env, one_step([(0, 1, 1e9)])))
    env.run()
    (iv,) = net.fabric.intervals
    assert iv.start_s == 0.0 and _close(iv.end_s, 0.1) and iv.links.size == 3


def test_set_router_reroutes_later_steps():
    topo = dumbbell(1, 1, latency_s=0.0)

    class Detour:  # a stand-in router that sends everything over one fixed path
        def path(self, src, dst, flow_key=0):
            return (topo.links.index[("h0", "A")],)

    net = FlowNetwork(simpy.Environment(), topo)
    sched = one_step([(0, 1, 1e9)])
    net.schedule_time(sched)
    net.set_router(Detour())
    assert net.steps.get(sched.chains[0][0]).groups[0].links.tolist() == [topo.links.index[("h0", "A")]]


def test_equal_steps_of_a_new_schedule_reuse_the_compiled_step():
    net = FlowNetwork(simpy.Environment(), single_switch(4))
    a, b = ring_allreduce(4, 1e6), ring_allreduce(4, 1e6)
    assert a.chains[0][0] is not b.chains[0][0]
    assert net.steps.get(a.chains[0][0]) is net.steps.get(b.chains[0][0])
    assert net.steps.get(ring_allreduce(4, 2e6).chains[0][0]) is not net.steps.get(a.chains[0][0])
