"""Every plan scenario shipped in scenarios/planner/ runs, and its winner meets its own constraints."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLANS = sorted((ROOT / "scenarios" / "planner").glob("*.yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("path", PLANS, ids=[p.stem for p in PLANS])
def test_shipped_plan_runs(path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "simdist.cli", "plan", str(path), "--json", "--jobs", "2",
                           "--confirm", "1"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    best = plan["ranked"][0]
    assert best["status"] == "ok" and best["memory_fits"] and plan["pareto_front"]
    if best.get("time_to_train_s") is not None and "gpt2xl-token-budget" in path.stem:
        assert best["time_to_train_s"] <= 14 * 86400


def test_there_are_plan_scenarios():
    assert PLANS
