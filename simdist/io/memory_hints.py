"""What an out-of-memory refusal tells a user: the usual fixes, each tried alone on the scenario's own memory
check (planner/memory_fixes.py through io/feasibility.py; nothing simulated), one line each."""
from __future__ import annotations

from typing import Sequence

from simdist.io.feasibility import memory_infeasibility
from simdist.io.load import load_scenario
from simdist.planner.candidates import MEMORY_TEXT
from simdist.planner.memory_fixes import memory_fixes
from simdist.scenario import Scenario


def memory_hints(err: Exception, file: str, overrides: Sequence[str] = (), scenario: Scenario | None = None
                 ) -> list[str]:
    """The lines shown under an out-of-memory refusal of `file` (with its --set `overrides`; `scenario`: the
    file already loaded); [] for any other error."""
    if not str(err).startswith(MEMORY_TEXT):
        return []

    def changed(changes: dict) -> Scenario:
        return load_scenario(file, [*overrides, *(f"{k}={v}" for k, v in changes.items())])

    scenario = scenario if scenario is not None else changed({})

    fixes = memory_fixes(scenario, changed, memory_infeasibility)
    return (["the usual fixes, each tried alone on this scenario's memory (nothing simulated; --set KEY=VALUE):"]
            + [f"  {f.text(scenario)}" for f in fixes])
