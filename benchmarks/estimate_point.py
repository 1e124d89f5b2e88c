"""Wall time of `estimate` for one point once the cluster (topology, routes) is built.

Builds the default scenario's cluster at N GPUs once, then times run_training(..., estimate) on it
repeatedly (the cost a sweep or planner pays per point). Run:
PYTHONPATH=. python benchmarks/estimate_point.py [--gpus 1024] [--repeat 20]
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from simdist.engine.context import build_context
from simdist.engine.training import run_training
from simdist.io.load import load_scenario
from simdist.scenario import Fidelity

DEFAULT = Path(__file__).resolve().parents[1] / "scenarios" / "default.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--set", action="append", default=[], help="extra dotted overrides")
    args = parser.parse_args()
    nodes = args.gpus // 8
    scenario = load_scenario(DEFAULT, [f"cluster.nodes.0.count={nodes}", "cluster.fabric.nodes_per_leaf=16",
                                       *args.set])
    t0 = time.perf_counter()
    ctx = build_context(scenario, Fidelity.ESTIMATE)
    build = time.perf_counter() - t0
    walls = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        r = run_training(scenario, Fidelity.ESTIMATE, context=ctx)
        walls.append(time.perf_counter() - t0)
    print(f"gpus {args.gpus}: cluster build {build * 1e3:.1f} ms; estimate per point: first {walls[0] * 1e3:.2f} ms, "
          f"median {statistics.median(walls) * 1e3:.2f} ms (iteration {r.iteration_time_s * 1e3:.3f} ms)")


if __name__ == "__main__":
    main()
