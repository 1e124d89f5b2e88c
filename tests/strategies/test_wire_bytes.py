"""PowerSGD's bytes follow rank x (m + n) from the plan through the schedules the network runs."""
from __future__ import annotations

import pytest

from simdist.engine.executor import Executor
from simdist.engine.simulation import simulate
from simdist.engine.state import Simulation
from simdist.io.load import load_data
from simdist.scenario import Fidelity
from simdist.strategies.data_parallel import bsp_graphs
from simdist.strategies.plan import build_plan

M, N_COLS = 1024, 2048
WORKERS = 4


def _scenario(rank: int | None):
    compression = {"method": "none"} if rank is None else {"method": "powersgd", "rank": rank}
    return load_data({
        "name": "psgd",
        "cluster": {"nodes": [{"count": WORKERS, "gpu": "v100-sxm2-32gb", "gpus_per_node": 1, "intra_node": "pcie-gen3",
                               "nic": {"bandwidth": "10 Gb/s", "latency": "10 us", "transport": "tcp"}}],
                    "fabric": {"topology": "single_switch"}},
        "workload": {"model": {"layers": [{"name": "fc", "kind": "linear", "params": M * N_COLS,
                                           "fwd_flops": 2 * M * N_COLS, "input_elems": N_COLS, "output_elems": M,
                                           "grad_shapes": [[M, N_COLS]]}]},
                     "batch_per_gpu": 8, "precision": "fp32"},
        "communication": {"strategy": "ring", "compression": compression},
        "run": {"iterations": 1, "warmup": 0},
    })


class _Counting:
    """Wraps a network model and adds up the bytes every schedule it runs puts on the wire."""

    def __init__(self, inner) -> None:
        self.inner, self.wire_bytes = inner, 0.0

    def run(self, env, schedule):
        self.wire_bytes += schedule.wire_bytes()
        return self.inner.run(env, schedule)


@pytest.mark.parametrize("rank", [1, 4, 16])
def test_powersgd_wire_bytes_are_rank_times_m_plus_n(rank):
    scenario = _scenario(rank)
    result = simulate(scenario)
    assert result.to_dict()["sync"]["wire_bytes_per_iteration"] == pytest.approx(rank * (M + N_COLS) * 4)
    plan = build_plan(scenario)
    sim = Simulation(scenario, Fidelity.SIMULATE)
    counting = _Counting(sim.context.network)
    Executor(sim.env, counting, lambda t, g: sim.context.cached_schedule(t.op, t.size_bytes, t.server_delay_s), sim.context.process_groups()).run(bsp_graphs(plan), 1)
    # a ring all_reduce of s bytes per rank puts 2 (N - 1) s on the wire in all; P and Q together are r (m + n) 4
    assert counting.wire_bytes == pytest.approx(2 * (WORKERS - 1) * rank * (M + N_COLS) * 4)


def test_dense_wire_bytes_are_the_gradient():
    assert simulate(_scenario(None)).to_dict()["sync"]["wire_bytes_per_iteration"] == pytest.approx(M * N_COLS * 4)
