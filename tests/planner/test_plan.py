"""simdist plan: the known optimum of a small space, the brute-force Pareto front, the local search."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simdist.errors import ScenarioError
from simdist.io.sweep_load import check_goodput, load_point, plan_spec, sweep_spec
from simdist.planner.plan import Objective, search
from simdist.planner.sweep import run_sweep

AXES = ["cluster.nodes.0.count=1,2,4", "cluster.nodes.0.nic.bandwidth=10 Gb/s,100 Gb/s",
        "communication.strategy=ring,ps"]


def _values(row, keys):
    return tuple(str(row[k]) for k in keys)


def test_throughput_optimum_under_a_gpu_limit_is_the_hand_answer(base):
    # more GPUs and a faster NIC never slow a ring down: with at most 8 GPUs the best is 2 nodes on 100 Gb/s
    spec = plan_spec({}, AXES, {"max_gpus": 8, "confirm": 2})
    plan = search(spec, base, load_point, jobs=1)
    best = plan.ranked[0]
    assert (best["cluster.nodes.0.count"], best["cluster.nodes.0.nic.bandwidth"]) == (2, "100 Gb/s")
    assert best["confirmed"] and best["fidelity"] == "simulate"
    assert plan.space == 12 and plan.feasible == 8 and plan.rejected == {"constraints": 4}


def test_pareto_front_equals_the_brute_force_front(base, tmp_path):
    plan = search(plan_spec({}, AXES, {"objective": "cost", "confirm": 0}), base, load_point, jobs=2)
    rows = run_sweep(sweep_spec({}, AXES), base, load_point, str(tmp_path / "all.csv"), jobs=1).rows
    pts = [(float(r["samples_per_s"]), float(r["cost_per_hour_usd"]), r) for r in rows]
    brute = {_values(r, ["point"]) for s, c, r in pts
             if not any(s2 >= s and c2 <= c and (s2 > s or c2 < c) for s2, c2, _ in pts)}
    assert {(str(r["point"]),) for r in plan.front} == brute
    # and the cost winner is the cheapest per sample of the brute-force table
    cheapest = min(pts, key=lambda p: (p[1] / p[0], int(p[2]["point"])))
    assert str(plan.ranked[0]["point"]) == cheapest[2]["point"]


def test_local_search_beyond_max_points_still_finds_the_optimum(base):
    spec = plan_spec({}, AXES, {"max_gpus": 8, "confirm": 0, "max_points": 3, "search": "sample"})
    plan = search(spec, base, load_point, jobs=1)
    assert plan.search.startswith("random sample of 3 of 12")
    assert plan.evaluated < 12
    best = plan.ranked[0]
    assert (best["cluster.nodes.0.count"], best["cluster.nodes.0.nic.bandwidth"]) == (2, "100 Gb/s")


def test_time_to_train_and_deadline(base):
    spec = plan_spec({}, AXES, {"objective": "time_to_train", "samples": 1e7, "deadline": "1 h", "confirm": 0})
    plan = search(spec, base, load_point, jobs=1)
    assert plan.objective == Objective.TIME_TO_TRAIN
    assert all(r["time_to_train_s"] <= 3600 for r in plan.ranked)
    assert plan.ranked[0]["time_to_train_s"] == min(r["time_to_train_s"] for r in plan.ranked)


@pytest.mark.parametrize("options, words", [
    ({"objective": "goodput"}, "goodput needs a failures section"),
    ({"objective": "time_to_train"}, "needs a budget"),
    ({"objective": "fastest"}, "plan.objective"),
    ({"max_gpus": -1}, "plan.max_gpus"),
])
def test_plan_options_are_checked(base, options, words):
    with pytest.raises(ScenarioError, match=words):
        check_goodput(plan_spec({}, AXES, options), base)


def test_plan_cli_json(base, tmp_path):
    scenario = dict(base, plan={"axes": {"cluster.nodes.0.count": [1, 2], "communication.strategy": ["ring", "ps"]},
                                "objective": "cost", "confirm": 1, "top": 3})
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.run([sys.executable, "-m", "simdist.cli", "plan", str(path), "--json", "--jobs", "1"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["objective"] == "cost" and out["space"] == 4 and len(out["ranked"]) == 3
    assert out["ranked"][0]["confirmed"] is True and out["pareto_front"] and out["why"]["winner"]
    text = subprocess.run([sys.executable, "-m", "simdist.cli", "plan", str(path), "--jobs", "1"],
                          capture_output=True, text=True, env=env).stdout
    assert "Pareto front" in text and "why the winner wins" in text
