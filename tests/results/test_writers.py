"""Result folders: atomic writes, deterministic JSON, a Chrome trace Perfetto can load."""
import json

from simdist.results.records import Breakdown, RunResult, StepRecord, Throughput
from simdist.results.writers import atomic_write_text, result_json, write_result_dir


def _result():
    return RunResult(scenario="s", simdist_version="0", fidelity="simulate", gpus=2, iteration_time_s=0.5,
                     throughput=Throughput(128.0), breakdown_s=Breakdown(compute=0.4),
                     iterations=(0.6, 0.5), records=(StepRecord("gpu:0", "forward", 0.0, 0.1, 0),
                                                     StepRecord("comm:0", "bucket0", 0.1, 0.3, 0)))


def test_json_has_the_contract_keys_and_is_deterministic():
    r = _result()
    d = json.loads(result_json(r))
    for key in ("scenario", "simdist_version", "fidelity", "gpus", "iteration_time_s", "throughput",
                "scaling_efficiency", "breakdown_s", "memory", "links", "goodput", "collectives"):
        assert key in d
    assert d["throughput"] == {"samples_per_s": 128.0, "tokens_per_s": None}
    assert result_json(r) == result_json(_result())


def test_result_dir(tmp_path):
    written = write_result_dir(_result(), tmp_path / "out")
    assert sorted(p.name for p in written) == ["iterations.csv", "result.json", "trace.json"]
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert xs[0]["ts"] == 0.0 and xs[0]["dur"] == 1e5
    assert (tmp_path / "out" / "iterations.csv").read_text().splitlines()[0] == "iteration,time_s"
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".tmp")]


def test_atomic_write_keeps_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "f.json"
    atomic_write_text(target, "old")
    import os

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    try:
        atomic_write_text(target, "new")
    except OSError:
        pass
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_results_get_the_umask_mode_not_mkstemps_0600(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "r.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644
