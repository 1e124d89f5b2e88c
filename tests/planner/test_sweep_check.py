"""`check` on a sweep or plan file: what `sweep`/`plan` would refuse before a point runs (io/sweep_check.py)."""
from __future__ import annotations

import copy

import yaml

from simdist.io.sweep_check import sweep_file_issues
from tests.planner.conftest import BASE


def _file(tmp_path, **blocks):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**copy.deepcopy(BASE), **blocks}, sort_keys=False))
    return path


def _paths(issues):
    return [i.path for i in issues]


def test_a_good_plan_or_sweep_file_has_no_issues_and_a_plain_scenario_is_left_to_check(tmp_path):
    axes = {"communication.strategy": ["ring", "ps"], "cluster.nodes.0.count": [1, 2]}
    assert sweep_file_issues(_file(tmp_path, plan={"axes": axes, "objective": "cost"})) == []
    assert sweep_file_issues(_file(tmp_path, sweep={"axes": axes, "constraints": ["gpus <= 8"]})) == []
    assert sweep_file_issues(_file(tmp_path)) is None


def test_every_up_front_refusal_of_plan_and_sweep_is_reported(tmp_path):
    cases = [
        ({"plan": {"axes": {"communication.strategy": ["ring"]}, "objective": "fastest"}}, "plan.objective"),
        ({"plan": {"axes": {"communication.strategy": ["ring"]}, "objective": "time_to_train"}}, "--objective"),
        ({"plan": {"axes": {"communication.strategy": ["ring"]}, "objective": "goodput"}}, "--objective"),
        ({"plan": {"axes": {"communication.strategy": ["ring"]}, "rungs": "simulate"}}, "plan.rungs"),
        ({"plan": {"axes": {"communication.strategi": ["ring"]}}}, "communication.strategi"),
        ({"plan": {"axes": {"communication.strategy": ["ring", "ps"], "communication.overlap": [True]},
                   "zip": [["communication.strategy", "communication.overlap"]]}}, "--zip"),
        ({"sweep": {"axes": {"communication.strategy": ["ring"]}, "constraints": ["gpu_count < 3"]}}, "--constraint"),
        ({"sweep": {"axes": {"communication.strategy": ["ring"]}, "zip": "x"}}, "sweep.zip"),
        ({"sweep": {"axes": {"cluster.nodes.0.count": "range(1, 2)"}}}, "cluster.nodes.0.count"),
        ({"plan": {"axes": {"communication.strategy": ["ring"]}, "speed": 3}}, "plan.speed"),
    ]
    for blocks, path in cases:
        issues = sweep_file_issues(_file(tmp_path, **blocks))
        assert path in _paths(issues), (blocks, issues)


def test_base_issues_count_except_where_an_axis_sets_the_key(tmp_path):
    data = copy.deepcopy(BASE)
    data["communication"]["strategy"] = "nope"
    data["workload"]["batch_per_gpu"] = -1
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({**data, "plan": {"axes": {"communication.strategy": ["ring", "ps"]}}}))
    assert _paths(sweep_file_issues(path)) == ["workload.batch_per_gpu"]  # the axis replaces the bad strategy


def test_check_on_a_plan_file_reports_what_plan_refuses(tmp_path):
    from click.testing import CliRunner

    from simdist.cli import main

    good = _file(tmp_path, plan={"axes": {"communication.strategy": ["ring", "ps"]}})
    res = CliRunner().invoke(main, ["check", str(good)])
    assert res.exit_code == 0 and res.output == f"{good}: ok\n"  # the plan: block is not an unknown key here
    bad = _file(tmp_path, plan={"axes": {"communication.strategy": ["ring"]}, "objective": "time_to_train"})
    res = CliRunner().invoke(main, ["check", str(bad)])
    assert res.exit_code == 2
    assert res.output == f"{bad}: --objective: time_to_train needs a budget: --samples N or --tokens N\n"
