"""Constraint expressions: parsed, never eval'ed; bad ones are one-line errors naming the expression."""
from __future__ import annotations

import pytest

from simdist.errors import ScenarioError
from simdist.io.plan_rules import check_constraints
from simdist.planner.expr import Expression, ExpressionError

VALUES = {"gpus": 512, "cost_per_hour": 1500.0, "communication.strategy": "ring", "tokens_per_s": None,
          "cluster.nodes.0.count": 64}


@pytest.mark.parametrize("text, expected", [
    ("gpus <= 1024 and cost_per_hour < 2000", True),
    ("gpus <= 256 or cost_per_hour < 1000", False),
    ("not gpus > 1000", True),
    ("communication.strategy == 'ring'", True),
    ("communication.strategy in ('ps', \"hierarchical\")", False),
    ("communication.strategy not in ('ps',)", True),
    ("cost_per_hour / gpus < 3", True),
    ("cluster.nodes.0.count * 8 == gpus", True),
    ("-gpus < -511.5", True),
    ("(gpus - 12) * 2 >= 1000 and gpus != 0", True),
    ("tokens_per_s > 0", False),  # a figure the point lacks never satisfies a comparison
    ("1e2 < gpus", True),
])
def test_expressions_evaluate(text, expected):
    assert Expression(text).evaluate(VALUES) is expected


@pytest.mark.parametrize("text, words", [
    ("gpus.__class__ < 1", "names starting with '_'"),
    ("__import__('os')", "names starting with '_'"),
    ("open('x') < 3", "calls are not allowed"),
    ("gpus[0] < 3", "unexpected character '['"),
    ("gpus <", "ends too early"),
    ("gpus < 3 3", "unexpected '3'"),
    ("gpus ; 1", "unexpected character ';'"),
    ("lambda: 1", "unexpected character ':'"),
    ("gpus in ps", "expected '('"),
    ("", "non-empty"),
])
def test_bad_expressions_are_one_line_errors(text, words):
    with pytest.raises(ScenarioError) as err:
        check_constraints([text], ["gpus"])
    message = str(err.value)
    assert words in message and "\n" not in message and message.startswith("--constraint")


def test_unknown_variables_are_named():
    with pytest.raises(ExpressionError, match="unknown variable.*gpu_count"):
        Expression("gpu_count < 4").evaluate(VALUES)
    with pytest.raises(ScenarioError, match="unknown: gpu_count"):
        check_constraints(["gpu_count < 4"], list(VALUES))


def test_arithmetic_on_text_is_refused():
    with pytest.raises(ExpressionError, match="not a number"):
        Expression("communication.strategy * 2 > 1").evaluate(VALUES)


def test_conjuncts_split_top_level_and_only():
    parts = Expression("gpus <= 1024 and (cost_per_hour < 2 or gpus > 3) and samples_per_s > 1").conjuncts()
    assert [sorted(p.names) for p in parts] == [["gpus"], ["cost_per_hour", "gpus"], ["samples_per_s"]]
    assert Expression("a or b").conjuncts()[0].names == {"a", "b"}
