"""A cases file holding some of the shipped published cases, for tests that run the suite on a few of them."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import yaml

from simdist.validation.published.cases import CASES_FILE


def write_cases_subset(tmp_path: Path, choose: Callable[[list[dict]], list[dict]]) -> Path:
    """`tmp_path/cases.yaml`: the shipped file with only the cases `choose` picks from its list, their scenario
    (and baseline) paths made absolute so that they resolve from the new folder."""
    raw = yaml.safe_load(CASES_FILE.read_text())
    raw["cases"] = choose(raw["cases"])
    for c in raw["cases"]:
        for key in ("scenario", "baseline"):
            if key in c:
                c[key]["file"] = str((CASES_FILE.parent / c[key]["file"]).resolve())
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path
