"""Static stragglers: `failures.events` of kind straggler at "0 s" slow one GPU's compute for the whole run.

This is the only part of the failures section the data-parallel loop runs today; every other event
kind, a straggler that starts later, and random failures are refused with an error naming the
event's YAML path (dynamic failures belong to simdist/failures/, a later issue).
"""
from __future__ import annotations

from simdist.errors import Issue, ScenarioError
from simdist.scenario import Scenario

STRAGGLER = "straggler"


def check_failures(scenario: Scenario) -> None:
    """Raise ScenarioError (every problem at once) for failure features the simulator cannot run yet."""
    f = scenario.failures
    if f is None:
        return
    issues: list[Issue] = []
    if f.random is not None and any(x is not None for x in (f.random.gpu_mtbf_s, f.random.node_mtbf_s,
                                                             f.random.link_mtbf_s)):
        issues.append(Issue("failures.random", "random failures are not implemented yet; remove 'failures.random'"))
    for i, e in enumerate(f.events):
        path = f"failures.events.{i}"
        if e.kind != STRAGGLER:
            issues.append(Issue(f"{path}.kind", f"got {e.kind!r}; only 'straggler' events at '0 s' are "
                                                "implemented yet (other failures are a later issue)"))
        elif e.at_s != 0:
            issues.append(Issue(f"{path}.at", f"got {e.at_s} s; expected '0 s' (a straggler that starts "
                                              "during the run is not implemented yet)"))
        elif e.factor is not None:
            issues.append(Issue(f"{path}.factor", f"got {e.factor}; a straggler takes 'slowdown' (a compute-time "
                                                  "multiplier); 'factor' is for link_degrade"))
        elif e.duration_s is not None:
            issues.append(Issue(f"{path}.duration", f"got {e.duration_s} s; a static straggler lasts the "
                                                    "whole run (omit duration)"))
    if issues:
        raise ScenarioError(issues)


def gpu_slowdowns(scenario: Scenario) -> tuple[float, ...]:
    """Compute-time multiplier of every GPU (global order): 1.0, or the product of its stragglers."""
    check_failures(scenario)
    n = scenario.cluster.num_gpus
    out = [1.0] * n
    if scenario.failures is None:
        return tuple(out)
    for i, e in enumerate(scenario.failures.events):
        path = f"failures.events.{i}"
        prefix, _, rest = e.target.partition(":")
        if prefix != "gpu" or not rest.isdigit() or int(rest) >= n:
            raise ScenarioError.bad_value(f"{path}.target", e.target, f"gpu:K with K in 0..{n - 1}")
        if e.slowdown is None or not e.slowdown >= 1:
            raise ScenarioError.bad_value(f"{path}.slowdown", e.slowdown, "a compute-time multiplier >= 1")
        out[int(rest)] *= e.slowdown
    return tuple(out)
