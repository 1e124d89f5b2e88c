"""`simdist validate --published`: the validate object's keys, failures as rows, ranking, and the CLI."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from simdist.cli import main
from simdist.validation.published import runner
from tests.validation.cases_subset import write_cases_subset

KEYS = {"cases", "mape", "max_error", "ranking_ok", "out_of_sample_mape", "fitting_subset"}


def _small_file(tmp_path: Path, n: int = 4) -> Path:
    return write_cases_subset(tmp_path, lambda cases: cases[:n])


def test_the_report_is_the_validate_object_with_out_of_sample_figures(tmp_path: Path) -> None:
    report = runner.run_suite(_small_file(tmp_path))
    assert KEYS <= set(report)
    for row in report["cases"]:
        assert {"name", "metric", "predicted", "measured", "error"} <= set(row)
        assert row["error"] == abs(row["predicted"] - row["measured"]) / row["measured"]
    errors = [r["error"] for r in report["cases"]]
    assert report["mape"] == sum(errors) / len(errors) and report["max_error"] == max(errors)
    assert report["fitting_subset"]["name"] == "fit"
    assert report["out_of_sample_mape"] == report["mape"]   # nothing is fitted: every case is held out


def test_a_failing_scenario_is_a_row_not_a_crash(tmp_path: Path) -> None:
    path = _small_file(tmp_path, 2)
    raw = yaml.safe_load(path.read_text())
    raw["cases"][1]["scenario"]["set"] = ["cluster.nodes.0.gpu=no-such-gpu"]
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    report = runner.run_suite(path)
    bad = report["cases"][1]
    assert bad["predicted"] is None and bad["error"] is None and "no-such-gpu" in bad["failure"]
    assert report["failed"] == [bad["name"]]
    assert report["mape"] == report["cases"][0]["error"]


def test_ranking_checks_ratios_against_one_and_pairs_within_a_group() -> None:
    rows = [
        {"name": "r", "metric": "throughput_ratio", "measured": 0.8, "predicted": 1.2, "group": None},
        {"name": "a", "metric": "busbw_GBps", "measured": 10.0, "predicted": 5.0, "group": "g"},
        {"name": "b", "metric": "busbw_GBps", "measured": 20.0, "predicted": 6.0, "group": "g"},
        {"name": "c", "metric": "busbw_GBps", "measured": 20.1, "predicted": 1.0, "group": "g"},
    ]
    checked, wrong = runner.ranking(rows)
    # r against 1 (wrong); a-b (right), a-c (wrong: c predicted slower), b-c measured a tie: skipped
    assert checked == 3
    assert [w["pair"] for w in wrong] == [["r", "baseline"], ["a", "c"]]
    assert [w["kind"] for w in wrong] == [runner.RATIO_PAIR, runner.GROUP_PAIR]
    summary = runner.ranking_summary(rows)
    assert summary["by_kind"] == {runner.RATIO_PAIR: {"pairs_checked": 1, "misordered": 1},
                                  runner.GROUP_PAIR: {"pairs_checked": 2, "misordered": 1}}


def test_scaling_against_a_baseline_run_divides_the_throughput_ratio_by_the_gpu_ratio() -> None:
    """Weak scaling against a smaller run (a source's 1-node row): 4 nodes at 3.6x one node's samples/s are
    0.9 of linear; a baseline no smaller than the run is refused."""
    from simdist.validation.published.cases import Metric, PublishedCase, ScenarioRef

    ref, base = ScenarioRef(Path("big.yaml")), ScenarioRef(Path("small.yaml"))
    case = PublishedCase(name="w", category="scaling", metric=Metric.SCALING_EFFICIENCY, measured=0.9,
                         source={"repo": "r/r", "file": "f"}, quote="q" * 20, config="c" * 20, scenario=ref,
                         reserved_check="checked", baseline=base)
    results = {ref: {"gpus": 32, "throughput": {"samples_per_s": 360.0}},
               base: {"gpus": 8, "throughput": {"samples_per_s": 100.0}}}
    assert runner.predict(case, lambda r, extra: results[r]) == 0.9
    results[base] = dict(results[base], gpus=32)
    with pytest.raises(ValueError, match="fewer GPUs"):
        runner.predict(case, lambda r, extra: results[r])


def test_the_report_sets_scaling_efficiency_against_predicting_perfect_scaling() -> None:
    rows = [{"name": "a", "metric": "scaling_efficiency", "measured": 0.8, "predicted": 0.9, "error": 0.125},
            {"name": "b", "metric": "scaling_efficiency", "measured": 0.5, "predicted": 0.6, "error": 0.2},
            {"name": "c", "metric": "busbw_GBps", "measured": 10.0, "predicted": 5.0, "error": 0.5}]
    out = runner.perfect_scaling_summary(rows)
    assert out["cases"] == 2 and out["mape"] == (0.125 + 0.2) / 2
    assert out["perfect_scaling_mape"] == (0.25 + 1.0) / 2   # |1 - 0.8| / 0.8 and |1 - 0.5| / 0.5


def test_cli_validate_published_exits_1_when_a_case_fails_to_run(monkeypatch) -> None:
    """A case the simulator could not predict is a failed validation run: the report prints, then exit 1."""
    import simdist.validation.published.runner as published_runner

    report = {"cases": [], "failed": ["nccl-x"], "mape": None}
    monkeypatch.setattr(published_runner, "run_suite", lambda categories=None: report)
    result = CliRunner().invoke(main, ["validate", "--published", "--json"])
    assert result.exit_code == 1 and "nccl-x" in result.output


def test_cli_validate_needs_files_or_published() -> None:
    result = CliRunner().invoke(main, ["validate"])
    assert result.exit_code == 2 and "--published" in result.output


def test_a_case_outside_25_percent_without_a_reason_is_listed(tmp_path: Path) -> None:
    """With a stub simulator (every busbw 10 GB/s), cases far off and without a reason are named."""
    path = _small_file(tmp_path, 3)
    raw = yaml.safe_load(path.read_text())
    for c in raw["cases"]:
        c.pop("reason", None)
    raw["cases"][0]["reason"] = "a written reason"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))

    def stub(ref, extra):
        return {"collectives": [{"busbw_GBps": 10.0}], "scaling_efficiency": 0.5,
                "throughput": {"samples_per_s": 1.0}}

    report = runner.run_suite(path, run=stub)
    far = [r["name"] for r in report["cases"] if r["error"] > 0.25]
    assert report["unexplained"] == [n for n in far if n != raw["cases"][0]["name"]]
    assert report["cases"][0].get("reason") == "a written reason" or report["cases"][0]["error"] <= 0.25


def test_cli_validate_published_refuses_options_it_would_ignore() -> None:
    for extra in (["--calibration", "p.json"], ["--out", "d"], ["--rate-scale", "0.5"], ["x.yaml"]):
        result = CliRunner().invoke(main, ["validate", "--published", *extra])
        assert result.exit_code == 2, (extra, result.output)


def test_fit_tagged_cases_are_left_out_of_every_out_of_sample_figure(tmp_path: Path) -> None:
    """A case tagged with the fitting subset's name counts in `mape` but not in `out_of_sample_mape`, overall
    and per category / metric (where `fitted_cases` counts it)."""
    path = _small_file(tmp_path, 3)
    raw = yaml.safe_load(path.read_text())
    raw["cases"][0]["tags"] = ["fit"]
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    report = runner.run_suite(path)
    rows = report["cases"]
    held = [r["error"] for r in rows[1:]]
    assert report["fitting_subset"]["cases"] == [rows[0]["name"]]
    assert report["out_of_sample_mape"] == sum(held) / len(held)
    assert report["fitting_subset"]["in_sample_mape"] == rows[0]["error"]
    busbw = report["by_category"]["busbw"]
    assert busbw["fitted_cases"] == 1 and busbw["out_of_sample_mape"] == sum(held) / len(held)
    assert busbw["mape"] == sum(r["error"] for r in rows) / len(rows)


def test_a_suite_simulates_each_distinct_scenario_once():
    """run_suite's runner memo: the same file, overrides and extra settings are simulated once; any difference
    (another override, another extra setting) is simulated again."""
    from simdist.validation.published.cases import ScenarioRef
    from simdist.validation.published.runner import _once

    calls = []

    def fake(ref, extra=()):
        calls.append((ref, tuple(extra)))
        return {"n": len(calls)}

    once = _once(fake)
    a, b = ScenarioRef(Path("a.yaml"), ("x=1",)), ScenarioRef(Path("a.yaml"), ("x=2",))
    assert once(a) is once(a) and once(a, ["y=1"]) is once(a, ("y=1",))
    assert once(b)["n"] == 3 and len(calls) == 3


def test_categories_keep_only_their_cases_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    def stub(ref, extra=()):
        return {"collectives": [{"busbw_GBps": 10.0}], "scaling_efficiency": 0.9, "throughput": {}, "gpus": 8}

    path = write_cases_subset(tmp_path, lambda cases: [c for c in cases if c["category"] in ("busbw", "bucket")])
    whole = runner.run_suite(path, run=stub)
    report = runner.run_suite(path, run=stub, categories=["bucket"])
    assert report["categories"] == ["bucket"] and whole["categories"] is None
    assert {r["category"] for r in report["cases"]} == {"bucket"} and set(report["by_category"]) == {"bucket"}
    assert [r for r in whole["cases"] if r["category"] == "bucket"] == report["cases"]
    with pytest.raises(ValueError, match="no published case has category nope; the categories are bucket, busbw"):
        runner.run_suite(path, run=stub, categories=["nope"])


def test_cli_category_is_refused_without_published_or_when_unknown() -> None:
    result = CliRunner().invoke(main, ["validate", "--category", "busbw", "x.yaml"])
    assert result.exit_code == 2 and "--category selects cases of the published suite" in result.output
    result = CliRunner().invoke(main, ["validate", "--published", "--category", "nope"])
    assert result.exit_code == 2 and "no published case has category nope" in result.output
