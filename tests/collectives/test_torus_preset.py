"""The TPU-pod torus preset uses both directions of its torus links (torus2d.torus2d_chains)."""
from __future__ import annotations

from collections import Counter

from simdist.engine.context import build_context
from simdist.io.load import load_scenario
from simdist.scenario import Fidelity

PRESET = "scenarios/presets/tpu-pod-torus.yaml"


def test_torus_preset_loads_both_directions_of_every_plane0_link():
    ctx = build_context(load_scenario(PRESET, []), Fidelity.ESTIMATE)
    sched = ctx.schedule("all_reduce", 64e6)
    ctx.env.process(ctx.network.run(ctx.env, sched))
    ctx.env.run()
    t, carried = ctx.topology, ctx.network.link_bytes
    fabric = [(i, u, v) for i, (u, v) in enumerate(t.links.ends) if "/nic" in u and "/nic" in v]
    plane0 = [(i, u, v) for i, u, v in fabric if u.endswith("/nic0")]
    assert plane0 and all(carried[i] > 0 for i, _, _ in plane0)  # every plane-0 link, both directions
    # each direction of a link carries the same bytes: half the buffer rings each way
    by_edge = Counter()
    for i, u, v in plane0:
        by_edge[tuple(sorted((u, v)))] += 1
    assert set(by_edge.values()) == {2}
    back = {(u, v): carried[i] for i, u, v in plane0}
    assert all(abs(back[(u, v)] - back[(v, u)]) <= 1e-6 * back[(u, v)] for (u, v) in back)


def test_torus_bidirectional_rings_double_the_bus_bandwidth():
    ctx = build_context(load_scenario(PRESET, []), Fidelity.ESTIMATE)
    both = ctx.network.schedule_time(ctx.schedule("all_reduce", 1e9))
    from simdist.collectives.schedule import Schedule
    from simdist.collectives.torus2d import torus2d_chain

    one_way = Schedule("all_reduce", "torus2d", 1e9, (torus2d_chain(1e9, ctx.group),))
    assert ctx.network.schedule_time(one_way) / both > 1.9
