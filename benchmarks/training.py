"""How long simdist takes to predict a data-parallel training run as the cluster grows.

Prints, for the default scenario (ResNet-50, DDP ring, DGX A100-like nodes on a fat tree) scaled to
more nodes, the predicted iteration time and throughput of `simulate` and `estimate`, their ratio,
and the wall-clock seconds each took. Run: .venv/bin/python benchmarks/training.py [--max-gpus N]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from simdist.engine.simulation import simulate
from simdist.io.load import load_scenario

DEFAULT = Path(__file__).resolve().parents[1] / "scenarios" / "default.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-gpus", type=int, default=4096)
    parser.add_argument("--strategy", default="ring")
    args = parser.parse_args()
    print(f"{'gpus':>6} {'iter_ms sim':>12} {'iter_ms est':>12} {'est/sim':>8} {'samples/s':>12} "
          f"{'scaling':>8} {'sim_wall_s':>10} {'est_wall_s':>10}")
    for nodes in (2, 16, 128, 512):
        gpus = nodes * 8
        if gpus > args.max_gpus:
            break
        scenario = load_scenario(DEFAULT, [f"cluster.nodes.0.count={nodes}", f"communication.strategy={args.strategy}",
                                           "cluster.fabric.nodes_per_leaf=16" if nodes >= 16 else "cluster.fabric.nodes_per_leaf=2"])
        t0 = time.perf_counter()
        sim = simulate(scenario, fidelity="simulate")
        sim_wall = time.perf_counter() - t0
        t0 = time.perf_counter()
        est = simulate(scenario, fidelity="estimate")
        est_wall = time.perf_counter() - t0
        print(f"{gpus:>6} {sim.iteration_time_s * 1e3:>12.3f} {est.iteration_time_s * 1e3:>12.3f} "
              f"{est.iteration_time_s / sim.iteration_time_s:>8.4f} {sim.throughput.samples_per_s:>12,.0f} "
              f"{sim.scaling_efficiency:>8.3f} {sim_wall:>10.2f} {est_wall:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
