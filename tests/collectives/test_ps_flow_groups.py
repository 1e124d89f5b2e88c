"""Parameter-server pushes and pulls as groups of independent members (network/steps.py, network/fabric.py).

A PS step's transfers are independent flows. The flow model runs the workers that share one max-min rate as
one flow group and splits a group only where a saturated link freezes some of its members and not the
others; the rates, and so every push, pull and iteration time, must be those of one flow per transfer
(the reference below: one group per transfer, as the model ran them before). Checked on closed forms, a
hand-computed asymmetric push, whole PS iterations (bsp with a straggler, asp, ssp, node aggregation,
pipelined partitions) and a dead link mid-push.
"""
from __future__ import annotations

import numpy as np
import pytest
import simpy

from simdist.collectives.ps import ps_chains
from simdist.collectives.schedule import CollectiveOp, Group, Schedule, Step, Transfer
from simdist.engine.context_cache import process_cache
from simdist.network import steps as steps_mod
from simdist.network.flows import FlowNetwork
from tests.network.topos import dumbbell, single_switch
from tests.strategies.scenario_runner import run_with
from tests.strategies.test_sync_modes import PS, STRAGGLER


def _per_transfer(routes, sizes, repeat, topology, streams=1):
    """The reference: one flow group per live transfer (what compile_step built before members existed)."""
    groups = [steps_mod._single(routes.pair_paths(i), float(sz), repeat) for i, sz in enumerate(sizes)
              if sz > 0 and routes.lengths[i * routes.spread:(i + 1) * routes.spread].max() > 0]
    caps = topology.links.member_caps(streams)
    if caps is not None:
        groups = [steps_mod._capped(g, float(caps[g.links].min())) for g in groups]
    return tuple(groups)


def _fresh() -> None:
    """Forget built clusters and with them their compiled steps (they hold groups compiled the other way)."""
    process_cache().clear()


def _time(topology, schedule) -> float:
    return FlowNetwork(simpy.Environment(), topology).schedule_time(schedule)


def test_grouped_push_pull_equals_closed_form_and_per_flow(monkeypatch):
    """n workers and one dedicated server on one switch: the server's link is the incast, each of the n
    pushes gets B/n, so push = pull = n x shard / B + 2 link latencies, plus the server's update."""
    n, size, bw, lat, delay = 8, 64e6, 10e9, 1e-6, 3e-4
    sched = Schedule(CollectiveOp.ALL_REDUCE, "ps", size, ps_chains(size, Group.flat(range(n), 1), (n,), delay))
    grouped = _time(single_switch(n, bw, lat, servers=1), sched)
    expected = 2 * (n * size / bw + 2 * lat) + delay
    assert grouped == pytest.approx(expected, rel=1e-12)
    compiled = steps_mod.StepCache(steps_mod.PathTable(single_switch(n, bw, lat, servers=1))).get(sched.chains[0][0])
    assert len(compiled.groups) == 1 and len(compiled.groups[0].members) == n  # one group, n members
    monkeypatch.setattr(steps_mod, "_independent", _per_transfer)
    assert _time(single_switch(n, bw, lat, servers=1), sched) == grouped


def test_asymmetric_push_splits_where_max_min_does(monkeypatch):
    """Dumbbell, 10 GB/s edges, a 2 GB/s core; server h7 on the right, workers h0-h3 on the left, h4-h6 on
    the right. Max-min: the core saturates first at 0.5 GB/s per left worker (the right ones rise on), so
    the push ends when the left workers' S bytes are through at 0.5 GB/s, after three 1 us links."""
    size = 1e8
    push = Step(tuple(Transfer(w, 7, size) for w in range(7)), lockstep=False)
    sched = Schedule(CollectiveOp.REDUCE, "ps", size, ((push,),))
    net = FlowNetwork(simpy.Environment(), dumbbell(4, 4, edge_Bps=10e9, core_Bps=2e9, latency_s=1e-6))
    grouped = net.schedule_time(sched)
    assert grouped == pytest.approx(3e-6 + size / 0.5e9, rel=1e-12)
    monkeypatch.setattr(steps_mod, "_independent", _per_transfer)
    ref = FlowNetwork(simpy.Environment(), dumbbell(4, 4, edge_Bps=10e9, core_Bps=2e9, latency_s=1e-6))
    assert ref.schedule_time(sched) == grouped


def test_split_rates_equal_per_transfer_rates_on_the_fabric():
    """The fabric itself: members with different bottlenecks end at the times separate groups end."""
    from simdist.network.fabric import Fabric

    topo = dumbbell(4, 4, edge_Bps=10e9, core_Bps=2e9, latency_s=0.0)
    paths = steps_mod.PathTable(topo)
    pairs = tuple((w, 7) for w in range(7))
    routes = steps_mod.RoutedPairs.route(pairs, paths)
    sizes = np.array([1e8, 1e8, 1e8, 1e8, 1e8, 1e8, 1e8])
    ends = {}
    for name, groups in (("grouped", steps_mod._independent(routes, sizes, 1, topo)),
                         ("per transfer", _per_transfer(routes, sizes, 1, topo))):
        env = simpy.Environment()
        fabric = Fabric(env, topo.links.capacity_Bps)
        done = [fabric.start(g) for g in groups]
        times = []
        for ev in done:
            ev.callbacks.append(lambda _e, env=env, times=times: times.append(env.now))
        env.run()
        ends[name] = sorted(times)
        assert len(groups) == (1 if name == "grouped" else 7)
    assert ends["grouped"][-1] == ends["per transfer"][-1] == pytest.approx(1e8 / 0.5e9, rel=1e-12)
    assert ends["per transfer"][0] == pytest.approx(1e8 / (8e9 / 3), rel=1e-12)  # the right workers first


