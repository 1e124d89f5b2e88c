"""A plan lists every candidate with its status and the fidelity of its figures; zipped axes; progress."""
from __future__ import annotations

import copy
import csv
import io
import json

import pytest
import yaml
from click.testing import CliRunner

from simdist.cli import main
from simdist.io.sweep_load import load_point, plan_spec
from simdist.planner import plan as plan_module
from simdist.planner.candidates import columns
from simdist.planner.plan import search
from simdist.planner.plan_report import format_plan, plan_json
from simdist.progress import Progress
from tests.planner.conftest import BASE

# three compute classes (batch 32 runs, batch 100000 does not fit in memory, batch 1 is too slow to matter),
# crossed with compute-free communication axes; bucket_size 'nope' does not load
AXES = ["workload.batch_per_gpu=32,1,100000", "communication.bucket_size=25 MB,1 MB,nope",
        "communication.overlap=true,false"]


def _status(c):
    return c["status"], c["pruned_by"]


@pytest.fixture(scope="module")
def small_plan():
    spec = plan_spec({}, AXES, {"top": 2, "confirm": 1})
    return spec, search(spec, copy.deepcopy(BASE), load_point, jobs=1)


def test_every_candidate_has_its_status_and_reason(small_plan):
    spec, plan = small_plan
    assert [c["point"] for c in plan.candidates] == list(range(18))
    by = {(c["workload.batch_per_gpu"], c["communication.bucket_size"], c["communication.overlap"]): c
          for c in plan.candidates}
    for size in ("25 MB", "1 MB"):
        for overlap in (True, False):
            assert _status(by[(32, size, overlap)]) == ("ranked", "")
            oom = by[(100000, size, overlap)]
            assert _status(oom) == ("pruned", "memory") and "does not fit in GPU memory" in oom["reason"]
            slow = by[(1, size, overlap)]
            assert _status(slow) == ("pruned", "compute bound") and slow["fidelity"] == "bound"
            assert slow["bound_samples_per_s"] > 0 and slow["samples_per_s"] is None
    for batch in (32, 100000):
        bad = by[(batch, "nope", True)]
        assert _status(bad) == ("invalid", "") and "communication.bucket_size" in bad["reason"]
    assert sorted(c["rank"] for c in plan.candidates if c["status"] == "ranked") == [1, 2, 3, 4]
    assert plan.pruned == 6


def test_figures_say_which_fidelity_they_come_from(small_plan):
    spec, plan = small_plan
    first = next(c for c in plan.candidates if c["rank"] == 1)
    assert first["fidelity"] == "simulate" and first["estimate_samples_per_s"] > 0  # the estimate kept beside
    rest = [c for c in plan.candidates if c["status"] == "ranked" and c["rank"] > 1]
    assert {c["fidelity"] for c in rest} == {"estimate"} and all(c["estimate_samples_per_s"] is None for c in rest)
    text = format_plan(plan, spec)
    assert "samples/s simulated" in text and "samples/s estimated" in text
    assert "Pareto front of the estimates" in text
    assert "pruned (compute bound)" in text and "pruned (memory)" in text and "invalid" in text
    out = plan_json(plan, spec)
    assert out["status_counts"] == {"ranked": 4, "pruned (memory)": 4, "pruned (compute bound)": 6, "invalid": 4}
    assert len(out["candidates"]) == 18


def test_why_the_winner_wins_names_the_objective(small_plan):
    spec = plan_spec({}, AXES, {"objective": "cost", "top": 3, "confirm": 0})
    plan = search(spec, copy.deepcopy(BASE), load_point, jobs=1)
    text = format_plan(plan, spec)
    why = text[text.index("why the winner wins"):]
    line = next(ln for ln in why.splitlines() if ln.startswith("objective: cost ($/Msample)"))
    winner = plan.ranked[0]
    per = winner["cost_per_hour_usd"] / 3600 / winner["samples_per_s"] * 1e6
    assert f"{per:.4g}" in line
    assert plan_json(plan, spec)["why"]["objective"]["winner"] == pytest.approx(per)


def _plan_file(tmp_path, block):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(dict(copy.deepcopy(BASE), plan=block), sort_keys=False))
    return str(path)


def test_out_csv_and_parquet_list_every_candidate(tmp_path):
    path = _plan_file(tmp_path, {"axes": {"workload.batch_per_gpu": [32, 100000],
                                          "communication.strategy": ["ring", "nope"]}, "confirm": 1})
    res = CliRunner().invoke(main, ["plan", path, "--jobs", "1", "--out", str(tmp_path / "c.csv")])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO((tmp_path / "c.csv").read_text())))
    spec = plan_spec({}, ["workload.batch_per_gpu=32,100000", "communication.strategy=ring,nope"])
    assert tuple(rows[0]) == columns(spec)
    assert [(r["status"], r["pruned_by"]) for r in rows] == [("ranked", ""), ("invalid", ""), ("pruned", "memory"),
                                                             ("invalid", "")]
    assert rows[0]["fidelity"] == "simulate" and rows[2]["fidelity"] == "estimate"
    pq = pytest.importorskip("pyarrow.parquet")
    res = CliRunner().invoke(main, ["plan", path, "--jobs", "1", "--out", str(tmp_path / "c.parquet"),
                                    "--format", "parquet"])
    assert res.exit_code == 0, res.output
    table = pq.read_table(tmp_path / "c.parquet").to_pylist()
    assert [r["status"] for r in table] == [r["status"] for r in rows]
    assert isinstance(table[0]["samples_per_s"], float) and table[0]["rank"] == 1


