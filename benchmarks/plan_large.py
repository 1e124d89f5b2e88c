"""A plan over 110,592 candidate layouts of GPT-3 175B on 1,024 A100 (scenarios/planner/gpt3-175b-layouts.yaml),
as medians of whole processes, against issue 33's target (< 60 s) and Calculon's 15 ms per layout.

Rows (each the median of N separate processes, N fixed up front, default 5):
- `prune`: the array phase alone in a fresh process (loading the plan, the grid, the loader's rules, memory per
  GPU and the pipeline bound of every candidate with its blocking tp calls: planner/layout_space.py,
  io/layout_rules.py, planner/layout_costs.py, planner/bound.py), wall and CPU seconds, with the candidates it
  leaves to estimate;
- `plan`: `simdist plan FILE --json --confirm C` whole, wall and CPU seconds (its worker processes included),
  the candidates it estimated and skipped by the bound, and the top 10 (the same in every run, or the row says
  so). `--skip-plan` leaves it out.
- `--exhaustive`: every candidate that is valid and fits estimated one by one with the run's own functions (no
  bound; two worker processes, about 20 minutes of CPU for this space), and its top by iteration time (as many
  as the plan's) against the plan's: the check that the bound skipped nothing that mattered (the plan's layouts
  share one global batch, so iteration time orders them as throughput does).
Run: PYTHONPATH=. python benchmarks/plan_large.py [--runs 5] [--skip-plan] [--confirm 0] [--exhaustive] [--file FILE]
"""
from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPACE = ROOT / "scenarios" / "planner" / "gpt3-175b-layouts.yaml"
CALCULON_S_PER_LAYOUT = 0.015
TARGET_PLAN_S = 60.0
CLI = [sys.executable, "-c", "from simdist.cli import main; main()"]
PRUNE = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from simdist.io.sweep_load import load_point, plan_spec, read_sweep_file
from simdist.planner.bound import layout_tp_floors
from simdist.planner.layout_costs import layout_costs
from simdist.planner.layout_space import build_grid, reference_scenario
base, block, folder, name = read_sweep_file(sys.argv[1], "plan")
spec = plan_spec(block)
fs = spec.factors
ref = reference_scenario(base, (), fs, load_point, str(folder), name)
grid = build_grid(fs, ref, base, ())
valid = load_point.invalid_layouts(grid) == ""
costs = layout_costs(grid, valid, layout_tp_floors(ref))
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "candidates": grid.n,
                  "valid": int(valid.sum()), "fit": int((valid & costs.fits).sum()),
                  "one_by_one": int((valid & ~costs.covered).sum())}))
"""


EXHAUSTIVE = """
import json, sys
from multiprocessing import Pool
import numpy as np
from simdist.engine.simulation import simulate
from simdist.errors import InfeasibleError
from simdist.io.sweep_load import load_point, plan_spec, read_sweep_file
from simdist.planner.layout_costs import layout_costs
from simdist.planner.layout_space import build_grid, reference_scenario, step_indices
base, block, folder, name = read_sweep_file(sys.argv[1], "plan")
fs = plan_spec(block).factors
grid = build_grid(fs, reference_scenario(base, (), fs, load_point, str(folder), name), base, ())
valid = load_point.invalid_layouts(grid) == ""
costs = layout_costs(grid, valid)
fit = np.flatnonzero(valid & (costs.fits | ~costs.covered))  # those the arrays leave out: the run decides
steps = step_indices(fs, grid.n)

def one(i):
    values = {k: v for f, s in zip(fs, steps) for k, v in f.items(int(s[i]))}
    try:
        r = simulate(load_point(base, (), values, str(folder), name), fidelity="estimate", baseline=False)
    except InfeasibleError:
        return None
    return r.iteration_time_s, int(i)

if __name__ == "__main__":
    with Pool(2) as pool:
        got = sorted(x for x in pool.map(one, fit.tolist(), chunksize=8) if x is not None)
    print(json.dumps({"estimated": len(got), "top10": [i for _, i in got[:int(sys.argv[2])]]}))
"""


def _child_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(cmd: list[str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the process and its children, stdout) of one whole process."""
    c0, t0 = _child_cpu_s(), time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return time.perf_counter() - t0, _child_cpu_s() - c0, out


def prune_rows(file: Path, runs: int) -> dict:
    got = [json.loads(_timed([sys.executable, "-c", PRUNE, str(file)])[2]) for _ in range(runs)]
    return {**got[0], "wall_s": statistics.median(g["wall_s"] for g in got),
            "cpu_s": statistics.median(g["cpu_s"] for g in got)}


def plan_rows(file: Path, runs: int, confirm: int) -> dict:
    walls, cpus, tops, notes = [], [], [], []
    for _ in range(runs):
        wall, cpu, out = _timed([*CLI, "plan", str(file), "--json", "--confirm", str(confirm)])
        plan = json.loads(out)
        walls.append(wall)
        cpus.append(cpu)
        tops.append([r["point"] for r in plan["ranked"][:10]])
        notes.append(plan["search"])
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus), "top10": tops[0],
            "same_top10": all(t == tops[0] for t in tops), "search": notes[0], "space": plan["space"],
            "estimated": int(re.search(r"(\d+) estimated best bound first", plan["search"]).group(1))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--file", type=Path, default=SPACE)
    ap.add_argument("--confirm", type=int, default=0, help="simulated confirmations in the plan row (default 0)")
    ap.add_argument("--skip-plan", action="store_true")
    ap.add_argument("--exhaustive", action="store_true", help="also estimate every candidate that fits")
    args = ap.parse_args()
    p = prune_rows(args.file, args.runs)
    print(f"prune ({args.runs} processes, median): {p['candidates']:,} candidates in {p['wall_s']:.2f} s wall, "
          f"{p['cpu_s']:.2f} s CPU ({p['cpu_s'] / p['candidates'] * 1e6:.0f} us CPU per candidate, Calculon "
          f"{CALCULON_S_PER_LAYOUT * 1e3:.0f} ms per layout: {CALCULON_S_PER_LAYOUT * p['candidates'] / p['cpu_s']:.0f}x"
          f" less); {p['valid']:,} valid, {p['fit']:,} fit in memory, {p['one_by_one']:,} checked one by one")
    if args.skip_plan:
        return
    r = plan_rows(args.file, args.runs, args.confirm)
    per = r["cpu_s"] / r["space"]
    print(f"plan ({args.runs} processes, median, confirm {args.confirm}): {r['wall_s']:.1f} s wall (target "
          f"{TARGET_PLAN_S:.0f} s: {'met' if r['wall_s'] < TARGET_PLAN_S else 'missed'}), {r['cpu_s']:.1f} s CPU "
          f"({per * 1e3:.2f} ms CPU per candidate, Calculon {CALCULON_S_PER_LAYOUT * 1e3:.0f} ms: "
          f"{CALCULON_S_PER_LAYOUT / per:.1f}x less); {r['estimated']:,} estimated; {r['search']}")
    print(f"top 10 points {r['top10']} ({'the same in every run' if r['same_top10'] else 'DIFFERENT between runs'})")
    if args.exhaustive:
        wall, cpu, out = _timed([sys.executable, "-c", EXHAUSTIVE, str(args.file), str(len(r["top10"]))])
        e = json.loads(out)
        print(f"exhaustive: {e['estimated']:,} estimated in {wall:.0f} s wall, {cpu:.0f} s CPU; top {e['top10']} "
              f"({'the same as the plan' if e['top10'] == r['top10'] else 'DIFFERENT from the plan'})")


if __name__ == "__main__":
    main()
