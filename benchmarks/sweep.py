"""Planner speed: estimate and simulate points per second, 1,000-point sweeps and plan searches.

Prints, for the default scenario (ResNet-50, DDP ring, 8 GPUs per node, fat tree) scaled to 1,024 GPUs:
the time to resolve one point (schema + catalog), to estimate it and to simulate it; the wall time of
two sweeps of N estimate points on --jobs processes (target: 1,000 points < 10 s): one over bucket
sizes (every point asks for collective sizes no other point did, so their schedules are built) and
one over batch x compression x overlap (collective sizes repeat, so the built cluster and its timed
collectives are reused); and `plan` over two spaces of M candidates with the top 10 confirmed by
simulation (target: >= 10,000 candidates < 60 s): strategy x codec x 10 bucket sizes x overlap x batch
(and, with --bucket-plan, strategy x codec x bucket sizes).
The first plan estimates the space exhaustively, skipping compute classes (same values off
`communication.*`) whose compute-only throughput bound cannot reach the top 10 (planner/bound.py): it
prints how many candidates were estimated and how many skipped. The others search the same space by
successive halving over bound -> estimate -> simulate:1 -> simulate (planner/halving.py; at most
--sample, then at most 20,000, estimated), and by a random sample of --sample candidates (estimated with
the same skipping) and the local search, and say whether they found the exhaustive plan's winner and how
many of its top 10.
The plan over ~830 new bucket sizes per strategy and codec is opt-in (--bucket-plan): every candidate
builds new schedules (~200 ms of CPU each), so it takes over half an hour here.
Run: .venv/bin/python benchmarks/sweep.py [--points 1000] [--plan-points 10000] [--jobs 2] [--quick]
"""
from __future__ import annotations

import argparse
import hashlib
import resource
import tempfile
import time
from pathlib import Path

from simdist.engine.context_cache import process_cache
from simdist.engine.simulation import simulate
from simdist.io.sweep_load import load_point, plan_spec, read_sweep_file, sweep_spec
from simdist.planner.plan import search
from simdist.planner.rows import key_text, point_key
from simdist.planner.sweep import run_sweep

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "default.yaml"
NODES = 128  # x 8 GPUs = 1,024


