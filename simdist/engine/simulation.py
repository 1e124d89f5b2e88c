"""`simulate(scenario)`: the single entry point from a resolved Scenario to a RunResult (one run's state is
engine/state.py's `Simulation`; the one process-wide effect, the collector's frozen objects, ends with the run)."""
from __future__ import annotations

from simdist.engine.benchmark import run_benchmark
from simdist.engine.composite import run_goodput, run_training
from simdist.engine.state import with_cost
from simdist.results.records import RunResult
from simdist.scenario import Fidelity, Scenario
from simdist.strategies.stragglers import needs_timeline
from simdist.topology.gcpause import run_heap


def simulate(scenario: Scenario, fidelity: str = "", baseline: bool = True) -> RunResult:
    """Run `scenario` at `fidelity` ('simulate' = discrete events, 'estimate' = closed forms).

    An empty fidelity takes the scenario's `run.fidelity`. `baseline=False` skips the uncompressed BSP baseline
    behind `statistical_efficiency.relative_time_to_target` (left null), which sweep rows do not carry: a
    compressed point then costs ~15 % less to estimate. The scenario has passed io.rules (every load does)."""
    chosen = Fidelity(fidelity) if fidelity else scenario.run.fidelity
    with run_heap():  # what the run builds to last, out of the cyclic collector's sight (topology/gcpause.py)
        if needs_timeline(scenario):  # failures over run.duration: the goodput timeline (engine/composite.py)
            return with_cost(scenario, run_goodput(scenario, chosen))
        if scenario.workload.benchmark is not None:
            return with_cost(scenario, run_benchmark(scenario, chosen))
        return with_cost(scenario, run_training(scenario, chosen, with_baseline=baseline))
