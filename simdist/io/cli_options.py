"""The command-line options a verb refuses before it runs anything (each named as typed, exit 2)."""
from __future__ import annotations

from simdist.errors import ScenarioError


def check_executor_options(jobs: int, executor: str, address: str | None) -> None:
    """sweep / plan: --jobs is a process count (0: one per core); --address joins a Ray cluster."""
    if jobs < 0:
        raise ScenarioError.bad_value("--jobs", jobs, "a number of processes >= 1 (0: one per core)")
    if address and executor != "ray":
        raise ScenarioError.bad_value("--address", address, "--executor ray as well (it joins a Ray cluster)")


def check_side_by_side_plot(plot: str | None) -> None:
    """compare with several files prints a table: --plot draws only the one-file break-even plot."""
    if plot:
        raise ScenarioError.bad_value("--plot", plot, "one FILE (the break-even plot); it has no side-by-side form")
