"""The published suite's regression floor (floor.yaml): each category's recorded MAPE, and the check that no
category got worse than its record by more than a tolerance (one percentage point)."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import yaml

FLOOR_FILE = Path(__file__).with_name("floor.yaml")
TOLERANCE_PCT = 1.0  # percentage points a category may worsen before the floor test fails


def load_floor(path: Path = FLOOR_FILE) -> dict[str, float]:
    """category -> recorded MAPE in percent."""
    data = yaml.safe_load(path.read_text())
    return {str(k): float(v) for k, v in data["mape_pct"].items()}


def floor_violations(by_category: Mapping[str, Mapping], floor: Mapping[str, float],
                     tolerance_pct: float = TOLERANCE_PCT) -> list[str]:
    """One line per problem: a category worse than its record by more than `tolerance_pct`, a category with no
    record, a record with no category, a category with no MAPE (every case failed). `by_category` is the
    suite report's (`run_suite()["by_category"]`, MAPE as a fraction)."""
    problems = []
    for category, stats in sorted(by_category.items()):
        mape = stats.get("mape")
        if category not in floor:
            problems.append(f"{category}: no record in floor.yaml (MAPE now "
                            f"{'-' if mape is None else f'{100 * mape:.2f} %'}); add it in a commit that says why")
        elif mape is None:
            problems.append(f"{category}: no MAPE (every case failed); recorded {floor[category]:.2f} %")
        elif 100 * mape > floor[category] + tolerance_pct:
            problems.append(f"{category}: MAPE {100 * mape:.2f} % against {floor[category]:.2f} % recorded "
                            f"(worse by more than {tolerance_pct:g} point)")
    problems += [f"{category}: recorded in floor.yaml, not in the suite" for category in sorted(set(floor) - set(by_category))]
    return problems
