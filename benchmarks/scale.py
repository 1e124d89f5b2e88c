"""How simdist's cost grows with the cluster: one data-parallel iteration at flow fidelity per point.

For ResNet-50 and GPT-2 XL (ring, hierarchical and sharded-PS all_reduce) on fat trees of 1,024 to
131,072 GPUs (DGX A100-like nodes: 8 GPUs, NVSwitch, 8 x 200G NICs), and the same ranks on ring and
2D-torus fabrics, it prints per point: the whole process's wall time (interpreter start to exit), the
simulate call's wall time, peak resident memory, simpy events, the predicted iteration time, and the
same point at `estimate` fidelity (its wall time on the already-built cluster and its iteration time
relative to simulate); then the growth exponent of wall time between consecutive sizes. Variants:
`straggler` (GPU 0 computes 2x slower) and `mixed` (half the nodes V100 DGX-1, half A100).

Every point runs in its own subprocess with a timeout (a slow point is reported, never hangs the run),
through public entry points only: simdist.io.load.load_scenario with overrides, simulate().

  python benchmarks/scale.py --quick                      # sizes up to 4,096 GPUs
  python benchmarks/scale.py --max-gpus 16384 --timeout 300
  python benchmarks/scale.py --only resnet50:ring:fat_tree:base --max-gpus 131072
  python benchmarks/scale.py --profile resnet50:ring:fat_tree:base:4096   # cProfile summary of one point
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = (1024, 4096, 16384, 65536, 131072)
GPUS_PER_NODE = 8
BATCH = {"resnet50": 64, "gpt2-xl": 4}

# (model, strategy, fabric, variant) rows of the default matrix
MATRIX = ([("resnet50", s, "fat_tree", "base") for s in ("ring", "hierarchical", "ps")]
          + [("gpt2-xl", s, "fat_tree", "base") for s in ("ring", "hierarchical", "ps")]
          + [("resnet50", "ring", f, "base") for f in ("ring", "torus2d")]
          + [("resnet50", "ring", "fat_tree", v) for v in ("straggler", "mixed")])


def scenario(model: str, strategy: str, fabric: str, variant: str, gpus: int) -> dict:
    """The scenario of one point, as data (written to a temporary file as JSON, which is YAML)."""
    nodes = gpus // GPUS_PER_NODE
    nic = {"bandwidth": "200 Gb/s", "latency": "2 us", "count": 8, "transport": "rdma"}
    a100 = {"count": nodes, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100", "nic": nic}
    groups = [a100]
    if variant == "mixed":
        groups = [dict(a100, count=nodes - nodes // 2),
                  {"count": nodes // 2, "gpu": "v100-sxm2-32gb", "gpus_per_node": 8, "intra_node": "cube-mesh-v100",
                   "nic": dict(nic, count=4)}]
    fab = {"topology": fabric, "link": {"bandwidth": "200 Gb/s", "latency": "1 us"}}
    if fabric == "fat_tree":
        fab |= {"nodes_per_leaf": 16, "oversubscription": 1.0}
    comm = {"strategy": strategy, "bucket_size": "25 MiB", "overlap": True}
    if strategy == "ps":
        comm["ps"] = {"servers": 8, "placement": "colocated"}  # sharded over 8 server shards
    data = {"name": f"scale-{model}-{strategy}-{fabric}-{variant}-{gpus}",
            "cluster": {"nodes": groups, "fabric": fab},
            "workload": {"model": model, "batch_per_gpu": BATCH[model], "precision": "fp16"},
            "training": {"optimizer": "adam" if model.startswith("gpt") else "momentum"},
            "communication": comm,
            "run": {"iterations": 1, "warmup": 0, "seed": 0}}
    if variant == "straggler":
        data["failures"] = {"events": [{"at": "0 s", "kind": "straggler", "target": "gpu:0", "slowdown": 2.0}]}
    return data


def _point(spec: str) -> dict:
    """Child process: run one point, return its figures (simpy events counted by wrapping schedule)."""
    t_start = time.perf_counter()
    import resource

    import simpy

    counter = {"events": 0}
    schedule = simpy.Environment.schedule

    def counting(self, event, priority=1, delay=0):
        counter["events"] += 1
        return schedule(self, event, priority, delay)

    simpy.Environment.schedule = counting
    from simdist.engine.simulation import simulate
    from simdist.io.load import load_scenario

    model, strategy, fabric, variant, gpus = spec.split(":")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        json.dump(scenario(model, strategy, fabric, variant, int(gpus)), f)
    try:
        sc = load_scenario(f.name, [])
    finally:
        os.unlink(f.name)
    t0 = time.perf_counter()
    sim = simulate(sc, fidelity="simulate")
    sim_wall = time.perf_counter() - t0
    events = counter["events"]
    t0 = time.perf_counter()
    est = simulate(sc, fidelity="estimate")
    est_wall = time.perf_counter() - t0
    return {"spec": spec, "startup_s": t0 - t_start - sim_wall, "simulate_s": sim_wall, "estimate_s": est_wall,
            "events": events, "iteration_s": sim.iteration_time_s, "estimate_iteration_s": est.iteration_time_s,
            "maxrss_GiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20}


def run_point(spec: str, timeout_s: float) -> dict:
    """Parent: one point in a fresh interpreter; whole-process wall time measured here."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, __file__, "--child", spec], capture_output=True, text=True,
                             timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"spec": spec, "error": f"timeout after {timeout_s:g} s"}
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"spec": spec, "error": f"exit {out.returncode}: {tail[:120]}", "process_s": wall}
    return json.loads(out.stdout.strip().splitlines()[-1]) | {"process_s": wall}


