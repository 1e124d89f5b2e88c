"""`simulate(scenario)`: the single entry point from a resolved Scenario to a RunResult, and the
`Simulation` that owns one run's state (no global state anywhere)."""
from __future__ import annotations

import functools
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
        from dataclasses import replace

        from simdist.engine.context import build_context

        self.scenario, self.fidelity = scenario, fidelity
        self._ids = itertools.count()
        if context is None and fidelity == Fidelity.ESTIMATE:  # this process's built clusters (context_cache.py)
            from simdist.engine.context_cache import estimate_context

            context = estimate_context(scenario)
        if context is not None and reusable(context, scenario, fidelity):
            if fidelity == Fidelity.SIMULATE or (context.env.now == 0 and context.scenario is scenario):
                self.env = context.env  # an unstarted flow network lives on its own clock
            else:  # estimate on a reused cluster: a fresh clock for what events it runs (asynchronous modes)
                self.env = simpy.Environment()
            same = context.scenario is scenario and context.env is self.env
            self.context = context if same else replace(context, scenario=scenario, env=self.env)
        else:
            self.env = simpy.Environment()
            self.context = build_context(scenario, fidelity, env=self.env)

    @functools.cached_property
    def rng(self) -> "np.random.Generator":
        """The run's Generator, made on first use (the same stream as one made at start: it depends only
        on run.seed); numpy.random is not imported by runs that draw nothing (~0.02 s of start-up)."""
        return np.random.default_rng(self.scenario.run.seed)

    def next_id(self) -> int:
        """A fresh id, unique within this simulation."""
        return next(self._ids)


def reusable(context, scenario: Scenario, fidelity: Fidelity = Fidelity.ESTIMATE) -> bool:
    """Whether a built FabricContext serves `scenario`: the same `context_key` (cluster, layout and the
    communication keys its memoised schedules depend on: engine/context.py SCHEDULE_KEYS), and either
    the analytical model (estimate keeps no state between runs) or, for simulate, a flow network whose
    clock has not started (e.g. with link capacities set first)."""
    from simdist.engine.context import context_key
    from simdist.network.analytical import AnalyticalNetwork

    if context.scenario is not scenario and context_key(context.scenario) != context_key(scenario):
        return False
    if fidelity == Fidelity.ESTIMATE:
        return isinstance(context.network, AnalyticalNetwork)
    return not isinstance(context.network, AnalyticalNetwork) and context.env.now == 0


def stochastic_elements(scenario: Scenario) -> list[str]:
    """The scenario keys that make a run random: MTBF-sampled failures and network jitter."""
    f = scenario.failures
    out = []
    if f is not None and f.random is not None:
        out.append("failures.random")
    if f is not None:
        out += [f"failures.events.{i}" for i, e in enumerate(f.events) if e.kind == "network_jitter"]
    return out


def check_replicas(scenario: Scenario) -> None:
    """`run.replicas > 1` repeats a run over random draws: refused when nothing in the scenario is random."""
    n = scenario.run.replicas
    if n > 1 and not stochastic_elements(scenario):
        raise ScenarioError.bad_value("run.replicas", n, "1: replicas need a stochastic element (e.g. "
                                      "failures.random), and this scenario has none, so every replica is the same")


def simulate(scenario: Scenario, fidelity: str = "", baseline: bool = True) -> RunResult:
    """Run `scenario` at `fidelity` ('simulate' = discrete events, 'estimate' = closed forms).

    An empty fidelity takes the scenario's `run.fidelity`. `baseline=False` skips the uncompressed BSP
    baseline behind `statistical_efficiency.relative_time_to_target` (left null), which sweep rows do not
    carry: a compressed point then costs ~15 % less to estimate.
    """
    chosen = Fidelity(fidelity) if fidelity else scenario.run.fidelity
    check_replicas(scenario)
    from simdist.strategies.stragglers import needs_timeline

    if needs_timeline(scenario):  # failures over run.duration: the goodput timeline (engine/goodput.py), which
        from simdist.engine.goodput import run_goodput  # simulates each cluster state through this function

        return with_cost(scenario, run_goodput(scenario, chosen))
    unused = unused_key_issues(scenario)  # keys nothing reads: refused
    if unused:
        raise ScenarioError(unused)
    if scenario.failures is not None:  # static stragglers run inside the training simulation
        from simdist.strategies.stragglers import check_failures

        check_failures(scenario)
    from simdist.engine.relevance import check_relevant

    check_relevant(scenario)
    if scenario.workload.benchmark is not None:
        from simdist.engine.benchmark import run_benchmark

        return with_cost(scenario, run_benchmark(scenario, chosen))
    from simdist.engine.training import run_training

    return with_cost(scenario, run_training(scenario, chosen, with_baseline=baseline))


def with_cost(scenario: Scenario, result: RunResult) -> RunResult:
    """The result with its `cost` key (simdist.results.cost): the one place every result is priced.

    A training result gets its price per hour and per sample/token (per useful sample/token under
    failures, from the goodput ratio); a benchmark result, which trains nothing, its price per hour only.
    """
    from dataclasses import replace

    from simdist.results.cost import cluster_price_per_hour, cost_summary

    if scenario.workload.benchmark is not None:
        cost = {"price_per_hour_usd": cluster_price_per_hour(scenario)}
    else:
        tp = result.throughput
        ratio = result.goodput.get("ratio") if isinstance(result.goodput, dict) else None
        cost = cost_summary(scenario, tp.samples_per_s if tp else None, tp.tokens_per_s if tp else None, ratio)
    return replace(result, extra={**result.extra, "cost": cost})


def result_header(scenario: Scenario, fidelity: Fidelity) -> dict:
    """The fields every RunResult starts with."""
    return {"scenario": scenario.name, "simdist_version": __version__, "fidelity": fidelity.value,
            "gpus": scenario.cluster.num_gpus}
