"""Pipeline schedules: balanced stages, GPipe / 1F1B / interleaved orders timed against the bubble closed form."""
from __future__ import annotations

import itertools
import math
import random

import pytest

from simdist.strategies.pipeline_schedule import (
    PipeTask, TaskKind, balance_stages, boundary_bytes, bubble_closed_form, gpipe, interleaved, one_f_one_b,
    p2p_transfers, schedule_order, stage_costs, time_orders,
)

F, B = TaskKind.FWD, TaskKind.BWD


def _brute_force_bottleneck(costs, stages):
    n = len(costs)
    best = math.inf
    for cuts in itertools.combinations(range(1, n), stages - 1):
        bounds = [0, *cuts, n]
        best = min(best, max(sum(costs[bounds[i]:bounds[i + 1]]) for i in range(stages)))
    return best


@pytest.mark.parametrize("seed", range(12))
def test_balance_is_optimal_against_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(2, 11)
    costs = [rng.choice([0.0, rng.uniform(0.1, 5.0)]) if seed % 3 == 0 else rng.uniform(0.1, 5.0) for _ in range(n)]
    stages = rng.randint(1, n)
    ranges = balance_stages(costs, stages)
    assert len(ranges) == stages and ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(a < b for a, b in ranges) and all(ranges[i][1] == ranges[i + 1][0] for i in range(stages - 1))
    assert max(stage_costs(costs, ranges)) == pytest.approx(_brute_force_bottleneck(costs, stages), rel=1e-12)


def test_balance_uniform_blocks_and_a_heavy_head() -> None:
    assert balance_stages([1.0] * 8, 4) == ((0, 2), (2, 4), (4, 6), (6, 8))
    # a heavy last layer (LM head) gets a stage with fewer blocks
    ranges = balance_stages([1.0] * 7 + [3.0], 4)
    assert max(stage_costs([1.0] * 7 + [3.0], ranges)) == 3.0
    with pytest.raises(AssertionError, match="io.rules_parallel"):  # more stages than layers: refused in io/
        balance_stages([1.0, 2.0], 3)


