"""Progressive filling against hand-solved cases and the max-min characterisation."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simdist.network.maxmin import maxmin_rates


def test_classic_three_flows_two_links():
    # A crosses both links, B only link 0, C only link 1: everyone gets half.
    rates = maxmin_rates(np.array([1.0, 1.0]), [np.array([0, 1]), np.array([0]), np.array([1])])
    np.testing.assert_allclose(rates, [0.5, 0.5, 0.5])


def test_classic_unequal_capacities():
    # link 1 has room to spare: C takes what A cannot use there.
    rates = maxmin_rates(np.array([1.0, 2.0]), [np.array([0, 1]), np.array([0]), np.array([1])])
    np.testing.assert_allclose(rates, [0.5, 0.5, 1.5])


def test_counts_weight_a_group():
    # group 0 crosses link 0 twice (two ring members); group 1 once and is capped at 0.5 on link 1.
    rates = maxmin_rates(np.array([3.0, 0.5]), [np.array([0]), np.array([0, 1])],
                         [np.array([2.0]), np.array([1.0, 1.0])])
    np.testing.assert_allclose(rates, [1.25, 0.5])


def test_equal_counts_split_evenly():
    rates = maxmin_rates(np.array([3.0]), [np.array([0]), np.array([0])], [np.array([2.0]), np.array([1.0])])
    np.testing.assert_allclose(rates, [1.0, 1.0])


def test_group_without_links_is_unbounded_and_ignored():
    rates = maxmin_rates(np.array([2.0]), [np.array([], dtype=int), np.array([0])])
    assert rates[0] == np.inf
    assert rates[1] == 2.0


def test_dead_link_stops_only_its_groups():
    rates = maxmin_rates(np.array([0.0, 4.0]), [np.array([0, 1]), np.array([1])])
    np.testing.assert_allclose(rates, [0.0, 4.0])


def test_no_groups():
    assert maxmin_rates(np.array([1.0]), []).shape == (0,)


@st.composite
def problems(draw):
    n_links = draw(st.integers(1, 6))
    caps = np.array(draw(st.lists(st.floats(0.1, 100.0), min_size=n_links, max_size=n_links)))
    n_groups = draw(st.integers(1, 8))
    links, counts = [], []
    for _ in range(n_groups):
        ls = sorted(draw(st.sets(st.integers(0, n_links - 1), min_size=1, max_size=n_links)))
        links.append(np.array(ls))
        counts.append(np.array(draw(st.lists(st.integers(1, 3), min_size=len(ls), max_size=len(ls))), dtype=float))
    return caps, links, counts


@settings(max_examples=60, deadline=None)
@given(problems())
def test_maxmin_is_feasible_and_every_group_has_a_bottleneck(problem):
    caps, links, counts = problem
    rates = maxmin_rates(caps, links, counts)
    load = np.zeros_like(caps)
    for r, ls, cs in zip(rates, links, counts):
        load[ls] += r * cs
    assert np.all(load <= caps * (1 + 1e-9))
    # max-min: each group crosses a saturated link on which no group has a higher rate
    for g, (ls, r) in enumerate(zip(links, rates)):
        ok = False
        for link in ls:
            if load[link] >= caps[link] * (1 - 1e-9):
                others = [rates[h] for h, lh in enumerate(links) if link in lh]
                ok = ok or max(others) <= r * (1 + 1e-9)
        assert ok, (g, rates)
