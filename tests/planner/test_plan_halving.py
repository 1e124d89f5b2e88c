"""Successive halving over bound -> estimate -> simulate:N -> simulate: the hand optimum, the brute-force
top-k, determinism, the rung each candidate reached, and the checks on its options."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from simdist.errors import ScenarioError
from simdist.io.sweep_load import load_point, plan_spec, sweep_spec
from simdist.io.plan_rules import parse_rungs
from simdist.planner.halving import DEFAULT_RUNGS, entering, rung_caps
from simdist.planner.plan import search
from simdist.planner.sweep import run_sweep

HAND = ["cluster.nodes.0.count=1,2,4", "cluster.nodes.0.nic.bandwidth=10 Gb/s,100 Gb/s",
        "communication.strategy=ring,ps"]
SMALL = ["workload.batch_per_gpu=1,2,32,64", "communication.strategy=ring,tree,ps", "communication.overlap=true,false"]


def test_halving_finds_the_hand_optimum(base):
    # as test_plan's hand answer: at most 8 GPUs, the fastest is 2 nodes on 100 Gb/s; the constraint on
    # GPUs is applied at the bound rung, so the 4 (of 12) 16-GPU candidates never take a place there
    spec = plan_spec({}, HAND, {"max_gpus": 8, "confirm": 1, "max_points": 4, "search": "halving", "eta": 2,
                                "rungs": "bound,estimate,simulate:1,simulate"})
    plan = search(spec, base, load_point, jobs=1)
    best = plan.ranked[0]
    assert (best["cluster.nodes.0.count"], best["cluster.nodes.0.nic.bandwidth"]) == (2, "100 Gb/s")
    assert best["confirmed"] and best["rung"] == "simulate"
    assert plan.search.startswith("successive halving (eta 2, rungs bound,estimate,simulate:1,simulate)")
    bound = plan.rungs[0]
    assert bound["rung"] == "bound" and bound["excluded_by_constraints"] == 4 and bound["promoted"] == 4
    assert [r["rung"] for r in plan.rungs] == ["bound", "estimate", "simulate:1", "simulate"]


def test_the_top_k_it_confirms_is_the_brute_force_top_k(base, tmp_path):
    """Brute force: simulate every one of the 24 candidates; halving simulates (in full) only 3 of them."""
    k = 3
    spec = plan_spec({}, SMALL, {"confirm": k, "top": k, "max_points": 12, "search": "halving", "eta": 2,
                                 "rungs": ["bound", "estimate", "simulate:1", "simulate"]})
    plan = search(spec, base, load_point, jobs=2)
    rows = run_sweep(sweep_spec({}, SMALL), base, load_point, str(tmp_path / "all.csv"), fidelity="simulate",
                     jobs=2).rows
    brute = sorted(rows, key=lambda r: (-float(r["samples_per_s"]), int(r["point"])))[:k]
    assert [r["point"] for r in plan.ranked if r["confirmed"]] == [int(r["point"]) for r in brute]
    for mine, theirs in zip(plan.ranked, brute):
        assert mine["samples_per_s"] == pytest.approx(float(theirs["samples_per_s"]), rel=1e-12)
    entered = {r["rung"]: r["entered"] for r in plan.rungs}
    assert entered == {"bound": 24, "estimate": 12, "simulate:1": 6, "simulate": 3}


def test_halving_is_deterministic_with_a_seed(base):
    spec = plan_spec({}, HAND, {"confirm": 1, "top": 4, "max_points": 5, "search": "halving"})
    one, two = (search(spec, base, load_point, jobs=1) for _ in range(2))
    assert [r["point"] for r in one.ranked] == [r["point"] for r in two.ranked]
    assert one.rungs == two.rungs and one.search == two.search
    # the bound ties (the NIC does not change compute): the seed picks which tied candidates go on
    picks = set()
    for seed in range(6):
        p = search(replace(spec, seed=seed, confirm=0, top=12, max_points=3, rungs=("bound", "estimate")), base,
                   load_point, jobs=1)
        picks.add(tuple(sorted(r["point"] for r in p.ranked)))
    assert len(picks) > 1


def test_every_ranked_row_says_its_rung(base):
    spec = plan_spec({}, SMALL, {"confirm": 2, "top": 10, "max_points": 12, "search": "halving", "eta": 2,
                                 "rungs": "bound,estimate,simulate:1,simulate"})
    plan = search(spec, base, load_point, jobs=1)
    rungs = [r["rung"] for r in plan.ranked]
    assert rungs[:2] == ["simulate", "simulate"] and "simulate:1" in rungs and rungs[-1] == "estimate"
    order = {"simulate": 0, "simulate:1": 1, "estimate": 2}
    assert [order[x] for x in rungs] == sorted(order[x] for x in rungs)
    assert all(r["confirmed"] == (r["rung"] == "simulate") for r in plan.ranked if "confirmed" in r)


def test_rung_sizes():
    rungs = parse_rungs("bound,estimate,simulate:1,simulate")
    assert rung_caps(rungs, 2000, 10, 3) == [None, 2000, 30, 10]
    assert parse_rungs(DEFAULT_RUNGS) == parse_rungs("bound,estimate,simulate")
    assert entering(10_080, 3, 2000) == 2000 and entering(2000, 3, 30) == 30 and entering(4, 3, None) == 2


@pytest.mark.parametrize("text, words", [
    ("bound,simulate", "include estimate"),
    ("estimate,bound", "increasing fidelity"),
    ("estimate,simulate,simulate:1", "increasing fidelity"),
    ("estimate,simulate:0", "N >= 1"),
    ("estimate,fast", "a rung among"),
    ("estimate:2", "a rung among"),
])
def test_bad_rungs_are_refused(text, words):
    with pytest.raises(ScenarioError, match=words):
        parse_rungs(text)


@pytest.mark.parametrize("options, words", [({"eta": 1}, "plan.eta"), ({"search": "grid"}, "plan.search"),
                                            ({"prune": "yes"}, "plan.prune"), ({"rungs": "simulate"}, "plan.rungs")])
def test_bad_search_options_are_refused(options, words):
    with pytest.raises(ScenarioError, match=words):
        plan_spec({}, SMALL, options)


def test_cli_search_switches(base, tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(dict(base, plan={"axes": {"workload.batch_per_gpu": [1, 2, 32, 64],
                                                             "communication.overlap": [True, False]}}),
                                   sort_keys=False))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    cli = [sys.executable, "-m", "simdist.cli", "plan", str(path), "--jobs", "1", "--confirm", "1"]
    helptext = subprocess.run([*cli[:4], "--help"], capture_output=True, text=True, env=env).stdout
    for flag in ("--search", "--eta", "--rungs", "--no-prune", "--seed"):
        assert flag in helptext
    out = json.loads(subprocess.run([*cli, "--search", "halving", "--eta", "2", "--rungs", "bound,estimate,simulate",
                                     "--max-points", "4", "--seed", "3", "--json"], capture_output=True, text=True,
                                    env=env).stdout)
    assert out["search"].startswith("successive halving (eta 2, rungs bound,estimate,simulate)")
    assert [r["rung"] for r in out["rungs"]] == ["bound", "estimate", "simulate"]
    assert out["ranked"][0]["rung"] == "simulate"
    full = json.loads(subprocess.run([*cli, "--search", "exhaustive", "--no-prune", "--json"], capture_output=True,
                                     text=True, env=env).stdout)
    assert full["search"] == "exhaustive" and full["pruned"] == 0 and full["evaluated"] == 8
    text = subprocess.run([*cli, "--search", "halving", "--max-points", "4", "--rungs",
                           "bound,estimate,simulate:1,simulate"], capture_output=True, text=True, env=env).stdout
    assert "rung" in text and "simulate:1" in text


def test_halving_under_failures_ranks_by_goodput_on_every_rung():
    """simulate:N runs one failure replica over the run's duration; the last rung the scenario's own run."""
    import copy

    from tests.planner.test_plan_goodput import AXES as GOODPUT_AXES, BASE as GOODPUT_BASE

    spec = plan_spec({}, GOODPUT_AXES, {"objective": "goodput", "confirm": 1, "max_points": 4, "eta": 2,
                                        "search": "halving", "rungs": "bound,estimate,simulate:1,simulate"})
    plan = search(spec, copy.deepcopy(GOODPUT_BASE), load_point, jobs=1)
    best = plan.ranked[0]
    assert (best["failures.recovery.checkpoint_interval"], best["communication.strategy"]) == ("2 h", "ring")
    assert best["rung"] == "simulate" and 0 < best["goodput_ratio"] < 1
    assert [r["rung"] for r in plan.rungs] == ["bound", "estimate", "simulate:1", "simulate"]
