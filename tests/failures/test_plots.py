"""Goodput plots render without a display: the throughput timeline of a failure run and the goodput
against checkpoint interval of a sweep (PNG written, non-empty)."""
from __future__ import annotations

import copy

import pytest
import yaml
from click.testing import CliRunner

from simdist.cli import main
from simdist.engine.simulation import simulate
from simdist.plots_goodput import segment_rate, throughput_series
from tests.failures.test_engine_goodput import BASE, _scenario

PNG = b"\x89PNG"


def _failure_file(tmp_path, extra: dict | None = None):
    data = copy.deepcopy(BASE)
    data["failures"]["events"] = [{"at": "150 min", "kind": "node_down", "target": "node:1"},
                                  {"at": "5 h", "kind": "straggler", "target": "gpu:0", "slowdown": 2.0,
                                   "duration": "2 h"}]
    data.update(extra or {})
    path = tmp_path / "fail.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_throughput_series_follows_the_job_track():
    r = simulate(_scenario({"failures.events": [{"at": "150 min", "kind": "node_down", "target": "node:1"}]}))
    times, rates, failures = throughput_series(r)
    assert failures == [pytest.approx(150 * 60.0)]
    assert times[0] == 0.0 and times[-1] == pytest.approx(24 * 3600.0)
    healthy = r.throughput.samples_per_s
    assert max(rates) <= healthy * (1 + 1e-12) and min(rates) == 0.0  # restarts and checkpoints run nothing
    assert segment_rate("train at 75 %") == 0.75 and segment_rate("restart") == 0.0
    assert segment_rate("train + checkpoints", 3600.0, 400.0) == pytest.approx(0.9)


def test_run_plot_of_a_failure_run_writes_the_timeline(tmp_path):
    png = tmp_path / "timeline.png"
    res = CliRunner().invoke(main, ["run", str(_failure_file(tmp_path)), "--plot", str(png)])
    assert res.exit_code == 0, res.output
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == PNG


def test_sweep_plot_of_the_checkpoint_interval_marks_young_daly(tmp_path):
    data = copy.deepcopy(BASE)
    data["failures"]["random"] = {"node_mtbf": "100 h", "repair": "1 h"}
    data["run"] = {"duration": "10 d", "replicas": 2, "warmup": 2}
    data["sweep"] = {"axes": {"failures.recovery.checkpoint_interval": ["10 min", "1 h", "4 h"]}}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    png = tmp_path / "sweep.png"
    res = CliRunner().invoke(main, ["sweep", str(path), "--out", str(tmp_path / "s.csv"), "--jobs", "1",
                                    "--plot", str(png)])
    assert res.exit_code == 0, res.output
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == PNG
