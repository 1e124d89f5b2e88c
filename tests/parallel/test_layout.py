"""Rank -> (dp, tp, pp) placement: Megatron-LM's default order, overrides, refusals and the tp-in-node warning."""
from __future__ import annotations

import pytest

from simdist.layout import Axis, Coord, build_layout, parse_order

TWO_NODES_OF_8 = [0] * 8 + [1] * 8


def test_megatron_default_order_2x8_tp4_pp2_dp2() -> None:
    lay = build_layout(TWO_NODES_OF_8, dp=2, tp=4, pp=2)
    assert lay.order == (Axis.TP, Axis.DP, Axis.PP)
    # Megatron-LM (initialize_model_parallel): consecutive ranks share a tp group, dp next, pp outermost
    assert lay.tp_groups() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert lay.dp_groups() == [[0, 4], [1, 5], [2, 6], [3, 7], [8, 12], [9, 13], [10, 14], [11, 15]]
    assert lay.pp_groups() == [[0, 8], [1, 9], [2, 10], [3, 11], [4, 12], [5, 13], [6, 14], [7, 15]]
    assert not lay.tp_crosses_nodes() and lay.warnings == ()
    assert all(len(lay.nodes_of(g)) == 2 for g in lay.pp_groups())  # every stage boundary crosses nodes
    assert lay.coords(13) == Coord(dp=1, tp=1, pp=1)
    assert all(lay.rank(**vars(lay.coords(r))) == r for r in range(16))


def test_override_order_tp_pp_dp() -> None:
    lay = build_layout(TWO_NODES_OF_8, dp=2, tp=4, pp=2, order="tp,pp,dp")
    assert lay.tp_groups() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert lay.pp_groups()[0] == [0, 4] and lay.dp_groups()[0] == [0, 8]
    assert all(len(lay.nodes_of(g)) == 1 for g in lay.pp_groups())  # the pipeline now stays in a node


def test_tp_outermost_crosses_nodes_and_warns_not_refuses() -> None:
    lay = build_layout(TWO_NODES_OF_8, dp=2, tp=4, pp=2, order="dp,pp,tp")
    assert lay.tp_groups()[0] == [0, 4, 8, 12]
    assert lay.tp_crosses_nodes()
    assert len(lay.warnings) == 1 and "training.placement_order 'dp,pp,tp'" in lay.warnings[0]


def test_tp_larger_than_a_node_warns_with_the_default_order() -> None:
    lay = build_layout(TWO_NODES_OF_8, dp=1, tp=16, pp=1)
    assert lay.tp_crosses_nodes() and "tp = 16 does not fit in a node" in lay.warnings[0]


def test_dp_defaults_to_the_rest() -> None:
    assert build_layout(TWO_NODES_OF_8, dp=None, tp=2, pp=2).dp == 4


@pytest.mark.parametrize("dp,tp,pp", [(2, 4, 4), (3, 4, 1), (1, 1, 1)])
def test_bad_products_are_not_laid_out(dp: int, tp: int, pp: int) -> None:
    """io.rules_training refuses them (tests/io/test_rules.py); below io/ they are a broken invariant."""
    with pytest.raises(AssertionError, match=f"dp x tp x pp = {dp} x {tp} x {pp}, the cluster has 16 GPUs"):
        build_layout(TWO_NODES_OF_8, dp=dp, tp=tp, pp=pp)


def test_tp_pp_not_dividing_is_not_laid_out() -> None:
    with pytest.raises(AssertionError, match="the cluster has 16 GPUs"):
        build_layout(TWO_NODES_OF_8, dp=None, tp=3, pp=1)


@pytest.mark.parametrize("text", ["tp,dp", "tp,tp,pp", "tp,dp,xx", ""])
def test_bad_orders_are_not_parsed(text: str) -> None:
    """The schema refuses them with the key's path (tests/parallel/test_training_keys.py)."""
    with pytest.raises(AssertionError, match="training.placement_order"):
        parse_order(text)


def test_groups_partition_the_ranks_for_every_order() -> None:
    import itertools
    for order in itertools.permutations(["tp", "dp", "pp"]):
        lay = build_layout([0] * 24, dp=2, tp=3, pp=4, order=",".join(order))
        for axis in Axis:
            groups = lay.groups(axis)
            assert sorted(r for g in groups for r in g) == list(range(24))
            assert all(len(g) == lay.degree(axis) for g in groups)
            for g in groups:  # members differ only in that coordinate, listed in coordinate order
                cs = [lay.coords(r) for r in g]
                assert [c.on(axis) for c in cs] == list(range(lay.degree(axis)))
                assert len({tuple(c.on(a) for a in Axis if a != axis) for c in cs}) == 1
