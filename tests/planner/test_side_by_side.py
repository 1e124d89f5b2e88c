"""simdist compare A B: side by side, each breakdown term's difference from the first file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from simdist.engine.simulation import simulate
from simdist.io.load import load_scenario
from simdist.planner.side_by_side import comparison

ROOT = Path(__file__).resolve().parents[2]
A, B = ROOT / "scenarios/presets/pytorch-ddp.yaml", ROOT / "scenarios/presets/horovod.yaml"


def test_differences_are_against_the_first():
    ra, rb = (simulate(load_scenario(p), fidelity="estimate") for p in (A, B))
    table = comparison([("a", ra), ("b", rb)])
    rows = {r["figure"]: r for r in table["rows"]}
    assert rows["iteration_time_s"]["values"] == [ra.iteration_time_s, rb.iteration_time_s]
    assert rows["iteration_time_s"]["minus_first"] == [rb.iteration_time_s - ra.iteration_time_s]
    assert rows["breakdown_s.communication"]["minus_first"] == [rb.breakdown_s.communication - ra.breakdown_s.communication]
    assert "tokens_per_s" in rows and rows["tokens_per_s"]["minus_first"] == [None]  # a CNN has no tokens


def test_cli_side_by_side_json_and_breakeven_mode_stays():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    side = subprocess.run([sys.executable, "-m", "simdist.cli", "compare", str(A), str(B), "--json"],
                          capture_output=True, text=True, env=env)
    assert side.returncode == 0, side.stderr
    assert json.loads(side.stdout)["scenarios"] == ["pytorch-ddp", "horovod"]
    one = subprocess.run([sys.executable, "-m", "simdist.cli", "compare", str(B), "--json", "--methods", "fp16"],
                         capture_output=True, text=True, env=env)
    assert one.returncode == 0, one.stderr and "fp16" in one.stdout
    bad = subprocess.run([sys.executable, "-m", "simdist.cli", "compare", str(A), str(B), "--plot", "x.png"],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "--plot" in bad.stderr
