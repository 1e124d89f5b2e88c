"""GSPMD's 1-D model parallelism with a fully sharded data axis on a TPU torus (tp with zero 3, io/rules_tpu.py):
each tp group is a ring of consecutive chips along the torus's last dimension whose collectives take the hand-
computed ring time, each dp group the torus plane it occupies with torus3d's bidirectional rings, and on an idle
torus the estimate (analytical network) and the simulation (flow network) give the same call times and the same
iteration."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

from simdist.collectives.schedule import CollectiveOp
from simdist.engine.plans import build
from simdist.engine.simulation import simulate
from simdist.io.load import load_data
from simdist.scenario import Fidelity

B = 45e9 * 0.9  # ICI v4 per direction at its 0.90 efficiency
ALPHA = 1e-6  # per hop
CUBE = """
name: tpu-v4-gpt-tp4-fsdp
cluster:
  nodes:
    - {count: 64, gpu: tpu-v4, gpus_per_node: 1, intra_node: tpu-v4, nic: {link: ici-v4}}
  fabric: {topology: torus3d, dims: [4, 4, 4], link: ici-v4}
workload: {model: gpt3-1.3b, seq_len: 2048, batch_per_gpu: 4, precision: bf16}
training:
  optimizer: adam
  parallelism: {tp: 4, zero: 3}
communication: {strategy: torus3d, backend: textbook, overlap: true}
run: {iterations: 2, warmup: 1}
"""


def _coords(k: int) -> tuple[int, int, int]:
    return k // 16, k // 4 % 4, k % 4


@pytest.fixture(scope="module", params=[Fidelity.ESTIMATE, Fidelity.SIMULATE])
def built(request):
    plan, sim = build(load_data(yaml.safe_load(CUBE)), request.param)
    return plan, sim


def _call(built, group: str, op: CollectiveOp, size_bytes: float):
    plan, sim = built
    task = SimpleNamespace(group=group, op=op, size_bytes=size_bytes)
    schedule = plan.schedule_of(task, None)
    return schedule, sim.context.network.schedule_time(schedule), plan.time_of(task, None)


@pytest.mark.parametrize("op,steps", [(CollectiveOp.ALL_GATHER, 3), (CollectiveOp.REDUCE_SCATTER, 3),
                                      (CollectiveOp.ALL_REDUCE, 6)])
def test_tp_groups_are_z_rings_of_neighbours_at_the_ring_time(built, op, steps):
    """16 tp groups, each the 4 chips of one z-line, a ring whose every step goes to the next chip along z
    (wrap-around included): k - 1 = 3 steps per phase of S / 4 bytes, one direction."""
    schedule, network_s, closed_s = _call(built, "tp.s0", op, 64e6)
    assert schedule.algorithm == "ring" and len(schedule.chains) == 16
    for chain in schedule.chains:
        for step in chain:
            for t in step.transfers:
                a, b = _coords(t.src), _coords(t.dst)
                assert a[:2] == b[:2] and (b[2] - a[2]) % 4 == 1
    hand = steps * (ALPHA + 64e6 / 4 / B)
    assert network_s == pytest.approx(hand, rel=1e-9) and closed_s == pytest.approx(hand, rel=1e-9)


@pytest.mark.parametrize("op,phases", [(CollectiveOp.ALL_GATHER, 1), (CollectiveOp.REDUCE_SCATTER, 1),
                                       (CollectiveOp.ALL_REDUCE, 2)])
def test_dp_groups_are_xy_planes_with_bidirectional_torus_rings(built, op, phases):
    """4 dp groups, each a 4x4 xy-plane (z fixed): rings along y then x, half the buffer each way:
    3 (alpha + 32 MB / 4 / B) + 3 (alpha + 8 MB / 4 / B) per phase."""
    schedule, network_s, closed_s = _call(built, "dp.s0", op, 64e6)
    assert schedule.algorithm == "torus3d" and len(schedule.chains) == 4 * 2
    for chain in schedule.chains:
        for step in chain:
            for t in step.transfers:
                a, b = _coords(t.src), _coords(t.dst)
                assert a[2] == b[2] and sum(x != y for x, y in zip(a, b)) == 1  # one torus hop in the plane
    hand = phases * (3 * (ALPHA + 32e6 / 4 / B) + 3 * (ALPHA + 8e6 / 4 / B))
    assert network_s == pytest.approx(hand, rel=1e-9) and closed_s == pytest.approx(hand, rel=1e-9)


def test_estimate_equals_simulate_on_the_idle_torus():
    times = {}
    for fidelity in ("estimate", "simulate"):
        data = yaml.safe_load(CUBE)
        data["run"]["fidelity"] = fidelity
        times[fidelity] = simulate(load_data(data)).to_dict()["iteration_time_s"]
    assert times["estimate"] == pytest.approx(times["simulate"], rel=1e-9)
