"""The suite's anchored figure: cases whose source quotes its own single-GPU throughput are also predicted with
workload.single_gpu_throughput set to it, reported beside (never instead of) the plain prediction."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simdist.errors import ScenarioError
from tests.validation.cases_subset import write_cases_subset
from simdist.validation.published import runner
from simdist.validation.published.cases import Metric, load_cases


def _file(tmp_path: Path, names: list[str]) -> Path:
    return write_cases_subset(tmp_path, lambda cases: [c for c in cases if c["name"] in names])


def test_anchors_are_quoted_single_gpu_figures_of_scaling_cases():
    anchored = [c for c in load_cases().cases if c.anchor is not None]
    assert len(anchored) >= 20
    for c in anchored:
        assert c.metric is Metric.SCALING_EFFICIENCY and c.anchor_quote
        digits = f"{c.anchor:g}".replace(".", "")
        assert digits[:3] in c.anchor_quote.replace(",", "").replace(".", ""), c.name


def test_the_anchored_prediction_is_a_second_figure_and_the_plain_one_stands(tmp_path: Path):
    seen = []

    def stub(ref, extra):
        seen.append(tuple(extra))
        anchored = any(e.startswith("workload.single_gpu_throughput=") for e in extra)
        return {"scaling_efficiency": 0.9 if anchored else 0.5, "throughput": {"samples_per_s": 1.0}}

    path = _file(tmp_path, ["horovod-rn50-p3-16gpu", "ddp-rn50-dgx1-16g-fp32-8gpu"])
    report = runner.run_suite(path, run=stub)
    assert [r["predicted"] for r in report["cases"]] == [0.5, 0.5]
    assert [r["anchored_predicted"] for r in report["cases"]] == [0.9, 0.9]
    assert ("workload.single_gpu_throughput=872.0",) in seen
    an = report["anchored"]
    assert an["cases"] == [r["name"] for r in report["cases"]]
    assert an["unanchored_mape"] == pytest.approx(report["mape"])
    assert an["mape"] == pytest.approx(sum(abs(0.9 - r["measured"]) / r["measured"] for r in report["cases"]) / 2)


def test_a_malformed_anchor_is_refused(tmp_path: Path):
    path = _file(tmp_path, ["horovod-rn50-p3-16gpu"])
    raw = yaml.safe_load(path.read_text())
    raw["cases"][0]["anchor"] = {"single_gpu_throughput": 872}
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(ScenarioError, match="anchor"):
        load_cases(path)
