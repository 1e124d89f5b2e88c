"""Axes: values, range(), geom(), products and zipped groups."""
from __future__ import annotations

import pytest
import yaml

from simdist.errors import ScenarioError
from simdist.io.sweep_axes import check_space, make_axis, parse_axis
from simdist.planner.axes import expand


def _parse(text):
    return parse_axis(text, yaml.safe_load)


def test_axis_texts():
    assert _parse("communication.strategy=ring,ps").values == ("ring", "ps")
    assert _parse("cluster.nodes.0.count=range(2, 10, 2)").values == (2, 4, 6, 8)
    assert _parse("cluster.nodes.0.count=geom(2, 32, 5)").values == (2, 4, 8, 16, 32)
    assert _parse("communication.bucket_size=1 MB,25 MB").values == ("1 MB", "25 MB")
    assert _parse("workload.benchmark.sizes=[1 MB, 2 MB],[4 MB]").values == (["1 MB", "2 MB"], ["4 MB"])
    assert _parse("training.convergence_factor=range(1.0, 1.3, 0.1)").values == (1.0, 1.1, 1.2)
    assert make_axis("a.b", "geom(1.0, 100.0, 3)").values == (1.0, 10.0, 100.0)


@pytest.mark.parametrize("text, words", [
    ("strategy", "expected KEY=V1,V2"),
    ("a.b=range(1, 2)", "three numbers"),
    ("a.b=range(5, 1, 1)", "step must be non-zero"),
    ("a.b=geom(0, 4, 3)", "start, stop > 0"),
    ("a.b=geom(x, 4, 3)", "plain numbers"),
])
def test_bad_axes(text, words):
    with pytest.raises(ScenarioError, match=words):
        _parse(text)


def test_product_order_and_zip():
    axes = [make_axis("a", [1, 2]), make_axis("b", ["x", "y", "z"]), make_axis("c", [10, 20, 30])]
    plain = expand(axes)
    assert len(plain) == 18 and plain[0].as_dict() == {"a": 1, "b": "x", "c": 10}
    assert plain[1].as_dict() == {"a": 1, "b": "x", "c": 20}  # the last axis varies fastest
    zipped = expand(axes, [("b", "c")])
    assert [p.as_dict() for p in zipped[:3]] == [{"a": 1, "b": "x", "c": 10}, {"a": 1, "b": "y", "c": 20},
                                                 {"a": 1, "b": "z", "c": 30}]
    assert [p.index for p in zipped] == list(range(6))


def test_zip_errors_are_refused_in_io():
    axes = [make_axis("a", [1, 2]), make_axis("b", [1, 2, 3])]
    with pytest.raises(ScenarioError, match="different lengths"):
        check_space(axes, [("a", "b")])
    with pytest.raises(ScenarioError, match="not an axis"):
        check_space(axes, [("a", "q")])
    with pytest.raises(ScenarioError, match="given twice"):
        check_space([make_axis("a", [1]), make_axis("a", [2])])
    with pytest.raises(ScenarioError, match="10000000"):
        check_space([make_axis(k, list(range(400))) for k in ("a", "b", "c")])
    check_space(axes)  # a plain product is fine
