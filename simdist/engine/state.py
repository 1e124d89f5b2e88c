"""One run's state and the fields every result shares: `Simulation` (environment, random stream, built
cluster), `result_header` and `with_cost`. Below every runner, so that none imports upward."""
from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import simpy

from simdist import __version__
from simdist.engine.context import FabricContext, context_key
from simdist.engine.context_cache import estimate_context, run_context
import simdist.results.cost as pricing  # lazy (simdist.LAZY_MODULES): read only once a run has a result
import simdist.results.records as records
from simdist.network.analytical import AnalyticalNetwork
from simdist.scenario import Fidelity, Scenario


class Simulation:
    """One run's state: its simpy Environment, a numpy Generator seeded from `run.seed` (only stochastic
    elements draw from it, so a scenario without one gives the same result for every seed), and the built
    cluster (`context`: topology, network model, groups)."""

    def __init__(self, scenario: Scenario, fidelity: Fidelity, context: FabricContext | None = None) -> None:
        self.scenario, self.fidelity = scenario, fidelity
        if context is None and fidelity == Fidelity.ESTIMATE:  # this process's built clusters (context_cache.py)
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
            self.context = run_context(scenario, fidelity, env=self.env)

    @functools.cached_property
    def rng(self) -> "np.random.Generator":
        """The run's Generator, made on first use (the same stream as one made at start: it depends only
        on run.seed); numpy.random is not imported by runs that draw nothing (~0.02 s of start-up)."""
        return np.random.default_rng(self.scenario.run.seed)


def reusable(context: FabricContext, scenario: Scenario, fidelity: Fidelity = Fidelity.ESTIMATE) -> bool:
    """Whether a built FabricContext serves `scenario`: the same `context_key` (cluster, layout and the
    communication keys its memoised schedules depend on: engine/context.py SCHEDULE_KEYS), and either
    the analytical model (estimate keeps no state between runs) or, for simulate, a flow network whose
    clock has not started (e.g. with link capacities set first)."""
    if context.scenario is not scenario and context_key(context.scenario) != context_key(scenario):
        return False
    if fidelity == Fidelity.ESTIMATE:
        return isinstance(context.network, AnalyticalNetwork)
    return not isinstance(context.network, AnalyticalNetwork) and context.env.now == 0


def result_header(scenario: Scenario, fidelity: Fidelity) -> dict:
    """The fields every RunResult starts with."""
    return {"scenario": scenario.name, "simdist_version": __version__, "fidelity": fidelity.value,
            "gpus": scenario.cluster.num_gpus}


def with_cost(scenario: Scenario, result: records.RunResult) -> records.RunResult:
    """The result with its `cost` key (simdist.results.cost), the one place every result is priced: per hour, and
    for training per sample / token (per useful one under failures, from the goodput ratio)."""
    if scenario.workload.benchmark is not None:
        cost = records.Cost(pricing.cluster_price_per_hour(scenario))
    else:
        tp = result.throughput
        ratio = result.goodput.ratio if result.goodput else None
        cost = pricing.cost_summary(scenario, tp.samples_per_s if tp else None, tp.tokens_per_s if tp else None, ratio)
    return replace(result, cost=cost)
