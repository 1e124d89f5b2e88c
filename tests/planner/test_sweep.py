"""Sweeps end to end: rows equal to running each point alone, resume after a kill, refusal of another sweep."""
from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.sweep_load import check_out_file, load_point, sweep_spec
from simdist.planner.rows import cell, point_key
from simdist.planner.sweep import run_sweep

AXES = ["communication.strategy=ring,hierarchical,ps", "cluster.nodes.0.count=1,2,4,8,16",
        "communication.compression.method=none,fp16,int8,powersgd"]


def _sweep(base, out, axes=AXES, **kw):
    return run_sweep(sweep_spec({}, axes), base, load_point, str(out), **kw)


def test_sixty_points_on_two_processes_equal_each_point_run_alone(base, tmp_path):
    outcome = _sweep(base, tmp_path / "s.csv", jobs=2)
    assert outcome.points == 60 and len(outcome.rows) == 60 and outcome.ran == 60
    assert [int(r["point"]) for r in outcome.rows] == list(range(60))
    for row in outcome.rows:
        values = {k: yaml.safe_load(row[k]) for k in ("communication.strategy", "cluster.nodes.0.count",
                                                      "communication.compression.method")}
        scenario = load_point(base, (), values, ".", "scenario")
        alone = simulate(scenario)
        assert row["status"] == "ok", row["reason"]
        assert row["key"] == point_key(scenario, "estimate")
        assert row["iteration_time_s"] == cell(alone.iteration_time_s)
        assert row["samples_per_s"] == cell(alone.throughput.samples_per_s)
    # the file holds exactly the returned table, in point order
    with open(tmp_path / "s.csv", newline="") as f:
        assert list(csv.DictReader(f)) == outcome.rows


def test_rerun_skips_finished_points_and_other_sweeps_are_refused(base, tmp_path):
    out = tmp_path / "s.csv"
    first = _sweep(base, out, axes=AXES[:2], jobs=1)
    again = _sweep(base, out, axes=AXES[:2], jobs=1)
    assert (first.ran, again.ran, again.resumed) == (15, 0, 15) and again.rows == first.rows
    other = sweep_spec({}, AXES[:1])
    with pytest.raises(ScenarioError, match="holds a different sweep.*axes"):  # refused before anything runs
        check_out_file(str(out), "csv", other, base)
    with pytest.raises(ScenarioError, match="holds a different sweep.*fidelity"):
        check_out_file(str(out), "csv", sweep_spec({}, AXES[:2]), base, fidelity="simulate")
    check_out_file(str(out), "csv", sweep_spec({}, AXES[:2]), base)  # the same sweep resumes
    (tmp_path / "s.csv.sweep.json").unlink()
    with pytest.raises(ScenarioError, match="what sweep wrote it"):
        check_out_file(str(out), "csv", sweep_spec({}, AXES[:2]), base)


def test_infeasible_and_invalid_points_carry_their_reasons(base, tmp_path):
    outcome = _sweep(base, tmp_path / "s.csv", axes=["workload.batch_per_gpu=32,100000", "communication.strategy=ring,nope"],
                     jobs=1)
    by = {(r["workload.batch_per_gpu"], r["communication.strategy"]): r for r in outcome.rows}
    assert by[("32", "ring")]["status"] == "ok"
    assert by[("100000", "ring")]["status"] == "infeasible" and "memory" in by[("100000", "ring")]["reason"]
    assert by[("32", "nope")]["status"] == "invalid" and "communication.strategy" in by[("32", "nope")]["reason"]
    assert outcome.by_status == {"ok": 1, "infeasible": 1, "invalid": 2}


def test_an_axis_on_a_key_the_schema_lacks_is_refused_before_any_point_runs():
    """A misspelt axis key would make every point invalid with the same error: it is refused up front, with the
    keys the schema has there; keys below a catalog-or-inline union (nic.bandwidth) are left to each point."""
    with pytest.raises(ScenarioError) as e:
        sweep_spec({}, ["communication.strategi=ring,tree", "cluster.nodes.0.count=1,2"])
    assert [i.path for i in e.value.issues] == ["communication.strategi"]
    assert "did you mean 'strategy'" in str(e.value)
    keys = [a.key for a in sweep_spec({}, ["cluster.nodes.0.nic.bandwidth=1 Gb/s,2 Gb/s",
                                           "workload.model.gpt.layers=2,4", "training.parallelism.tp=1,2"]).axes]
    assert keys == ["cluster.nodes.0.nic.bandwidth", "workload.model.gpt.layers", "training.parallelism.tp"]


def test_constraints_on_inputs_prune_and_on_results_mark(base, tmp_path):
    # 3600 samples/s: ring on 2 nodes (3207) and ps on 1 (3501) fall short, the rest pass
    outcome = run_sweep(sweep_spec({}, AXES[:2], constraints=["gpus <= 32 and samples_per_s > 3600"]), base,
                        load_point, str(tmp_path / "s.csv"), jobs=1)
    assert outcome.pruned == 3 and len(outcome.rows) == 12  # the 64-GPU points never run
    assert {r["meets_constraints"] for r in outcome.rows} == {"true", "false"}
    with pytest.raises(ScenarioError, match="unknown: gpu_count"):  # refused where the sweep is read
        sweep_spec({}, AXES[:1], constraints=["gpu_count < 3"])


def test_a_partial_last_line_is_cut_on_resume(base, tmp_path):
    out = tmp_path / "s.csv"
    full = _sweep(base, out, axes=AXES[:2], jobs=1)
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:6]) + lines[6][:25])  # 5 whole rows and half of the sixth
    resumed = _sweep(base, out, axes=AXES[:2], jobs=1)
    assert (resumed.resumed, resumed.ran) == (5, 10) and resumed.rows == full.rows


def test_sweep_block_in_the_file_and_parquet(tmp_path, base):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    scenario = dict(base, sweep={"axes": {"communication.strategy": ["ring", "ps"],
                                          "cluster.nodes.0.count": "geom(1, 4, 3)"},
                                 "constraints": ["gpus >= 8"]})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.run([sys.executable, "-m", "simdist.cli", "sweep", str(path), "--out", str(tmp_path / "s.parquet"),
                           "--format", "parquet", "--jobs", "1"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    table = pq.read_table(tmp_path / "s.parquet").to_pydict()
    assert table["communication.strategy"] == ["ring", "ring", "ps", "ps"] and table["gpus"] == [8, 16, 8, 16]
    assert all(v > 0 for v in table["iteration_time_s"]) and "4 points: ran 4" not in proc.stdout
    assert "6 points: ran 4" in proc.stdout


@pytest.mark.slow
def test_a_killed_sweep_resumes_with_no_missing_or_duplicate_rows(tmp_path, base):
    base["run"]["fidelity"] = "simulate"
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(base))
    out = tmp_path / "s.csv"
    cmd = [sys.executable, "-m", "simdist.cli", "sweep", str(path), "--out", str(out), "--jobs", "2",
           "--axis", "cluster.nodes.0.count=1,2,3,4", "--axis", "communication.bucket_size=1 MB,5 MB,10 MB,25 MB"]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 4:  # header + at least 3 rows
            break
        time.sleep(0.02)
    killed = proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    rows_before = out.read_text().count("\n") - 1
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with open(out, newline="") as f:
        points = [int(r["point"]) for r in csv.DictReader(f)]
    assert points == list(range(16))
    if killed:  # the kill came before the end: the rerun did only the rest
        assert f"already done {rows_before}" in done.stdout or rows_before >= 16