def test_zipped_axes_advance_together(tmp_path):
    block = {"axes": {"cluster.nodes.0.gpu": ["v100-sxm2-32gb", "a100-sxm4-80gb"],
                      "cluster.nodes.0.intra_node": ["pcie-gen3", "pcie-gen4"],
                      "cluster.nodes.0.count": [1, 2]},
             "zip": [["cluster.nodes.0.gpu", "cluster.nodes.0.intra_node"]], "confirm": 0}
    spec = plan_spec(block)
    plan = search(spec, copy.deepcopy(BASE), load_point, jobs=1)
    pairs = [(c["cluster.nodes.0.gpu"], c["cluster.nodes.0.intra_node"]) for c in plan.candidates]
    assert plan.space == 4 and len(pairs) == 4
    assert set(pairs) == {("v100-sxm2-32gb", "pcie-gen3"), ("a100-sxm4-80gb", "pcie-gen4")}
    # the command line's --zip does the same, and the local search moves a zipped group as one
    path = _plan_file(tmp_path, {k: v for k, v in block.items() if k != "zip"})
    res = CliRunner().invoke(main, ["plan", path, "--jobs", "1", "--json", "--zip",
                                    "cluster.nodes.0.gpu,cluster.nodes.0.intra_node"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["space"] == 4
    sampled = search(plan_spec(block, options={"search": "sample", "max_points": 1}), copy.deepcopy(BASE),
                     load_point, jobs=1)
    assert {(c["cluster.nodes.0.gpu"], c["cluster.nodes.0.intra_node"]) for c in sampled.candidates} <= set(pairs)
    bad = {**block, "axes": {**block["axes"], "cluster.nodes.0.count": [1, 2, 4]},
           "zip": [["cluster.nodes.0.gpu", "cluster.nodes.0.count"]]}
    res = CliRunner().invoke(main, ["plan", _plan_file(tmp_path, bad)])
    assert res.exit_code == 2 and "different lengths" in res.output


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_and_never_under_json(tmp_path, monkeypatch):
    screen = _Terminal()

    class OnTerminal(Progress):
        def __init__(self, total, label="points", **kw):
            super().__init__(total, label=label, stream=screen, **kw)

    monkeypatch.setattr(plan_module, "Progress", OnTerminal)
    monkeypatch.setattr(plan_module, "BAR_DELAY_S", 0.0)
    path = _plan_file(tmp_path, {"axes": {"communication.strategy": ["ring", "ps"]}, "confirm": 1})
    res = CliRunner().invoke(main, ["plan", path, "--jobs", "1", "--json"])
    assert res.exit_code == 0, res.output
    assert screen.getvalue() == "" and json.loads(res.output)["space"] == 2
    res = CliRunner().invoke(main, ["plan", path, "--jobs", "1"])
    assert res.exit_code == 0, res.output
    drawn = screen.getvalue()
    assert "2/2 candidates estimated" in drawn and "1/1 candidates simulated (simulate)" in drawn


def test_a_halving_plan_lists_what_its_bound_rung_cut():
    axes = ["cluster.nodes.0.count=1,2,4", "cluster.nodes.0.nic.bandwidth=10 Gb/s,100 Gb/s",
            "communication.strategy=ring,ps"]
    spec = plan_spec({}, axes, {"search": "halving", "max_points": 4, "eta": 2, "max_gpus": 8, "confirm": 1,
                                "prune": False})
    plan = search(spec, copy.deepcopy(BASE), load_point, jobs=1)
    assert [c["point"] for c in plan.candidates] == list(range(12))
    examined = {c["point"] for c in plan.candidates if c["fidelity"] != "bound"}  # estimated, or excluded on
    assert len(examined) == plan.evaluated == 6  # the way by a constraint (fidelity '': nothing ran)
    for c in plan.candidates:
        if c["point"] in examined:
            continue
        assert c["status"] == "pruned" and c["fidelity"] == "bound"
        if c["cluster.nodes.0.count"] == 4:  # 16 GPUs: the bound rung applied --max-gpus 8 first
            assert (c["pruned_by"], c["reason"]) == ("constraint", "fails 'gpus <= 8'")
        else:
            assert c["pruned_by"] == "halving" and c["bound_samples_per_s"] > 0
