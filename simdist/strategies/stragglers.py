"""Static stragglers: `failures.events` of kind straggler at "0 s" without a duration slow one GPU's (or one
node's) compute for the whole run, inside the ordinary training simulation.

Everything else in the failures section (other event kinds, stragglers that start or end during the
run, random failures, maintenance) and any run with `run.duration` goes through the goodput timeline
(engine/composite.py, simdist/failures/), which calls the training simulation once per cluster state with
that state's static stragglers.
"""
from __future__ import annotations

from simdist.scenario import FailureKind, Scenario


def is_static(scenario: Scenario) -> bool:
    """Only stragglers from '0 s' for good (or no failures at all)."""
    f = scenario.failures
    if f is None:
        return True
    return (f.random is None and f.maintenance is None
            and all(e.kind == FailureKind.STRAGGLER and e.at_s == 0 and e.duration_s is None for e in f.events))


def needs_timeline(scenario: Scenario) -> bool:
    """True when the run is a failure run over run.duration (goodput), not a steady-state one."""
    return scenario.failures is not None and (not is_static(scenario) or scenario.run.duration_s is not None)


def gpu_slowdowns(scenario: Scenario) -> tuple[float, ...]:
    """Compute-time multiplier of every GPU (global order): 1.0, or the product of its stragglers."""
    assert is_static(scenario), "io.rules: failures beyond static stragglers run on the goodput timeline"
    n = scenario.cluster.num_gpus
    out = [1.0] * n
    if scenario.failures is None:
        return tuple(out)
    first, gpus = [], 0
    for g in scenario.cluster.node_groups:
        for _ in range(g.count):
            first.append((gpus, g.gpus_per_node))
            gpus += g.gpus_per_node
    for i, e in enumerate(scenario.failures.events):
        path = f"failures.events.{i}"
        prefix, _, rest = e.target.partition(":")
        if prefix == "node" and rest.isdigit() and int(rest) < len(first):
            start, k = first[int(rest)]
            targets = range(start, start + k)
        elif prefix == "gpu" and rest.isdigit() and int(rest) < n:
            targets = range(int(rest), int(rest) + 1)
        else:
            raise AssertionError(f"io.resolve_failures checks {path}.target against the cluster: {e.target}")
        assert e.slowdown is not None and e.slowdown >= 1, f"io.resolve_failures checks {path}.slowdown"
        for g in targets:
            out[g] *= e.slowdown
    return tuple(out)
