"""The TPU-pod torus preset uses both directions of its torus links (torus2d.torus2d_chains) and every NIC
plane of the fabric (topology.build._add_fabric_planes, Router.planes)."""
from __future__ import annotations

from collections import Counter

from simdist.engine.context import build_context
from simdist.io.load import load_scenario
from simdist.scenario import Fidelity

PRESET = "scenarios/presets/tpu-pod-torus.yaml"


def _carried(size_bytes: float):
    ctx = build_context(load_scenario(PRESET, []), Fidelity.ESTIMATE)
    ctx.env.process(ctx.network.run(ctx.env, ctx.schedule("all_reduce", size_bytes)))
    ctx.env.run()
    return ctx.topology, ctx.network.link_bytes


def test_torus_preset_loads_both_directions_of_every_link_of_every_plane():
    t, carried = _carried(64e6)
    fabric = [(i, u, v) for i, (u, v) in enumerate(t.links.ends) if "/nic" in u and "/nic" in v]
    planes = {u.rsplit("/nic", 1)[1] for _, u, _ in fabric}
    assert planes == {"0", "1", "2", "3"}
    assert all(carried[i] > 0 for i, _, _ in fabric)  # every link of every plane, both directions
    by_edge = Counter(tuple(sorted((u, v))) for _, u, v in fabric)
    assert set(by_edge.values()) == {2}
    # each direction carries the same bytes (half the buffer rings each way), and every plane the same share
    back = {(u, v): carried[i] for i, u, v in fabric}
    assert all(abs(back[(u, v)] - back[(v, u)]) <= 1e-6 * back[(u, v)] for (u, v) in back)
    per_plane = Counter()
    for i, u, _ in fabric:
        per_plane[u.rsplit("/nic", 1)[1]] += carried[i]
    assert max(per_plane.values()) <= (1 + 1e-9) * min(per_plane.values())


def test_a_gpu_owns_every_nic_plane_of_its_node_only_on_direct_connect_fabrics():
    torus = build_context(load_scenario(PRESET, []), Fidelity.ESTIMATE).topology
    assert torus.graph.nodes["node0/gpu0"]["rails"] == tuple(f"node0/nic{k}" for k in range(4))
    switched = build_context(load_scenario(PRESET, ["cluster.fabric={topology: single_switch}",
                                                    "communication.strategy=ring"]), Fidelity.ESTIMATE).topology
    assert "rails" not in switched.graph.nodes["node0/gpu0"]  # NCCL binds a GPU to its nearest NIC


def test_four_planes_carry_a_buffer_four_times_as_fast_up_to_the_gpus_own_link():
    """One plane (nic.count 1) against four: the fabric time falls 4x until the GPU's 360 GB/s link into the
    node (450 GB/s x 0.8) binds: 8 flows of 46 GB/s (4 planes x 2 directions) would need 368."""
    times = {}
    for count in (1, 4):
        ctx = build_context(load_scenario(PRESET, [f"cluster.nodes.0.nic.count={count}"]), Fidelity.ESTIMATE)
        times[count] = ctx.network.schedule_time(ctx.schedule("all_reduce", 1e9))
    assert 3.8 < times[1] / times[4] <= 4.0


def test_torus_bidirectional_rings_double_the_bus_bandwidth():
    ctx = build_context(load_scenario(PRESET, []), Fidelity.ESTIMATE)
    both = ctx.network.schedule_time(ctx.schedule("all_reduce", 1e9))
    from simdist.collectives.schedule import Schedule
    from simdist.collectives.torus2d import torus2d_chain

    one_way = Schedule("all_reduce", "torus2d", 1e9, (torus2d_chain(1e9, ctx.group),))
    assert ctx.network.schedule_time(one_way) / both > 1.9
