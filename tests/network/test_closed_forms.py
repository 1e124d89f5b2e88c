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


@pytest.mark.parametrize("n", [4, 8, 16])
def test_one_dedicated_server_is_bound_by_its_link_while_n_colocated_shards_match_ring(n):
    """The issue's PS claims: one dedicated server for N workers takes ~N*S/B each way (its own link
    carries every worker's gradient), N colocated shards move 2(N-1)/N*S per worker, like a ring."""
    size = 256e6
    ring = _both(single_switch(n, bandwidth_Bps=12.5e9, latency_s=1.5e-6, efficiency=0.9),
                 build_schedule("all_reduce", "ring", size, Group.flat(range(n), 1)))[0]
    one_topo = single_switch(n, bandwidth_Bps=12.5e9, latency_s=1.5e-6, efficiency=0.9, servers=1)
    one = _both(one_topo, build_schedule("all_reduce", "ps", size, Group.flat(range(n), 1), servers=(n,)))[0]
    shards = _both(single_switch(n, bandwidth_Bps=12.5e9, latency_s=1.5e-6, efficiency=0.9),
                   build_schedule("all_reduce", "ps", size, Group.flat(range(n), 1), servers=tuple(range(n))))[0]
    assert one >= 2 * n * size / BW * 0.999  # push N*S in, pull N*S out, through one link each way
    assert shards == pytest.approx(ring, rel=0.01)
    assert one / ring > n / 2
