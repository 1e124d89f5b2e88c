"""3-D torus all-reduce (collectives/torus3d.py): it really all-reduces, every ring step goes to a torus
neighbour, its closed form is the hand calculation, and on an idle TPU torus the estimate (analytical network)
and the simulation (flow network) both take exactly the closed-form time."""
from __future__ import annotations

import pytest
import yaml

from simdist.collectives.algorithms import build_schedule
from simdist.collectives.schedule import Group
from simdist.collectives.torus3d import grid_dims, torus3d_all_reduce_time, torus3d_chain
from simdist.engine.simulation import simulate
from simdist.io.load import load_data

from .symbolic import full, initial, run_phases


@pytest.mark.parametrize("n,per_node", [(8, 1), (12, 1), (27, 1), (64, 1), (16, 4), (24, 2)])
def test_every_rank_ends_with_every_contribution(n, per_node):
    ranks = tuple(range(100, 100 + n))
    blocks = 8 * n
    sched = build_schedule("all_reduce", "torus3d", float(blocks), Group.flat(ranks, per_node))
    assert len(sched.chains) == 2  # one half with every ring forward, one with every ring reversed
    for chain in sched.chains:
        state = initial(ranks, blocks)
        run_phases(state, chain, {r: list(range(blocks)) for r in ranks}, 0.5)
        assert all(state[r][b] == full(ranks) for r in ranks for b in range(blocks))


def _coords(k: int, dims: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for size in reversed(dims):
        out.append(k % size)
        k //= size
    return tuple(reversed(out))


@pytest.mark.parametrize("dims", [(4, 4, 4), (8, 4, 4), (3, 2, 5)])
@pytest.mark.parametrize("reverse", [False, True])
def test_every_step_goes_to_a_torus_neighbour_along_one_dimension_in_turn(dims, reverse):
    n = dims[0] * dims[1] * dims[2]
    chain = torus3d_chain(float(n), Group.flat(tuple(range(n)), 1), dims, reverse=reverse)
    moved = []
    for step in chain:
        axes = set()
        for t in step.transfers:
            a, b = _coords(t.src, dims), _coords(t.dst, dims)
            (d,) = [i for i in range(3) if a[i] != b[i]]
            step_d = (b[d] - a[d]) % dims[d]
            assert step_d == (dims[d] - 1 if reverse else 1)  # the ring's next position, wrap-around included
            axes.add(d)
        (axis,) = axes
        moved += [axis] * step.repeat  # a ring phase is one step repeated k - 1 times
    # reduce-scatter z, y, x (k - 1 steps each), then all-gather x, y, z
    rs = [2] * (dims[2] - 1) + [1] * (dims[1] - 1) + [0] * (dims[0] - 1)
    assert moved == rs + rs[::-1]


def test_grid_is_the_torus3d_fabric_default_shape():
    assert grid_dims(64) == (4, 4, 4) and grid_dims(128) == (8, 4, 4) and grid_dims(4096) == (16, 16, 16)


def test_closed_form_is_the_hand_calculation():
    """4x4x4, 64 MB per rank, 1 us hops, ICI v4 at 45 GB/s x 0.9: each dimension 2 x 3 steps; the data
    64 MB / 2 per direction, then 1/4 and 1/16 of it: 6 x (1 us + 32 MB / 4 / B) + 6 x (1 us + 8 MB / 4 / B)
    + 6 x (1 us + 2 MB / 4 / B) = 18 us + 63/64 x 64 MB / B."""
    B = 45e9 * 0.9
    hand = 6 * (1e-6 + 32e6 / 4 / B) + 6 * (1e-6 + 8e6 / 4 / B) + 6 * (1e-6 + 2e6 / 4 / B)
    assert torus3d_all_reduce_time((4, 4, 4), 64e6, 1e-6, B) == pytest.approx(hand, rel=1e-12)
    assert hand == pytest.approx(18e-6 + 63 / 64 * 64e6 / B, rel=1e-12)
    # a non-cubic slice: 2 (X + Y + Z - 3) latencies and the all-rank ring's data term
    assert torus3d_all_reduce_time((8, 4, 4), 1e9, 2e-6, 90e9) == pytest.approx(
        2 * 13 * 2e-6 + 127 / 128 * 1e9 / 90e9, rel=1e-12)


def _scenario(chips: int, dims: list[int], tpu: str, fidelity: str) -> dict:
    return yaml.safe_load(f"""
name: torus3d-{tpu}
cluster:
  nodes:
    - {{count: {chips}, gpu: {tpu}, gpus_per_node: 1, intra_node: {tpu}, nic: {{link: ici-{tpu[4:]}}}}}
  fabric: {{topology: torus3d, dims: {dims}, link: ici-{tpu[4:]}}}
workload:
  benchmark: {{op: all_reduce, sizes: ["64 MB", "1 GB"]}}
communication: {{strategy: torus3d, backend: textbook}}
run: {{fidelity: {fidelity}}}
""")


@pytest.mark.parametrize("chips,dims,tpu,link_Bps", [(64, [4, 4, 4], "tpu-v4", 45e9), (128, [8, 4, 4], "tpu-v5p", 100e9)])
@pytest.mark.parametrize("fidelity", ["estimate", "simulate"])
def test_flow_network_on_an_idle_torus_takes_the_closed_form_time(chips, dims, tpu, link_Bps, fidelity):
    rows = simulate(load_data(_scenario(chips, dims, tpu, fidelity))).to_dict()["collectives"]
    for row in rows:
        expected = torus3d_all_reduce_time(tuple(dims), row["size_bytes"], 1e-6, link_Bps * 0.9)
        assert row["algorithm"] == "torus3d"
        assert row["time_s"] == pytest.approx(expected, rel=1e-9)
