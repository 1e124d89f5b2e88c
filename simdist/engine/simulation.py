"""`simulate(scenario)`: the single entry point from a resolved Scenario to a RunResult, and the
`Simulation` that owns one run's state (no global state anywhere)."""
from __future__ import annotations

import itertools

import numpy as np
import simpy

from simdist import __version__
from simdist.errors import ScenarioError
from simdist.results.records import RunResult
from simdist.scenario import Fidelity, Scenario, unused_key_issues


class Simulation:
    """One run's state: its simpy Environment, a numpy Generator seeded from `run.seed` (only stochastic
    elements draw from it, so a scenario without one gives the same result for every seed), its ids, and
    the built cluster (`context`: topology, network model, groups)."""

    def __init__(self, scenario: Scenario, fidelity: Fidelity, context=None) -> None:
        from simdist.engine.context import build_context

        self.scenario, self.fidelity = scenario, fidelity
        self.rng = np.random.default_rng(scenario.run.seed)
        self._ids = itertools.count()
        if context is not None and fidelity == Fidelity.ESTIMATE and reusable(context, scenario):
            from dataclasses import replace  # a built cluster: estimate runs no events on it

            self.env = context.env
            self.context = context if context.scenario is scenario else replace(context, scenario=scenario)
        else:
            self.env = simpy.Environment()
            self.context = build_context(scenario, fidelity, env=self.env)

    def next_id(self) -> int:
        """A fresh id, unique within this simulation."""
        return next(self._ids)


def reusable(context, scenario: Scenario) -> bool:
    """Whether a built FabricContext serves `scenario`: same cluster, the analytical model, and the same
    communication settings its memoised schedules were built for."""
    from simdist.network.analytical import AnalyticalNetwork

    old = context.scenario
    return (isinstance(context.network, AnalyticalNetwork) and old.cluster == scenario.cluster
            and old.communication == scenario.communication)


def stochastic_elements(scenario: Scenario) -> list[str]:
    """The scenario keys that make a run random (none run today: random failures are refused)."""
    f = scenario.failures
    out = []
    if f is not None and f.random is not None and any(
            x is not None for x in (f.random.gpu_mtbf_s, f.random.node_mtbf_s, f.random.link_mtbf_s)):
        out.append("failures.random")
    return out


def check_replicas(scenario: Scenario) -> None:
    """`run.replicas > 1` repeats a run over random draws: refused when nothing in the scenario is random."""
    n = scenario.run.replicas
    if n > 1 and not stochastic_elements(scenario):
        raise ScenarioError.bad_value("run.replicas", n, "1: replicas need a stochastic element (e.g. "
                                      "failures.random), and this scenario has none, so every replica is the same")


def simulate(scenario: Scenario, fidelity: str = "") -> RunResult:
    """Run `scenario` at `fidelity` ('simulate' = discrete events, 'estimate' = closed forms).

    An empty fidelity takes the scenario's `run.fidelity`.
    """
    chosen = Fidelity(fidelity) if fidelity else scenario.run.fidelity
    unused = unused_key_issues(scenario)  # keys nothing reads, or features that do not run yet: refused
    if unused:
        from simdist.errors import ScenarioError

        raise ScenarioError(unused)
    if scenario.failures is not None:  # only static stragglers run today; the rest is refused by path
        from simdist.strategies.stragglers import check_failures

        check_failures(scenario)
    check_replicas(scenario)
    from simdist.engine.relevance import check_relevant

    check_relevant(scenario)
    if scenario.workload.benchmark is not None:
        from simdist.engine.benchmark import run_benchmark

        return run_benchmark(scenario, chosen)
    from simdist.engine.training import run_training

    return run_training(scenario, chosen)


def result_header(scenario: Scenario, fidelity: Fidelity) -> dict:
    """The fields every RunResult starts with."""
    return {"scenario": scenario.name, "simdist_version": __version__, "fidelity": fidelity.value,
            "gpus": scenario.cluster.num_gpus}
