"""simdist.validate_published: the published suite through the API equals `validate --published --json`,
its tables, and the published chart (one panel per metric, units, legend)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import simdist
from simdist import plots
from tests.validation.cases_subset import write_cases_subset
from simdist.validation.published import runner


def _small_file(tmp_path: Path) -> Path:
    """Four cases of the shipped file, one per metric at least, scenario paths made absolute."""
    def choose(cases: list[dict]) -> list[dict]:
        chosen, seen = [], set()
        for c in cases:
            if c["metric"] not in seen or len(chosen) < 4:
                chosen.append(c)
                seen.add(c["metric"])
            if len(seen) == 3 and len(chosen) >= 4:
                break
        return chosen

    return write_cases_subset(tmp_path, choose)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = _small_file(tmp_path_factory.mktemp("published"))
    return path, simdist.validate_published(path)


def test_the_api_report_is_the_runner_report(small):
    path, report = small
    direct = runner.run_suite(path)
    mine = report.to_dict()
    for d in (direct, mine):
        d.pop("wall_s")
    assert mine == json.loads(json.dumps(direct))
    assert report.mape == direct["mape"] and report.out_of_sample_mape == direct["out_of_sample_mape"]
    assert report.ranking_ok == direct["ranking_ok"] and len(report.cases) == len(direct["cases"])
    with pytest.raises(AttributeError, match="no key 'nonexistent'"):
        report.nonexistent


def test_the_frames(small):
    pytest.importorskip("pandas")
    _, report = small
    cases = report.to_frame()
    assert list(cases["name"]) == [c["name"] for c in report.cases]
    for _, row in cases.iterrows():
        assert row["ratio"] == pytest.approx(row["measured"] / row["predicted"])
        assert row["error"] == pytest.approx(abs(row["predicted"] - row["measured"]) / row["measured"])
    by_metric = report.to_frame("metric")
    assert by_metric["cases"].sum() == len(report.cases) and len(by_metric) == 3
    with pytest.raises(ValueError, match="expected one of cases, category, metric"):
        report.to_frame("nope")


def test_the_cli_prints_the_same_cases(small, monkeypatch):
    """The shipped suite through `validate --published --json` and through the API give the same rows."""
    from simdist.cli import main

    path, _ = small
    original = runner.run_suite
    api = simdist.validate_published(path).to_dict()
    monkeypatch.setattr(runner, "run_suite", lambda categories=None: original(path, categories=categories))
    out = CliRunner().invoke(main, ["validate", "--published", "--json"])
    assert out.exit_code == 0, out.output
    cli = json.loads(out.output)
    assert [c["predicted"] for c in cli["cases"]] == [c["predicted"] for c in api["cases"]]


def test_published_chart_has_a_panel_per_metric_with_units(small, tmp_path):
    from matplotlib.collections import PathCollection

    _, report = small
    fig = plots.published_chart(report, path=str(tmp_path / "published.png"))
    panels = [ax for ax in fig.axes if ax.has_data()]
    assert len(panels) == 3
    labels = {ax.get_xlabel() for ax in panels}
    assert {"measured bus bandwidth (GB/s)", "measured scaling efficiency (fraction of linear)",
            "measured throughput ratio (x the baseline)"} == labels
    for ax in panels:
        assert ax.get_ylabel().startswith("predicted") and ax.get_legend() is not None and ax.get_title()
        assert sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection)) >= 1
    assert "MAPE" in fig._suptitle.get_text()
    assert (tmp_path / "published.png").stat().st_size > 10_000