CASES = {
    "bsp": {},
    "bsp, straggler": {"failures": STRAGGLER},
    "asp, straggler": {"training.sync": "asp", "failures": STRAGGLER},
    "ssp": {"training.sync": "ssp", "training.staleness": 1, "failures": STRAGGLER},
    "colocated, node aggregation": {"communication.ps.placement": "colocated",
                                    "cluster.nodes.0.gpus_per_node": 2, "cluster.nodes.0.count": 4,
                                    "communication.ps.aggregation": "node"},
    "partitions": {"communication.ps.partition": "4 MB"},
}


@pytest.mark.parametrize("case", list(CASES))
def test_ps_iteration_grouped_equals_per_flow(case, monkeypatch):
    """Every number of the result (iteration, throughput, breakdown, link loads, staleness) as with one flow
    group per transfer."""
    changes = CASES[case]
    _fresh()
    grouped = run_with(PS, changes, "simulate").to_dict()
    monkeypatch.setattr(steps_mod, "_independent", _per_transfer)
    _fresh()
    try:
        reference = run_with(PS, changes, "simulate").to_dict()
    finally:
        monkeypatch.undo()
        _fresh()
    assert _numbers(grouped) == pytest.approx(_numbers(reference), rel=1e-12, abs=1e-15)
    assert grouped["iteration_time_s"] == pytest.approx(reference["iteration_time_s"], rel=1e-12)


def _numbers(d, prefix="") -> dict:
    """Every number of a result's dict, by its dotted path."""
    out = {}
    items = d.items() if isinstance(d, dict) else enumerate(d) if isinstance(d, list) else ()
    for k, v in items:
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, bool) or v is None or isinstance(v, str):
            continue
        if isinstance(v, (int, float)):
            out[key] = float(v)
        else:
            out.update(_numbers(v, key))
    return out


def test_straggler_sets_the_pace_of_a_grouped_bsp_ps_iteration():
    """Symmetry broken by one 2x straggler (its own rank class): the BSP iteration runs at the straggler's
    pace, its doubled compute plus the same exposed communication tail as the symmetric run (the last
    buckets' push and pull after the backward pass), while asp keeps the others' throughput."""
    base = run_with(PS, {}, "simulate")
    slow = run_with(PS, {"failures": STRAGGLER}, "simulate")
    asp = run_with(PS, {"training.sync": "asp", "failures": STRAGGLER}, "simulate")
    step = base.to_dict()["node_groups"][0]["step_s"]
    tail = base.iteration_time_s - step
    assert slow.to_dict()["node_groups"][0]["rank_classes"] == 2
    assert slow.iteration_time_s == pytest.approx(2 * step + tail, rel=0.02)
    assert asp.throughput.samples_per_s > 1.5 * slow.throughput.samples_per_s


def _fan_in(n: int):
    """h0..h{n-1} on switch A; the server s on B; A-C-B at 10 GB/s and A-D-B at 5 GB/s (ECMP picks per pair)."""
    import networkx as nx

    from simdist.hardware.specs import LinkSpec
    from simdist.topology.graph import Topology

    g = nx.Graph()
    names = [f"h{i}" for i in range(n)] + ["s"]
    for v in names[:-1]:
        g.add_edge(v, "A", link=LinkSpec(40e9, 0.0), kind="nic")
    g.add_edge("s", "B", link=LinkSpec(40e9, 0.0), kind="nic")
    for mid, bw in (("C", 10e9), ("D", 5e9)):
        g.add_edge("A", mid, link=LinkSpec(bw, 0.0), kind="fabric")
        g.add_edge(mid, "B", link=LinkSpec(bw, 0.0), kind="fabric")
    return Topology(g, tuple(names), tuple(range(n + 1)), n)


def _push_with_dead_link(n: int) -> tuple[float, list[float]]:
    """A push of n workers to s; at 0.05 s A->C dies: the members on it move to A-D-B with their bytes left."""
    topo = _fan_in(n)
    env = simpy.Environment()
    net = FlowNetwork(env, topo)
    push = Step(tuple(Transfer(w, n, 1e9) for w in range(n)), lockstep=False)
    done = {}

    def worker(env):
        yield from net.run(env, Schedule(CollectiveOp.REDUCE, "ps", 1e9, ((push,),)))
        done["t"] = env.now

    def kill(env):
        yield env.timeout(0.05)
        net.fail_link("A->C")

    env.process(worker(env))
    env.process(kill(env))
    env.run()
    ids = topo.links.index
    carried = net.link_bytes()
    return done["t"], [float(carried[ids[e]]) for e in (("A", "C"), ("A", "D"), ("B", "s"))]


def test_dead_link_mid_push_moves_the_members_on_it_as_flows_of_their_own(monkeypatch):
    grouped = _push_with_dead_link(6)
    monkeypatch.setattr(steps_mod, "_independent", _per_transfer)
    reference = _push_with_dead_link(6)
    assert grouped[0] == pytest.approx(reference[0], rel=1e-12)
    assert grouped[1] == pytest.approx(reference[1], rel=1e-12)
    assert grouped[1][2] == pytest.approx(6e9, rel=1e-12)  # every byte reached the server
