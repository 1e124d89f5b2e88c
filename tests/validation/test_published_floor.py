"""The published suite's regression floor: no category's MAPE worse than validation/published/floor.yaml's
record by more than one point, no category without a record (validation/published/floor.py)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from simdist.cli import main
from simdist.validation.published.floor import TOLERANCE_PCT, floor_violations, load_floor


def _cat(mape: float | None) -> dict:
    return {"cases": 3, "mape": mape}


def test_the_check_fails_on_a_worse_category_a_new_one_and_a_stale_record():
    floor = {"busbw": 8.0, "fsdp": 12.0, "gone": 5.0}
    problems = floor_violations({"busbw": _cat(0.0905), "fsdp": _cat(0.1250), "new": _cat(0.10)}, floor)
    assert [p.split(":")[0] for p in problems] == ["busbw", "new", "gone"]
    assert not floor_violations({"busbw": _cat(0.0899), "fsdp": _cat(0.05)}, {"busbw": 8.0, "fsdp": 12.0})
    assert floor_violations({"busbw": _cat(None)}, {"busbw": 8.0})  # every case failed
    assert TOLERANCE_PCT == 1.0


def test_the_record_is_well_formed():
    floor = load_floor()
    assert floor and all(0 <= v < 100 for v in floor.values())


@pytest.mark.slow
def test_validate_published_exits_0_and_no_category_is_worse_than_its_record():
    """The whole shipped suite, once, through the CLI (`simdist validate --published --json`, a few CPU-minutes):
    every case runs, the report has the validate object's keys, and no category is worse than its record."""
    result = CliRunner().invoke(main, ["validate", "--published", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert {"cases", "mape", "max_error", "ranking_ok", "out_of_sample_mape", "fitting_subset"} <= set(report)
    assert len(report["cases"]) >= 40 and report["failed"] == []
    problems = floor_violations(report["by_category"], load_floor())
    assert not problems, "\n".join(problems)
