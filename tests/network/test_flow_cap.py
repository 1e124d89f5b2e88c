"""A link's per-flow cap (LinkSpec.flow_cap_Bps, `nic.flow_cap`): each connection moves no faster than the
cap, and capped flows leave the rest of the link to the others (max-min with a private link per flow)."""
from __future__ import annotations

import networkx as nx
import pytest
import simpy

from simdist.hardware.specs import LinkSpec
from simdist.network.analytical import AnalyticalNetwork
from simdist.network.flows import FlowNetwork
from simdist.topology.graph import Topology
from tests.network.topos import one_step

LINE = 10e9  # bytes/s per direction of every host link
CAP = 2.5e9  # the most one flow gets


def _star(n: int, cap: float | None) -> Topology:
    g = nx.Graph()
    link = LinkSpec(LINE, 0.0, 1.0, flow_cap_Bps=cap)
    names = [f"h{i}" for i in range(n)]
    for v in names:
        g.add_edge(v, "switch", link=link, kind="nic")
    return Topology(g, tuple(names), tuple(range(n)), n)


def _flow_time(topo, schedule) -> float:
    env = simpy.Environment()
    net = FlowNetwork(env, topo)
    env.process(net.run(env, schedule))
    env.run()
    return float(env.now)


@pytest.mark.parametrize("model", ["flow", "analytical"])
def test_one_flow_runs_at_the_cap(model):
    topo = _star(2, CAP)
    sched = one_step([(0, 1, 1e9)])
    t = _flow_time(topo, sched) if model == "flow" else AnalyticalNetwork(topo).schedule_time(sched)
    assert t == pytest.approx(1e9 / CAP)  # 0.4 s, not the link's 0.1 s


def test_several_flows_share_the_link_up_to_its_rate():
    """Four connections out of one host at 2.5 GB/s each fill its 10 GB/s; eight share it (1.25 each)."""
    topo = _star(9, CAP)
    four = one_step([(0, d, 1e9) for d in range(1, 5)])
    eight = one_step([(0, d, 1e9) for d in range(1, 9)])
    assert _flow_time(topo, four) == pytest.approx(1e9 / CAP)
    assert _flow_time(topo, eight) == pytest.approx(8e9 / LINE)


def test_a_capped_flow_leaves_the_rest_to_an_uncapped_one():
    """Max-min with caps: flow A (capped at 2.5) and B share h0's 10 GB/s uplink; B gets 7.5, not 5."""
    g = nx.Graph()
    g.add_edge("h0", "switch", link=LinkSpec(LINE, 0.0, 1.0), kind="nic")
    g.add_edge("h1", "switch", link=LinkSpec(LINE, 0.0, 1.0, flow_cap_Bps=CAP), kind="nic")
    g.add_edge("h2", "switch", link=LinkSpec(LINE, 0.0, 1.0), kind="nic")
    topo = Topology(g, ("h0", "h1", "h2"), (0, 1, 2), 3)
    t_a = _flow_time(topo, one_step([(0, 1, 2.5e9)]))
    both = one_step([(0, 1, 2.5e9), (0, 2, 7.5e9)])
    assert t_a == pytest.approx(1.0)
    assert _flow_time(topo, both) == pytest.approx(1.0)  # both finish at 1 s: 2.5 + 7.5 = the uplink


def test_no_cap_changes_nothing():
    topo = _star(2, None)
    assert topo.links.flow_cap_Bps is None
    assert _flow_time(topo, one_step([(0, 1, 1e9)])) == pytest.approx(1e9 / LINE)


def test_lockstep_ring_members_are_each_capped():
    """A lockstep ring step of 4 members: every member is one connection held to the cap."""
    topo = _star(4, CAP)
    sched = one_step([(i, (i + 1) % 4, 1e9) for i in range(4)], lockstep=True)
    assert _flow_time(topo, sched) == pytest.approx(1e9 / CAP)
