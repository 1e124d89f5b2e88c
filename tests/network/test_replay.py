"""Calls timed alone and replayed onto the flow network: accepted only when no two that share a link are in flight
at once and each span is its schedule's time alone; then the network's records equal those of running them."""
from __future__ import annotations

import numpy as np
import pytest
import simpy

from simdist.network.flows import FlowNetwork
from simdist.network.replay import contended, overlaps
from tests.network.topos import one_step, single_switch

N, SIZE = 4, 1e9


def _net() -> FlowNetwork:
    return FlowNetwork(simpy.Environment(), single_switch(N), record_intervals=True)


def _alone_s(schedule) -> float:
    return _net().schedule_time(schedule)


def plan_replay(net, calls, tolerance_s):
    """The replay of every call, or None where `contended` finds some that must run on the flow network."""
    schedules, got, flows = contended(net, calls, tolerance_s)
    return None if flows else got.replay(schedules, set(range(len(schedules.alone))))


def _ran(calls: list[tuple]) -> FlowNetwork:
    """The calls run on the flow network's own clock, each started at its start time."""
    net = _net()

    def start(at_s, schedule):
        yield net.env.timeout(at_s)
        yield from net.run(net.env, schedule)

    for schedule, at_s, _ in calls:
        net.env.process(start(at_s, schedule))
    net.env.run()
    return net


def test_overlaps_by_more_than_the_tolerance():
    assert not overlaps(np.array([0.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0]), 0.0)  # touching is not in flight together
    assert overlaps(np.array([0.0, 0.5]), np.array([1.0, 2.0]), 0.0)
    assert not overlaps(np.array([0.0, 0.9999]), np.array([1.0, 2.0]), 1e-3)


def test_calls_on_other_links_replay_and_the_records_equal_running_them():
    a, b = one_step([(0, 1, SIZE)]), one_step([(2, 3, SIZE)])  # disjoint NIC links: in flight together
    ta, tb = _alone_s(a), _alone_s(b)
    calls = [(a, 0.0, ta), (b, 0.25 * ta, 0.25 * ta + tb), (a, 2 * ta, 3 * ta)]
    net = _net()
    replay = plan_replay(net, calls, 1e-12)
    assert replay is not None
    replay.onto(net)
    net.env.run(until=4 * ta)
    ran = _ran(calls)
    ran.env.run(until=4 * ta)
    assert np.allclose(net.link_bytes(), ran.link_bytes(), rtol=1e-12)
    names = list(ran.link_utilization(4 * ta))
    assert net.link_utilization(4 * ta) == pytest.approx(ran.link_utilization(4 * ta), rel=1e-12)
    got, want = net.busy_spans(names), ran.busy_spans(names)
    assert got.keys() == want.keys() and all(np.allclose(got[k], want[k], rtol=1e-12) for k in want)
    assert sum(len(v) for v in got.values()) == 6  # a's two calls on its two links, b's one on its two


def test_calls_sharing_a_link_in_flight_are_not_replayed():
    a, b = one_step([(0, 1, SIZE)]), one_step([(0, 2, SIZE)])  # both leave host 0: they would share its uplink
    ta = _alone_s(a)
    assert plan_replay(_net(), [(a, 0.0, ta), (b, 0.5 * ta, 1.5 * ta)], 1e-12) is None
    assert plan_replay(_net(), [(a, 0.0, ta), (b, ta, 2 * ta)], 1e-12) is not None  # one after the other
    assert plan_replay(_net(), [(a, 0.0, ta), (a, 0.5 * ta, 1.5 * ta)], 1e-12) is None  # the same call twice at once


def test_a_span_that_is_not_the_time_alone_is_not_replayed():
    a = one_step([(0, 1, SIZE)])
    ta = _alone_s(a)
    assert plan_replay(_net(), [(a, 0.0, 1.01 * ta)], 1e-12) is None


def test_contended_schedules_are_the_link_sharing_components_of_the_calls_that_meet():
    """a and b leave host 0 together (they meet on its uplink); c reaches host 2 later, on b's downlink, so it
    shares b's component and runs on the flow network too; e (4 -> 5) shares nothing and keeps its time alone."""
    net = FlowNetwork(simpy.Environment(), single_switch(6), record_intervals=True)
    a, b, c, e = (one_step([pair]) for pair in [(0, 1, SIZE), (0, 2, SIZE), (3, 2, SIZE), (4, 5, SIZE)])
    t = _alone_s(a)
    schedules, _, flows = contended(net, [(a, 0.0, t), (b, 0.5 * t, 1.5 * t), (c, 5 * t, 6 * t), (e, 0.0, t)],
                                    1e-12)
    assert flows == {schedules.of(a), schedules.of(b), schedules.of(c)}
    assert schedules.of(e) not in flows
