"""Golden results of every shipped scenario: `make goldens` rewrites them, the tests compare against them.

Regenerate only when a change in the numbers is intended, and say why in the commit message.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GOLDEN_DIR = Path(__file__).resolve().parent / "results"
# scenarios/validation/ describes emulated testbeds; they are checked by the validation tests instead
SCENARIO_GLOBS = ("scenarios/*.yaml", "scenarios/examples/*.yaml", "scenarios/presets/*.yaml")


def shipped_scenarios() -> list[Path]:
    return sorted(p for g in SCENARIO_GLOBS for p in REPO.glob(g))


def golden_path(scenario: Path) -> Path:
    rel = scenario.relative_to(REPO / "scenarios").with_suffix(".json")
    return GOLDEN_DIR / str(rel).replace("/", "__")


def compute(scenario: Path) -> dict:
    from simdist.engine.simulation import simulate
    from simdist.io.load import load_scenario

    result = simulate(load_scenario(scenario))
    data = result.to_dict()
    data.pop("simdist_version", None)  # a release bump is not a change in the numbers
    return data


def main(argv: list[str]) -> int:
    if "--regenerate" not in argv:
        print("usage: python -m tests.golden.regenerate --regenerate [scenarios/…/NAME.yaml ...]")
        return 2
    from simdist.results.writers import atomic_write_text

    only = [(REPO / a).resolve() for a in argv if a != "--regenerate"]
    unknown = [p for p in only if p not in shipped_scenarios()]
    if unknown:
        print(f"not a shipped scenario: {', '.join(str(p) for p in unknown)}")
        return 2
    for scenario in only or shipped_scenarios():
        path = golden_path(scenario)
        atomic_write_text(path, json.dumps(compute(scenario), indent=2, sort_keys=True) + "\n")
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