def test_orders_hold_every_task_once() -> None:
    for orders, v in ((gpipe(4, 6), 1), (one_f_one_b(4, 6), 1), (interleaved(4, 8, 3), 3)):
        for order in orders:
            assert sorted((t.kind.value, t.micro, t.chunk) for t in order) == sorted(
                (k, i, c) for k in ("fwd", "bwd") for i in range(len(order) // (2 * v)) for c in range(v))


def test_1f1b_order_by_hand() -> None:
    o = one_f_one_b(3, 4)
    assert o[0] == (PipeTask(F, 0), PipeTask(F, 1), PipeTask(F, 2), PipeTask(B, 0), PipeTask(F, 3), PipeTask(B, 1),
                    PipeTask(B, 2), PipeTask(B, 3))
    assert o[2] == (PipeTask(F, 0), PipeTask(B, 0), PipeTask(F, 1), PipeTask(B, 1), PipeTask(F, 2), PipeTask(B, 2),
                    PipeTask(F, 3), PipeTask(B, 3))


@pytest.mark.parametrize("p,m", [(2, 1), (4, 4), (4, 8), (8, 16), (3, 7)])
@pytest.mark.parametrize("kind", ["gpipe", "1f1b"])
def test_uniform_bubble_matches_closed_form(kind: str, p: int, m: int) -> None:
    tf, tb = 1.0, 2.0
    timing = time_orders(schedule_order(kind, p, m), tf, tb)
    assert timing.makespan_s == pytest.approx((m + p - 1) * (tf + tb))
    assert timing.bubble_fraction() == pytest.approx((p - 1) / (m + p - 1), rel=1e-12)
    assert timing.bubble_fraction() == pytest.approx(bubble_closed_form(p, m))


@pytest.mark.parametrize("p,m,v", [(2, 4, 2), (4, 8, 2), (4, 8, 4), (4, 16, 3), (8, 16, 2)])
def test_interleaved_bubble_shrinks_by_v(p: int, m: int, v: int) -> None:
    tf, tb = 1.0 / v, 2.0 / v  # a chunk holds 1/v of the rank's layers
    timing = time_orders(interleaved(p, m, v), tf, tb, virtual_stages=v)
    ideal = m * 3.0
    bubble_s = timing.makespan_s - ideal
    assert bubble_s == pytest.approx((p - 1) * 3.0 / v)
    assert timing.bubble_fraction() == pytest.approx(bubble_closed_form(p, m, v), rel=1e-12)
    plain = time_orders(one_f_one_b(p, m), 1.0, 2.0)
    assert bubble_s == pytest.approx((plain.makespan_s - ideal) / v)


def test_p2p_time_delays_but_the_closed_form_is_the_zero_latency_limit() -> None:
    c = 0.1
    g0, g1 = (time_orders(gpipe(4, 8), 1.0, 2.0, p2p_s=x).makespan_s for x in (0.0, c))
    assert g1 == pytest.approx(g0 + 2 * 3 * c)  # GPipe's critical path crosses 3 boundaries down and 3 back
    extra = [time_orders(one_f_one_b(4, m), 1.0, 2.0, p2p_s=c).makespan_s - (m + 3) * 3.0 for m in (4, 8, 16)]
    # strict 1F1B has no slack: each steady-state backward on rank 0 waits for a round trip
    assert extra[0] >= 2 * 3 * c - 1e-12 and extra[0] < extra[1] < extra[2]


def test_in_flight_micro_batches() -> None:
    p, m = 4, 8
    assert [time_orders(one_f_one_b(p, m), 1, 2).peak_in_flight(r) for r in range(p)] == [4, 3, 2, 1]
    assert all(time_orders(gpipe(p, m), 1, 2).peak_in_flight(r) == m for r in range(p))
    v = 2  # Narayanan et al.: rank 0 holds p + (p - 1) / v stages' worth, i.e. 2 (p - 1) + (v - 1) p + 1 chunks
    t = time_orders(interleaved(p, m, v), 0.5, 1.0, virtual_stages=v)
    assert t.peak_in_flight(0) == 2 * (p - 1) + (v - 1) * p + 1


def test_p2p_transfers_sizes_and_count() -> None:
    size = boundary_bytes(2, 1024, 1600, 2)
    assert size == 2 * 1024 * 1600 * 2
    assert boundary_bytes(2, 1024, 1600, 2, shards=4) == size / 4  # sequence-parallel tp ranks send their shard
    xs = p2p_transfers(4, 3, 1, size)
    assert len(xs) == 3 * 3 * 2
    assert {(x.src, x.dst) for x in xs if x.kind is F} == {(0, 1), (1, 2), (2, 3)}
    assert {(x.src, x.dst) for x in xs if x.kind is B} == {(1, 0), (2, 1), (3, 2)}
    xi = p2p_transfers(2, 2, 2, size)  # interleaved: virtual stages 0..3 on ranks 0,1,0,1
    assert [(x.src, x.dst) for x in xi if x.kind is F and x.micro == 0] == [(0, 1), (1, 0), (0, 1)]


def test_what_io_refuses_is_an_invariant_here() -> None:
    with pytest.raises(AssertionError, match="virtual_stages 2 with schedule 1f1b"):
        schedule_order("1f1b", 4, 8, 2)
    with pytest.raises(AssertionError, match="6 micro-batches, pp 4, interleaved"):
        schedule_order("interleaved", 4, 6, 2)
    with pytest.raises(ValueError, match="zb-v"):
        schedule_order("zb-v", 4, 8)
    with pytest.raises(ValueError, match="deadlocks"):
        time_orders(((PipeTask(B, 0), PipeTask(F, 0)), (PipeTask(F, 0), PipeTask(B, 0))), 1.0, 1.0)


@pytest.mark.parametrize("ratio", [1.0, 2.0, 3.0])
def test_closed_form_holds_over_a_grid_of_shapes(ratio: float) -> None:
    """Every valid (p, m, v) up to p = 8, v = 4 (m a multiple of p when interleaved) runs without deadlock
    and gives the closed-form bubble, whatever the backward / forward ratio."""
    for p in range(1, 9):
        for m in range(1, 13):
            for kind in ("gpipe", "1f1b"):
                t = time_orders(schedule_order(kind, p, m), 1.0, ratio)
                assert t.bubble_fraction() == pytest.approx(bubble_closed_form(p, m), abs=1e-12)
        for k in range(1, 4):
            for v in range(2, 5):
                t = time_orders(interleaved(p, p * k, v), 1.0 / v, ratio / v, virtual_stages=v)
                assert t.bubble_fraction() == pytest.approx(bubble_closed_form(p, p * k, v), abs=1e-12)
