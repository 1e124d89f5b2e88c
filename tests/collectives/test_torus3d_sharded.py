"""torus3d reduce-scatter and all-gather (collectives/torus3d.py), the halves of its all-reduce that ZeRO-3 /
FSDP and GSPMD's data axis run on a TPU torus: they really reduce-scatter, they are the all-reduce's two halves,
their closed form is half the all-reduce's, the estimate and the flow network take it on an idle torus, and a
data-parallel group of a tp layout lies on the torus plane it occupies."""
from __future__ import annotations

import pytest
import yaml

from simdist.collectives.algorithms import build_schedule, supports
from simdist.collectives.schedule import Group
from simdist.collectives.torus3d import group_dims, torus3d_chain, torus3d_half_time
from simdist.engine.simulation import simulate
from simdist.io.load import load_data

from .symbolic import full, initial, run_phases


@pytest.mark.parametrize("n,per_node", [(8, 1), (27, 1), (64, 1), (16, 4)])
def test_reduce_scatter_leaves_each_rank_a_distinct_fully_reduced_shard(n, per_node):
    ranks = tuple(range(n))
    blocks = 4 * n
    sched = build_schedule("reduce_scatter", "torus3d", float(blocks), Group.flat(ranks, per_node))
    assert len(sched.chains) == 2  # forward and reverse halves
    for chain in sched.chains:
        state = initial(ranks, blocks)
        ranges = run_phases(state, chain, {r: list(range(blocks)) for r in ranks}, 0.5)
        shards = [ranges[r] for r in ranks]
        assert sorted(b for s in shards for b in s) == list(range(blocks))  # disjoint and covering
        assert all(len(s) == blocks // n for s in shards)
        assert all(state[r][b] == full(ranks) for r in ranks for b in ranges[r])


@pytest.mark.parametrize("dims", [(4, 4, 4), (8, 4, 4), (3, 2, 5)])
@pytest.mark.parametrize("reverse", [False, True])
def test_the_halves_of_the_all_reduce(dims, reverse):
    n = dims[0] * dims[1] * dims[2]
    group = Group.flat(tuple(range(n)), 1)
    whole = torus3d_chain(float(n), group, dims, reverse=reverse)
    rs = torus3d_chain(float(n), group, dims, reverse=reverse, op="reduce_scatter")
    ag = torus3d_chain(float(n), group, dims, reverse=reverse, op="all_gather")
    assert rs + ag == whole and rs and ag


def test_torus3d_offers_all_reduce_reduce_scatter_and_all_gather_only():
    assert all(supports(op, "torus3d", 64) for op in ("all_reduce", "reduce_scatter", "all_gather"))
    assert not supports("broadcast", "torus3d", 64) and not supports("all_to_all", "torus3d", 64)
    with pytest.raises(ValueError, match="no broadcast"):
        torus3d_chain(64.0, Group.flat(tuple(range(64)), 1), op="broadcast")


def test_closed_form_is_the_hand_calculation():
    """4x4x4, 64 MB, 1 us hops, ICI v4 at 45 GB/s x 0.9: per dimension 3 steps of its shard / 4 per direction:
    3 (1 us + 32 MB / 4 / B) + 3 (1 us + 8 MB / 4 / B) + 3 (1 us + 2 MB / 4 / B) = 9 us + 63/64 x 32 MB / B."""
    B = 45e9 * 0.9
    hand = 3 * (1e-6 + 32e6 / 4 / B) + 3 * (1e-6 + 8e6 / 4 / B) + 3 * (1e-6 + 2e6 / 4 / B)
    assert torus3d_half_time((4, 4, 4), 64e6, 1e-6, B) == pytest.approx(hand, rel=1e-12)
    assert hand == pytest.approx(9e-6 + 63 / 64 * 32e6 / B, rel=1e-12)


def _scenario(op: str, fidelity: str) -> dict:
    return yaml.safe_load(f"""
name: torus3d-{op}
cluster:
  nodes:
    - {{count: 64, gpu: tpu-v4, gpus_per_node: 1, intra_node: tpu-v4, nic: {{link: ici-v4}}}}
  fabric: {{topology: torus3d, dims: [4, 4, 4], link: ici-v4}}
workload:
  benchmark: {{op: {op}, sizes: ["64 MB", "1 GB"]}}
communication: {{strategy: torus3d, backend: textbook}}
run: {{fidelity: {fidelity}}}
""")


@pytest.mark.parametrize("op", ["reduce_scatter", "all_gather"])
@pytest.mark.parametrize("fidelity", ["estimate", "simulate"])
def test_flow_network_on_an_idle_torus_takes_the_closed_form_time(op, fidelity):
    rows = simulate(load_data(_scenario(op, fidelity))).to_dict()["collectives"]
    assert len(rows) == 2
    for row in rows:
        assert row["algorithm"] == "torus3d"
        assert row["time_s"] == pytest.approx(torus3d_half_time((4, 4, 4), row["size_bytes"], 1e-6, 45e9 * 0.9),
                                              rel=1e-9)


@pytest.mark.parametrize("ranks,dims", [
    (tuple(range(12 * 256))[::12], (16, 16, 1)),  # PaLM's pod: 16x16x12 under tp 12, the dp group a plane
    (tuple(range(5, 3072, 12)), (16, 16, 1)),  # any plane of it
    (tuple(range(0, 64, 4)), (4, 4, 1)),  # a 4x4x4 cube under tp 4
    (tuple(range(1, 64, 2)), (4, 4, 2)),  # tp 2: every other chip along z
    (tuple(range(0, 3072, 24)), (16, 8, 1)),  # tp 24: two z-lines per tp group, every other y
    (tuple(range(64)), (4, 4, 4)),  # the whole torus
])
def test_a_strided_group_lies_on_the_sub_lattice_it_occupies(ranks, dims):
    assert group_dims(Group.flat(ranks, 1)) == dims


def test_other_groups_fall_back_to_the_default_grid():
    assert group_dims(Group.flat((0, 1, 5, 6), 1)) == (2, 2, 1)  # not a constant stride: grid_dims(4)
    assert group_dims(Group.flat((12, 13, 14, 15), 1)) == (2, 2, 1)  # starts past its stride: not a sub-lattice


def test_fsdp_on_a_tpu_slice_estimate_equals_simulate():
    """XLA's FSDP alone (zero 3, no tp) on the v5p preset's 8x4x4 slice: every weight all-gather and gradient
    reduce-scatter is torus3d's over the whole slice, and the idle-torus estimate is the simulation."""
    from simdist.io.load import load_scenario
    times = {}
    for fidelity in ("estimate", "simulate"):
        s = load_scenario("scenarios/presets/tpu-v5p-gpt.yaml", ["training.parallelism.zero=3",
                                                                 f"run.fidelity={fidelity}"])
        times[fidelity] = simulate(s).to_dict()["iteration_time_s"]
    assert times["estimate"] == pytest.approx(times["simulate"], rel=1e-9)
