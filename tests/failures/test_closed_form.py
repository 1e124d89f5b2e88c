"""Simulated goodput against the first-order closed form 1 - C/T - (T/2 + R)/M, and where they part."""
from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from simdist.failures.incidents import sample_random
from simdist.failures.rates import closed_form_goodput
from simdist.failures.state import Costs
from simdist.failures.timeline import run_timeline
from simdist.scenario import RandomFailuresSpec
from tests.failures.helpers import facts, job

HOUR = 3600.0


def _simulated(nodes, node_mtbf_s, costs, duration_s, replicas, seed=0):
    f = facts(nodes)
    spec = RandomFailuresSpec(node_mtbf_s=node_mtbf_s, repair_s=0.0)
    ratios = []
    for r in range(replicas):
        incs = sample_random(spec, f, duration_s, np.random.default_rng([seed, r]))
        t = run_timeline(job(nodes=nodes, duration_s=duration_s), "checkpoint_restart", costs, lambda s: 1.0, incs)
        ratios.append(t.useful_s / duration_s)
    return statistics.fmean(ratios), statistics.stdev(ratios) / math.sqrt(replicas)


def test_agrees_with_the_closed_form_within_one_percent_when_everything_is_short_against_the_mtbf():
    # job MTBF M = 100 h, interval T = 1 h, checkpoint C = 30 s, recovery R = 5 min
    costs = Costs(interval_s=HOUR, write_s=30.0, detection_s=60.0, restart_s=240.0)
    m = 100 * HOUR
    sim, se = _simulated(100, 100 * m, costs, 20000 * HOUR, 4)
    closed = closed_form_goodput(HOUR, 30.0, 300.0, m)
    assert closed == pytest.approx(1 - 30 / 3600 - (1800 + 300) / m)
    assert abs(sim - closed) / closed < 0.01
    assert se < 0.001


def _daly_exact(t_s, c_s, r_s, m_s):
    """Useful fraction for exponential failures when failures also strike checkpoints and restarts
    (Daly 2006): each T of work costs M e^{R/M} (e^{(T+C)/M} - 1) of wall time."""
    return t_s / (m_s * math.exp(r_s / m_s) * math.expm1((t_s + c_s) / m_s))


def test_outside_that_regime_the_first_order_form_is_off_and_the_exact_exponential_one_is_not():
    """With T and R comparable to M, failures hit checkpoints, restarts and the same interval twice; the
    first-order form counts each failure as T/2 + R and ignores that, so it is too pessimistic here by
    several percent. Daly's exact expression for exponential failures matches the simulation."""
    costs = Costs(interval_s=HOUR, write_s=300.0, detection_s=60.0, restart_s=1740.0)
    m = 2 * HOUR
    sim, se = _simulated(10, 10 * m, costs, 4000 * HOUR, 4)
    closed = closed_form_goodput(HOUR, 300.0, 1800.0, m)
    exact = _daly_exact(HOUR, 300.0, 1800.0, m)
    assert abs(sim - exact) < max(4 * se, 0.005)
    assert abs(sim - closed) / sim > 0.05
