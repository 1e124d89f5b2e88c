"""A resumed sweep skips finished points by their input key, without resolving them again (resume.py), and
never skips a point whose resolved scenario may differ (changed code, base data or referenced files)."""
from __future__ import annotations

import json

from simdist.io.sweep_load import load_point, sweep_spec
from simdist.planner import resume
from simdist.planner.sweep import run_sweep

AXES = ["communication.strategy=ring,ps", "cluster.nodes.0.count=1,2,4"]
CALLS: list[dict] = []


def counting_loader(base, overrides, values, base_dir, name):
    CALLS.append(dict(values))
    return load_point(base, overrides, values, base_dir, name)


def _sweep(base, out, **kw):
    CALLS.clear()
    return run_sweep(sweep_spec({}, AXES), base, counting_loader, str(out), jobs=1, **kw)


def test_a_resumed_sweep_resolves_only_its_unfinished_points(base, tmp_path):
    out = tmp_path / "s.csv"
    full = _sweep(base, out)
    assert full.ran == 6 and len(CALLS) == 6
    again = _sweep(base, out)
    assert (again.ran, again.resumed, len(CALLS)) == (0, 6, 0) and again.rows == full.rows
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:4]))  # as if killed after 3 rows: the index still names all 6
    resumed = _sweep(base, out)
    assert (resumed.ran, resumed.resumed) == (3, 3) and resumed.rows == full.rows
    assert len(CALLS) == 3 and {json.dumps(c, sort_keys=True) for c in CALLS} == {
        json.dumps({k: r[k] if k == "communication.strategy" else int(r[k]) for k in
                    ("communication.strategy", "cluster.nodes.0.count")}, sort_keys=True) for r in full.rows[3:]}


def test_another_fingerprint_resolves_every_point_but_runs_none_again(base, tmp_path, monkeypatch):
    out = tmp_path / "s.csv"
    full = _sweep(base, out)
    monkeypatch.setattr(resume, "code_fingerprint", lambda: "another simdist")
    again = _sweep(base, out)
    assert (again.ran, again.resumed, len(CALLS)) == (0, 6, 6) and again.rows == full.rows
    third = _sweep(base, out)  # the index was started afresh under the new fingerprint
    assert len(CALLS) == 0 and third.rows == full.rows


def test_a_referenced_file_is_part_of_the_fingerprint(tmp_path):
    (tmp_path / "graph.graphml").write_text("one")
    base = {"cluster": {"fabric": {"topology": "custom", "file": "graph.graphml"}}}
    one = resume.fingerprint(base, (), "", load_point, str(tmp_path))
    (tmp_path / "graph.graphml").write_text("two")
    assert resume.fingerprint(base, (), "", load_point, str(tmp_path)) != one
    assert resume.fingerprint({**base, "x": 1}, (), "", load_point, str(tmp_path)) != one
    assert resume.fingerprint({"workload": {"model": "mypkg.models:build"}}, (), "", load_point, ".") is None


def test_input_keys_keep_value_types():
    assert resume.input_key("p", {"a": 1}) != resume.input_key("p", {"a": 1.0})
    assert resume.input_key("p", {"a": 1}) != resume.input_key("q", {"a": 1})
