"""Failure-run speed: the goodput report of the shipped failure scenarios, end to end and timeline only.

Prints, for scenarios/failures/gpt-1024gpu-14d.yaml (10 replicas; target < 60 s) and
gpt-16384gpu-54d.yaml (10 replicas; target < 5 min): the wall time of `simulate()` (healthy run,
one simulation per distinct cluster state, the replicas' timelines) and of the timelines alone
(the engine's step times served from the cache), with the number of failures per replica.
Run: .venv/bin/python benchmarks/failures.py [--fidelity simulate|estimate]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from simdist.engine.simulation import simulate
from simdist.io.load import load_scenario

ROOT = Path(__file__).resolve().parents[1]
FILES = ("gpt-1024gpu-14d.yaml", "gpt-16384gpu-54d.yaml")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fidelity", choices=["simulate", "estimate"], default=None)
    args = ap.parse_args()
    for name in FILES:
        overrides = [f"run.fidelity={args.fidelity}"] if args.fidelity else []
        scenario = load_scenario(ROOT / "scenarios" / "failures" / name, overrides)
        t0 = time.perf_counter()
        g = simulate(scenario).goodput
        total = time.perf_counter() - t0
        timeline_s = _timeline_only(scenario)
        print(f"{name}: {scenario.cluster.num_gpus} GPUs, {scenario.run.duration_s / 86400:g} days, "
              f"{g.replicas} replicas, {g.failures:.0f} failures per replica, goodput {g.ratio:.2%}: "
              f"simulate() {total:.1f} s, timelines alone {timeline_s:.2f} s ({g.states_simulated} states simulated)")


def _timeline_only(scenario) -> float:
    """The replicas' timelines with a constant step time: what skipping steady-state iterations costs."""
    from simdist.failures.costs import job_spec, recovery_costs
    from simdist.failures.targets import failure_targets
    from simdist.failures.montecarlo import run_replicas
    from simdist.engine.context_cache import shared_topology

    facts = failure_targets(shared_topology(scenario.cluster))
    n = scenario.cluster.num_gpus
    bpg = scenario.workload.batch_per_gpu or 1
    job = job_spec(scenario, scenario.run.duration_s, bpg * n, bpg, 1, facts)
    t0 = time.perf_counter()
    run_replicas(job, scenario.failures, facts, recovery_costs(scenario), lambda state: 1.0, scenario.run.seed,
                 scenario.run.replicas)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
