"""Every scenario in scenarios/failures/ runs: failure runs report goodput, the sweep finds the optimum."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest
from click.testing import CliRunner

from simdist.cli import main
from simdist.engine.simulation import simulate
from simdist.io.load import load_data, load_scenario
from simdist.io.sweep_load import read_sweep_file
from simdist.units import parse_duration

FOLDER = Path(__file__).resolve().parents[2] / "scenarios" / "failures"
FILES = sorted(FOLDER.glob("*.yaml"))
RUNS = [p for p in FILES if not read_sweep_file(p)[1]]
SWEEPS = [p for p in FILES if read_sweep_file(p)[1]]


def test_the_folder_has_the_documented_scenarios():
    names = {p.stem for p in FILES}
    assert {"gpt-1024gpu-14d", "gpt-16384gpu-54d", "checkpoint-interval-sweep"} <= names


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.stem)
def test_failure_scenario_runs_and_reports_goodput(path):
    # the closed-form fidelity and two replicas keep the test short; benchmarks/failures.py times the real runs
    s = load_scenario(path, ["run.replicas=2", "run.fidelity=estimate"])
    g = simulate(s).goodput.to_dict()
    assert 0.5 < g["ratio"] < 1.0 and g["failures"] > 0 and g["ratio_ci95"] is not None
    assert g["young_daly_interval_s"] > 0 and g["job_mtbf_s"] > 0


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_checkpoint_sweep_peaks_at_the_young_daly_interval(path, tmp_path):
    out = tmp_path / "sweep.csv"
    res = CliRunner().invoke(main, ["sweep", str(path), "--out", str(out), "--jobs", "1", "--set", "run.replicas=8"])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(out.open()))
    assert all(r["status"] == "ok" for r in rows)
    best = max(rows, key=lambda r: float(r["goodput_ratio"]))
    data, _, _, name = read_sweep_file(path)
    optimum = simulate(load_data(data, name=name)).goodput.model.young_daly_interval_s
    nearest = min(rows, key=lambda r: abs(parse_duration(r["failures.recovery.checkpoint_interval"]) - optimum))
    assert best["point"] == nearest["point"]
    # the terminal table shows goodput and names the peak
    assert "goodput_ratio" in res.output and f"highest goodput: point {best['point']} " in res.output
