"""Both network models reproduce collectives/cost.py's closed forms on idle single-switch fabrics."""
from __future__ import annotations

import pytest
import simpy

from simdist.collectives.algorithms import build_schedule, supports
from simdist.collectives.cost import flat_time, ps_all_reduce_time
from simdist.collectives.schedule import CollectiveOp, Group
from simdist.network.analytical import AnalyticalNetwork
from simdist.network.flows import FlowNetwork
from tests.network.topos import single_switch

BW = 12.5e9 * 0.9  # NIC line rate x efficiency
ALPHA = 2 * 1.5e-6  # up + down
CASES = [(alg, op, n) for alg in ("ring", "tree", "halving_doubling") for op in CollectiveOp
         for n in (2, 5, 8, 16) if supports(op, alg) and not (alg == "halving_doubling" and n & (n - 1))]


def _both(topo, schedule) -> tuple[float, float]:
    return (FlowNetwork(simpy.Environment(), topo).schedule_time(schedule),
            AnalyticalNetwork(topo).schedule_time(schedule))


@pytest.mark.parametrize("alg, op, n", CASES)
def test_flat_algorithms_equal_closed_forms(alg, op, n):
    size = 64e6
    topo = single_switch(n, bandwidth_Bps=12.5e9, latency_s=1.5e-6, efficiency=0.9)
    schedule = build_schedule(op, alg, size, Group.flat(range(n), 1))
    expected = flat_time(op, alg, n, size, ALPHA, BW)
    flows, estimate = _both(topo, schedule)
    assert flows == pytest.approx(expected, rel=1e-6)
    assert estimate == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("workers, servers, colocated", [(8, 1, False), (8, 2, False), (8, 8, True), (8, 4, True)])
def test_ps_equals_closed_form(workers, servers, colocated):
    size, delay = 32e6, 1e-3
    topo = single_switch(workers, bandwidth_Bps=12.5e9, latency_s=1.5e-6, efficiency=0.9,
                         servers=0 if colocated else servers)
    eps = tuple(range(0, workers, workers // servers)) if colocated else tuple(range(workers, workers + servers))
    schedule = build_schedule("all_reduce", "ps", size, Group.flat(range(workers), 1), servers=eps, server_delay_s=delay)
    expected = ps_all_reduce_time(workers, servers, colocated, size, ALPHA, BW, delay)
    flows, estimate = _both(topo, schedule)
    assert flows == pytest.approx(expected, rel=1e-6)
    assert estimate == pytest.approx(expected, rel=1e-6)
