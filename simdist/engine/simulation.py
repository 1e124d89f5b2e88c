"""`simulate(scenario)`: the single entry point from a resolved Scenario to a RunResult."""
from __future__ import annotations

from simdist import __version__
from simdist.results.records import RunResult
from simdist.scenario import Fidelity, Scenario


def simulate(scenario: Scenario, fidelity: str = "") -> RunResult:
    """Run `scenario` at `fidelity` ('simulate' = discrete events, 'estimate' = closed forms).

    An empty fidelity takes the scenario's `run.fidelity`.
    """
    chosen = Fidelity(fidelity) if fidelity else scenario.run.fidelity
    from simdist.strategies.stragglers import needs_timeline

    if needs_timeline(scenario):  # failures over run.duration: the goodput timeline (engine/goodput.py)
        from simdist.engine.goodput import run_goodput

        return run_goodput(scenario, chosen)
    if scenario.workload.benchmark is not None:
        from simdist.engine.benchmark import run_benchmark

        return run_benchmark(scenario, chosen)
    from simdist.engine.training import run_training

    return run_training(scenario, chosen)


def result_header(scenario: Scenario, fidelity: Fidelity) -> dict:
    """The fields every RunResult starts with."""
    return {"scenario": scenario.name, "simdist_version": __version__, "fidelity": fidelity.value,
            "gpus": scenario.cluster.num_gpus}
