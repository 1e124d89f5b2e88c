"""Interruptible network: capacities that change mid-flow, dead links rerouted or reported, cancelled
and moved flow groups; every expected time is computed by hand in the test's comment."""
from __future__ import annotations

import networkx as nx
import pytest
import simpy

from simdist.errors import InfeasibleError
from simdist.hardware.specs import LinkSpec
from simdist.network.analytical import AnalyticalNetwork
from simdist.network.flows import FlowNetwork
from simdist.topology.graph import Topology
from tests.network.topos import dumbbell, one_step


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * abs(b)


def two_paths(fast_Bps: float = 10e9, slow_Bps: float = 5e9) -> Topology:
    """h0 - A, then A-C-B (fast) or A-D-B (slow), B - h1; no latency."""
    g = nx.Graph()
    g.add_edge("h0", "A", link=LinkSpec(10e9, 0.0), kind="nic")
    g.add_edge("h1", "B", link=LinkSpec(10e9, 0.0), kind="nic")
    for mid, bw in (("C", fast_Bps), ("D", slow_Bps)):
        g.add_edge("A", mid, link=LinkSpec(bw, 0.0), kind="fabric")
        g.add_edge(mid, "B", link=LinkSpec(bw, 0.0), kind="fabric")
    return Topology(g, ("h0", "h1"), (0, 1), 2)


def _run(topo, schedule, events):
    """Run `schedule` at t=0 and `events` [(t, fn(net))]; return (finish time, net)."""
    env = simpy.Environment()
    net = FlowNetwork(env, topo)
    done = {}

    def worker(env):
        yield from net.run(env, schedule)
        done["t"] = env.now

    def at(env, t, fn):
        yield env.timeout(t)
        fn(net)

    env.process(worker(env))
    for t, fn in events:
        env.process(at(env, t, fn))
    env.run()
    return done.get("t"), net


def test_capacity_halving_mid_flow():
    # 1 GB at 10 GB/s; at 0.05 s the core halves: 0.5 GB left at 5 GB/s takes 0.1 s -> 0.15 s.
    t, _ = _run(dumbbell(1, 1, latency_s=0.0), one_step([(0, 1, 1e9)]),
                [(0.05, lambda n: n.set_link_capacity("A->B", 5e9))])
    assert _close(t, 0.15)


@pytest.mark.parametrize("kill", [lambda n: n.set_link_capacity("A->C", 0.0), lambda n: n.fail_link("C->B")])
def test_dead_link_mid_flow_reroutes(kill):
    # 1 GB on A-C-B at 10 GB/s; at 0.05 s that path dies with 0.5 GB left, which then moves over
    # A-D-B at 5 GB/s: 0.1 s more, the run ends at 0.15 s (0.05 s later than undisturbed).
    topo = two_paths()
    alone, _ = _run(topo, one_step([(0, 1, 1e9)]), [])
    assert _close(alone, 0.1)
    t, net = _run(topo, one_step([(0, 1, 1e9)]), [(0.05, kill)])
    assert _close(t, 0.15) and _close(t - alone, 0.05)
    carried = net.link_bytes()
    ids = topo.links.index
    assert _close(carried[ids[("A", "C")]], 0.5e9) and _close(carried[ids[("A", "D")]], 0.5e9)
    assert _close(carried[ids[("h0", "A")]], 1e9)


def test_later_steps_take_the_new_routes():
    # two 1 GB steps; A-C dies at 0.05 s: step 1 finishes over D at 0.15 s, step 2 (1 GB at 5 GB/s)
    # starts on the new route and ends at 0.35 s.
    from simdist.collectives.schedule import CollectiveOp, Schedule, Step, Transfer
    s = Step((Transfer(0, 1, 1e9),), lockstep=False)
    sched = Schedule(CollectiveOp.ALL_TO_ALL, "hand", 0.0, ((s, Step((Transfer(0, 1, 1e9),), lockstep=False, label="2")),))
    t, _ = _run(two_paths(), sched, [(0.05, lambda n: n.fail_link("A->C"))])
    assert _close(t, 0.35)


