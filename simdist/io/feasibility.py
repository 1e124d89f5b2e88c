"""What `simdist check` knows of a valid scenario's infeasibility without simulating: whether it fits in GPU memory.

The function the run calls before it simulates (strategies/rank_memory.check_memory: node groups or pipeline
stages), on the scenario each run path checks: the healthy cluster of a failure run, every phase of a phased
run (sync hybrid, batch_split dynamic). So `check`'s memory line is the one `run` ends with (exit 3).
"""
from __future__ import annotations

from simdist.engine.composite import healthy_scenario
from simdist.errors import InfeasibleError, Issue
from simdist.io.load import checked_file
from simdist.scenario import Scenario
from simdist.strategies.phases import is_phased, phases
from simdist.strategies.rank_memory import check_memory
from simdist.strategies.stragglers import needs_timeline


def memory_infeasibility(scenario: Scenario) -> InfeasibleError | None:
    """The InfeasibleError the run of `scenario` (which io.rules passed) raises for GPU memory, or None when
    every rank class fits. A benchmark keeps no model in memory."""
    if scenario.workload.model is None:
        return None
    if needs_timeline(scenario):  # the goodput timeline starts with the healthy run
        scenario = healthy_scenario(scenario)
    steady = [s for _, _, s in phases(scenario)] if is_phased(scenario) else [scenario]
    try:
        for s in steady:
            check_memory(s)
    except InfeasibleError as err:
        return err
    return None


def check_report(path: str, overrides: list[str]) -> tuple[list[Issue], InfeasibleError | None]:
    """What `simdist check` says of a file: every issue `run` refuses it for, else its memory infeasibility."""
    scenario, issues = checked_file(path, overrides)
    return issues, None if issues else memory_infeasibility(scenario)