def _row(r: dict, prev: dict | None) -> str:
    model, strategy, fabric, variant, gpus = r["spec"].split(":")
    head = f"{model:>9} {strategy:>12} {fabric:>8} {variant:>9} {int(gpus):>7}"
    if "error" in r:
        return f"{head}  {r['error']}"
    growth = ""
    if prev is not None and "error" not in prev:
        g0, g1 = int(prev["spec"].split(":")[-1]), int(gpus)
        growth = f"{math.log(r['process_s'] / prev['process_s']) / math.log(g1 / g0):.2f}"
    return (f"{head} {r['process_s']:>8.2f} {r['simulate_s']:>8.2f} {r['maxrss_GiB']:>7.2f} {r['events']:>8} "
            f"{r['iteration_s'] * 1e3:>9.2f} {r['estimate_s'] * 1e3:>8.1f} "
            f"{r['estimate_iteration_s'] / r['iteration_s']:>7.4f} {growth:>6}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="sizes up to 4,096 GPUs")
    parser.add_argument("--max-gpus", type=int, default=max(SIZES), help="largest size to run")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per point")
    parser.add_argument("--only", action="append", default=[], help="model:strategy:fabric:variant (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON lines too")
    parser.add_argument("--profile", help="model:strategy:fabric:variant:gpus: cProfile one point in this process")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_point(args.child)))
        return
    if args.profile:
        import cProfile
        import pstats

        cProfile.runctx("_point(spec)", globals(), {"spec": args.profile}, "/tmp/simdist-scale.prof")
        pstats.Stats("/tmp/simdist-scale.prof").sort_stats("cumulative").print_stats(30)
        return
    cap = min(args.max_gpus, 4096) if args.quick else args.max_gpus
    rows = [tuple(o.split(":")) for o in args.only] or MATRIX
    print(f"{'model':>9} {'strategy':>12} {'fabric':>8} {'variant':>9} {'gpus':>7} {'proc_s':>8} {'sim_s':>8} "
          f"{'GiB':>7} {'events':>8} {'iter_ms':>9} {'est_ms':>8} {'est/sim':>7} {'growth':>6}")
    for row in rows:
        prev = None
        for gpus in (s for s in SIZES if s <= cap):
            r = run_point(":".join(row + (str(gpus),)), args.timeout)
            print(_row(r, prev), flush=True)
            if args.json:
                print("#", json.dumps(r), flush=True)
            if "error" in r and r["error"].startswith("timeout"):
                break  # larger sizes of this row would time out too
            prev = r


if __name__ == "__main__":
    main()
