"""CPU seconds `estimate` takes where compute-communication interference makes the fold a run in time order
(engine.closed_form.fold runs the one Executor on closed-form times).

The cases are interleaved pipelines (v = 2, pinned: the scenario itself now runs 4 chunks) with dp buckets
overlapped with the backward (`communication.overlap: true`): validation/published/scenarios/
megatron-ptdp-gpt3-175b.yaml (GPT-3 175B, 384 A100, tp 8 x pp 12 x dp 4) and turned into GPT-3 13B on
64 A100 (tp 8 x pp 4 x dp 2) at global batch 16 and 64. Prints per case the CPU seconds of the whole
estimate and the iteration time. An iterated fold took 100 passes on each, unconverged (figures in
docs/model-parallel.md).
Run: PYTHONPATH=$PWD .venv/bin/python benchmarks/fold.py [--cases 13b-16,13b-64,175b]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from simdist.engine.simulation import simulate
from simdist.io.load import load_scenario

SCENARIO = Path(__file__).resolve().parents[1] / "validation" / "published" / "scenarios" / "megatron-ptdp-gpt3-175b.yaml"
GPT3_13B = ["workload.model=gpt3-13b", "cluster.nodes.0.count=8", "training.parallelism.dp=2",
            "training.parallelism.pp=4", "training.virtual_stages=2"]
CASES = {
    "13b-16": [*GPT3_13B, "workload.global_batch=16", "communication.overlap=true"],
    "13b-64": [*GPT3_13B, "workload.global_batch=64", "communication.overlap=true"],
    "175b": ["communication.overlap=true", "training.virtual_stages=2"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", default="13b-16,13b-64,175b", help=f"comma-separated, of {', '.join(CASES)}")
    args = parser.parse_args()
    print(f"{'case':>8} {'cpu_s':>8} {'iteration_s':>16}")
    for name in args.cases.split(","):
        scenario = load_scenario(SCENARIO, CASES[name])
        t0 = time.process_time()
        result = simulate(scenario, fidelity="estimate")
        cpu = time.process_time() - t0
        print(f"{name:>8} {cpu:>8.2f} {result.iteration_time_s:>16.12f}", flush=True)


if __name__ == "__main__":
    main()