def test_dead_link_without_another_path_is_infeasible_naming_link_and_time():
    with pytest.raises(InfeasibleError) as info:
        _run(dumbbell(1, 1, latency_s=0.0), one_step([(0, 1, 1e9)]),
             [(0.05, lambda n: n.set_link_capacity("A->B", 0.0))])
    msg = str(info.value)
    assert "A->B" in msg and "t=0.05" in msg


def test_a_restore_that_is_still_to_come_lets_the_flow_wait():
    # A->B dead from 0.05 s to 0.1 s with 0.5 GB left, which then takes 0.05 s: ends at 0.15 s.
    t, _ = _run(dumbbell(1, 1, latency_s=0.0), one_step([(0, 1, 1e9)]),
                [(0.05, lambda n: n.fail_link("A->B")), (0.1, lambda n: n.restore_link("A->B"))])
    assert _close(t, 0.15)


def test_cancel_frees_the_link_for_the_others():
    # two 1 GB flows share A->B (5 GB/s each); one is cancelled at 0.1 s with 0.5 GB left: the other
    # has 0.5 GB left and moves it at 10 GB/s, ending at 0.15 s; the cancelled one never completes.
    topo = dumbbell(2, 2, latency_s=0.0)
    env = simpy.Environment()
    net = FlowNetwork(env, topo)
    steps = net.steps
    a = steps.get(one_step([(0, 2, 1e9)]).chains[0][0]).groups[0]
    b = steps.get(one_step([(1, 3, 1e9)]).chains[0][0]).groups[0]
    ea, eb = net.fabric.start(a), net.fabric.start(b)
    left = {}

    def cancel(env):
        yield env.timeout(0.1)
        left["a"] = net.fabric.cancel(ea)

    env.process(cancel(env))
    eb.callbacks.append(lambda _e: left.setdefault("b_end", env.now))
    env.run()
    assert _close(left["a"], 0.5e9) and not ea.triggered
    assert _close(left["b_end"], 0.15)
    assert _close(net.link_bytes()[topo.links.index[("A", "B")]], 1.5e9)


def test_scheduled_capacity_change_and_link_names():
    topo = dumbbell(1, 1, latency_s=0.0)
    env = simpy.Environment()
    net = FlowNetwork(env, topo)
    net.schedule_link_capacity(env, 0.05, "A->B", 2.5e9)
    env.process(net.run(env, one_step([(0, 1, 1e9)])))
    env.run()
    assert _close(env.now, 0.25)  # 0.5 GB left at 2.5 GB/s
    with pytest.raises(KeyError):
        net.set_link_capacity("A->Z", 1.0)
    net.fail_link("A->B")
    assert net.dead_links() == ["A->B", "B->A"]
    net.restore_link("B->A")
    assert net.dead_links() == []


def test_analytical_routes_around_a_dead_link_and_names_it_when_it_cannot():
    topo = two_paths()
    net = AnalyticalNetwork(topo)
    sched = one_step([(0, 1, 1e9)])
    assert _close(net.schedule_time(sched), 0.1)
    net.fail_link("A->C")
    assert _close(net.schedule_time(sched), 0.2)
    net.restore_link("A->C")
    assert _close(net.schedule_time(sched), 0.1)
    dumb = AnalyticalNetwork(dumbbell(1, 1))
    dumb.set_link_capacity("A->B", 0.0)
    with pytest.raises(InfeasibleError, match="A->B"):
        dumb.schedule_time(sched)


def test_flow_idle_time_follows_dead_links():
    net = FlowNetwork(simpy.Environment(), two_paths())
    sched = one_step([(0, 1, 1e9)])
    net.fail_link("A->C")
    assert _close(net.schedule_time(sched), 0.2)
    net.fail_link("A->D")
    with pytest.raises(InfeasibleError, match="A->"):
        net.schedule_time(sched)
