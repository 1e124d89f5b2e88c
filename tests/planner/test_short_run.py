"""The simulate:N rung's loader (planner.plan.ShortRun) sets the short run as run.* values and loads again,
so the scenario's rules judge the short run: a hybrid switch at or beyond it is refused, not an assert."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from simdist.errors import ScenarioError
from simdist.io.sweep_load import load_point
from simdist.planner.plan import ShortRun

BASE = yaml.safe_load((Path(__file__).resolve().parents[2] / "scenarios" / "default.yaml").read_text())


def _hybrid(switch: int) -> dict:
    data = copy.deepcopy(BASE)
    data["communication"]["strategy"] = "ps"
    data["training"]["sync"] = "hybrid"
    data["training"]["hybrid_switch"] = switch
    data["run"] = {"iterations": 50, "warmup": 2}
    return data


def test_the_short_run_replaces_iterations_replicas_and_duration():
    data = copy.deepcopy(BASE)
    data["run"] = {"duration": "1 h", "warmup": 3}
    s = ShortRun(load_point, 4)(data, (), {}, ".", "x")
    assert (s.run.iterations, s.run.replicas, s.run.duration_s, s.run.warmup) == (7, 1, None, 3)


def test_a_hybrid_switch_inside_the_short_run_runs():
    s = ShortRun(load_point, 10)(_hybrid(5), (), {}, ".", "x")
    assert s.run.iterations == 12 and s.training.hybrid_switch_iteration == 5


def test_a_hybrid_switch_beyond_the_short_run_is_refused_by_the_rule():
    load_point(_hybrid(30), (), {}, ".", "x")  # the scenario itself is valid
    with pytest.raises(ScenarioError) as err:
        ShortRun(load_point, 3)(_hybrid(30), (), {}, ".", "x")
    assert [i.path for i in err.value.issues] == ["training.hybrid_switch"]
    assert "expected an iteration below run.iterations (5)" in str(err.value)