def _timed(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _bucket_axis(n: int, step_mb: float = 0.25) -> str:
    """n distinct bucket sizes (MB), so a sweep of n points is n distinct scenarios on one cluster."""
    return "communication.bucket_size=" + ",".join(f"{1 + i * step_mb:g} MB" for i in range(n))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--plan-points", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="100 sweep points and 400 plan candidates")
    ap.add_argument("--sample", type=int, default=2000, help="candidates the sampled plan estimates at random")
    ap.add_argument("--bucket-plan", action="store_true", help="also plan over ~830 bucket sizes (slow)")
    ap.add_argument("--no-sweeps", action="store_true", help="only the one-point figures and the plans")
    args = ap.parse_args()
    if args.quick:
        args.points, args.plan_points, args.sample = 100, 400, 100
    base, _, base_dir, name = read_sweep_file(SCENARIO)
    values = {"cluster.nodes.0.count": NODES}
    scenario = load_point(base, (), values, str(base_dir), name)
    print(f"scenario: {name} at {scenario.cluster.num_gpus} GPUs")
    t_load = _timed(lambda: load_point(base, (), values, str(base_dir), name))
    t0 = time.perf_counter()
    simulate(scenario, fidelity="estimate")  # builds and caches what a process builds once
    t_first = time.perf_counter() - t0
    t_est = _timed(lambda: simulate(scenario, fidelity="estimate"))
    t_sim = _timed(lambda: simulate(scenario, fidelity="simulate"), repeat=1)
    t_key = _timed(lambda: point_key(scenario, "estimate"))
    t_key_def = _timed(lambda: hashlib.sha256(key_text(scenario, "estimate").encode()).hexdigest())
    print(f"planner overhead per point: resolve {t_load * 1e3:.2f} ms (schema + catalog), key "
          f"{t_key * 1e3:.2f} ms (memoised sections; {t_key_def * 1e3:.2f} ms by the definition)")
    print(f"one point: resolve {t_load * 1e3:.1f} ms, estimate {t_est * 1e3:.1f} ms on the built cluster (the "
          f"first, which builds it: {t_first * 1e3:.0f} ms; target < 10 ms: {'met' if t_est < 0.01 else 'MISSED'}), "
          f"simulate {t_sim * 1e3:.0f} ms"
          f"  -> {1 / (t_load + t_est):.1f} estimate points/s and {1 / (t_load + t_sim):.2f} simulate points/s"
          " per process")

    sweeps = () if args.no_sweeps else (("bucket sizes (new collective sizes every point)", [_bucket_axis(args.points)]),
                        ("batch x codec x overlap (collective sizes repeat)", _repeating_axes(args.points)))
    for label, axes in sweeps:
        with tempfile.TemporaryDirectory() as tmp:
            spec = sweep_spec({}, [f"cluster.nodes.0.count={NODES}", *axes])
            process_cache().clear()  # forked workers start cold, as under `simdist sweep`
            t0, c0 = time.perf_counter(), _cpu_s()
            out = run_sweep(spec, base, load_point, str(Path(tmp) / "s.csv"), base_dir=str(base_dir), name=name,
                            fidelity="estimate", jobs=args.jobs)
            wall, cpu = time.perf_counter() - t0, _cpu_s() - c0
            at = 1000 / (out.points / wall)
            print(f"sweep over {label}: {out.points} estimate points on {args.jobs} processes in {wall:.1f} s "
                  f"({out.points / wall:.1f} points/s; {out.by_status}); 1,000 points at this rate: {at:.1f} s "
                  f"-> target < 10 s: {'met' if at < 10 else 'MISSED'}; CPU {cpu:.1f} s in all "
                  f"({cpu / out.points * 1e3:.1f} ms a point; {cpu * 1000 / out.points / args.jobs:.1f} s per 1,000 "
                  f"points on {args.jobs} idle cores)")
            t0 = time.perf_counter()
            again = run_sweep(spec, base, load_point, str(Path(tmp) / "s.csv"), base_dir=str(base_dir), name=name,
                              fidelity="estimate", jobs=args.jobs)
            print(f"  resume of the finished sweep: {time.perf_counter() - t0:.1f} s, {again.ran} points rerun")

    strategies, codecs = ["ring", "hierarchical", "tree"], ["none", "fp16", "int8", "powersgd"]
    buckets = max(1, args.plan_points // (len(strategies) * len(codecs)))
    batches = max(1, -(-args.plan_points // (len(strategies) * len(codecs) * 10 * 2)))
    common = [f"cluster.nodes.0.count={NODES}", "communication.strategy=" + ",".join(strategies),
              "communication.compression.method=" + ",".join(codecs)]
    space = [*common, _bucket_axis(10, step_mb=5.0), "communication.overlap=true,false", _batch_axis(batches)]
    runs = [("strategy x codec x 10 buckets x overlap x batch, exhaustive", space, 10 ** 6, "exhaustive"),
            (f"the same space, successive halving (at most {args.sample} estimated)", space, args.sample, "halving"),
            ("the same space, successive halving (default --max-points, 20,000)", space, 20_000, "halving"),
            (f"the same space, random sample of {args.sample} + local search", space, args.sample, "sample")]
    if args.bucket_plan:
        runs.append(("strategy x codec x bucket sizes, exhaustive", [*common, _bucket_axis(buckets)], 10 ** 6,
                     "exhaustive"))
    winner = None
    top10: list[int] = []
    for label, axes, max_points, how in runs:
        pspec = plan_spec({}, axes, {"objective": "throughput", "confirm": 10, "top": 10, "max_points": max_points,
                                     "search": how})
        process_cache().clear()
        t0, c0 = time.perf_counter(), _cpu_s()
        plan = search(pspec, base, load_point, base_dir=str(base_dir), name=name, jobs=args.jobs)
        wall, cpu = time.perf_counter() - t0, _cpu_s() - c0
        best = plan.ranked[0]
        ok = plan.space >= 10_000 and wall < 60
        confirmed = sum(1 for r in plan.ranked if r.get("confirmed"))
        print(f"plan over {label}: {plan.space} candidates in the space ({plan.search}): {plan.evaluated} "
              f"estimated in all, {plan.pruned} skipped by the compute bound ({plan.feasible} feasible), "
              f"{confirmed} of the top 10 confirmed by "
              f"simulation, in {wall:.1f} s (estimating {plan.seconds['estimate']:.1f} s, confirming "
              f"{plan.seconds['confirm']:.1f} s; CPU {cpu:.1f} s in all) -> target >= 10,000 candidates < 60 s: "
              f"{'met' if ok else 'MISSED' if plan.space >= 10_000 else 'not measured (--quick)'}; best "
              f"{best['communication.strategy']} / {best['communication.compression.method']} / "
              f"{best.get('communication.bucket_size')} / overlap {best.get('communication.overlap')} / batch "
              f"{best.get('workload.batch_per_gpu')} (point {best['point']})")
        if axes is space:
            mine = [r["point"] for r in plan.ranked]
            if winner is None:
                winner, top10 = best["point"], mine
            else:
                same = sum(1 for p in mine if p in top10)
                print(f"  its winner is {'the same as' if best['point'] == winner else 'NOT'} the exhaustive plan's "
                      f"(point {winner}); {same} of its top 10 are in the exhaustive top 10, "
                      f"{'in the same order' if mine == top10 else 'not all in the same order'}; rungs "
                      + ", ".join(f"{r['rung']} {r['entered']}" for r in plan.rungs))


def _cpu_s() -> float:
    """CPU seconds of this process and its finished worker processes (a shared machine's wall time counts
    other jobs' turns too)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _repeating_axes(n: int) -> list[str]:
    """n points over batch x codec x overlap: 8 (codec, overlap) pairs x ceil(n / 8) batch sizes."""
    return ["communication.compression.method=none,fp16,bf16,int8", "communication.overlap=true,false",
            _batch_axis(-(-n // 8))]


def _batch_axis(n: int) -> str:
    """n distinct per-GPU batches from 64 up, in steps of 2."""
    return "workload.batch_per_gpu=" + ",".join(str(64 + 2 * i) for i in range(n))


if __name__ == "__main__":
    main()
