"""How simdist's cost grows with the cluster: one data-parallel iteration at flow fidelity per point.

For ResNet-50 and GPT-2 XL (ring, hierarchical and sharded-PS all_reduce) on fat trees of 1,024 to
131,072 GPUs (DGX A100-like nodes: 8 GPUs, NVSwitch, 8 x 200G NICs), and the same ranks on ring and
2D-torus fabrics, it prints per point: the whole process's wall time up to the iteration's result (interpreter launch to
the end of the simulate call: imports, load, topology, routes, simulation), the simulate call's wall
time, peak resident memory at that moment, simpy events, the predicted iteration time, and the same
point at `estimate` fidelity run afterwards (its wall time on the already-built cluster and its
iteration time relative to simulate); then the growth exponent of wall time between consecutive sizes.
Variants: `straggler` (GPU 0 computes 2x slower) and `mixed` (half the nodes V100 DGX-1, half A100);
their cost relative to the symmetric row at the same size is printed after the table. `--startup`
times the start-up alone (launch, imports, load, topology, the routes of a ring all_reduce) at 512 GPUs,
and a summary compares every figure with issue 10's targets.

Every point runs in its own subprocess with a timeout (a slow point is reported, never hangs the run),
through public entry points only: simdist.io.load.load_scenario with overrides, simulate().

  python benchmarks/scale.py --quick                      # sizes up to 4,096 GPUs
  python benchmarks/scale.py --max-gpus 16384 --timeout 300
  python benchmarks/scale.py --only resnet50:ring:fat_tree:base --max-gpus 131072
  python benchmarks/scale.py --profile resnet50:ring:fat_tree:base:4096   # cProfile summary of one point
  python benchmarks/scale.py --startup                    # start-up at 512 GPUs (median of 9 processes)
  python benchmarks/scale.py --versus ../main --repeats 10  # start-up and 1,024 GPUs against another checkout
  python benchmarks/scale.py --targets --timeout 300      # just the rows issue 10's targets name
  python benchmarks/scale.py --ps-targets --timeout 600   # the sharded-PS rows against the same targets
"""
from __future__ import annotations

import json
import math
import os
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
        # sharded over 8 server shards, every GPU pushing (the layout docs/performance.md times)
        comm["ps"] = {"servers": 8, "placement": "colocated", "aggregation": "gpu"}
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
    """Child process: run one point, return its figures (simpy events counted by wrapping schedule).
    Times are epoch seconds too, so the parent can measure from the moment it launched the process."""
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
    start_epoch = time.time()
    t0 = time.perf_counter()
    sim = simulate(sc, fidelity="simulate")
    sim_wall = time.perf_counter() - t0
    done_epoch = time.time()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = usage.ru_utime + usage.ru_stime
    events = counter["events"]
    rss_sim = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    t0 = time.perf_counter()
    est = simulate(sc, fidelity="estimate")
    est_wall = time.perf_counter() - t0
    return {"spec": spec, "simulate_s": sim_wall, "estimate_s": est_wall, "start_epoch": start_epoch,
            "done_epoch": done_epoch, "cpu_s": cpu_s, "events": events, "iteration_s": sim.iteration_time_s,
            "estimate_iteration_s": est.iteration_time_s, "maxrss_GiB": rss_sim}


def _cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# start-up phases in the order the phases child reaches them (each the CPU seconds since the previous one);
# the third-party packages are imported first, one by one, only so their share can be told apart: the modules
# loaded are the same as the simdist imports alone would load, but imported outside simdist's modules they
# run with the cyclic collector on (simdist's own imports pause it), so the timed start-up is another child's
STARTUP_PHASES = (
    ("interpreter", "interpreter, site (the venv's editable-install finder), this script's imports (json, tempfile)"),
    ("numpy", "numpy (one OpenBLAS thread: `import simdist` sets OPENBLAS_NUM_THREADS=1 first)"),
    ("pydantic", "pydantic and pydantic_core"),
    ("simpy", "simpy (with importlib.metadata, which pydantic's plugin loader needs too)"),
    ("schema", "the scenario schema: simdist.io.schema* model classes (each builds its validator) and the "
               "simdist modules they import (scenario, hardware specs, units, collectives.schedule)"),
    ("simdist", "the rest of simdist.io.load and simdist.engine.simulation's imports"),
    ("load", "load_scenario: read (the scenario and catalog YAML parsed, or read back from io.yaml_cache), "
             "validate, resolve catalogs, check the cluster"),
    ("cluster", "Simulation(...): the engine modules it imports, topology, router, network model"),
    ("routes", "the ring all_reduce's schedule and its 16 steps' routes compiled"),
)


def _startup(phases: bool = False) -> dict:
    """Child process: imports, load, topology and the routes of one ring all_reduce at 512 GPUs; with `phases`,
    numpy, pydantic and simpy are imported first, each on its own (STARTUP_PHASES)."""
    marks = [_cpu()]
    import simdist  # noqa: F401 - light; first, so numpy starts with the BLAS threads simdist asks for
    if phases:
        import numpy  # noqa: F401
        marks.append(_cpu())
        import pydantic  # noqa: F401
        import pydantic.fields  # noqa: F401
        marks.append(_cpu())
        import simpy  # noqa: F401
        marks.append(_cpu())
    else:
        marks += [marks[-1]] * 3
    # no PyYAML phase: simdist imports it only to parse a text that io.yaml_cache does not hold yet
    import simdist.io.schema  # noqa: F401
    marks.append(_cpu())
    from simdist.collectives.schedule import CollectiveOp
    from simdist.engine.state import Simulation
    from simdist.io.load import load_scenario
    from simdist.scenario import Fidelity
    marks.append(_cpu())

    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        json.dump(scenario("resnet50", "ring", "fat_tree", "base", 512), f)
    try:
        sc = load_scenario(f.name, [])
    finally:
        os.unlink(f.name)
    loaded = time.time()
    marks.append(_cpu())
    ctx = Simulation(sc, Fidelity.SIMULATE).context
    marks.append(_cpu())
    sched = ctx.cached_schedule(CollectiveOp.ALL_REDUCE, 25 * 2 ** 20)
    steps = [ctx.network.steps.get(step) for chain in sched.chains for step in chain]
    done = time.time()
    marks.append(_cpu())
    phases = [marks[0]] + [b - a for a, b in zip(marks, marks[1:])]
    return {"loaded_epoch": loaded, "done_epoch": done, "loaded_cpu_s": marks[6], "cpu_s": marks[-1],
            "steps": len(steps), "phases": dict(zip((k for k, _ in STARTUP_PHASES), phases))}


# Children cache compiled bytecode (Python's default) even where PYTHONDONTWRITEBYTECODE is set, so a
# point does not pay for compiling simdist's sources (~0.1 s) in every process; --no-bytecode keeps it.
KEEP_NO_BYTECODE = False


def _child(args: list[str], timeout_s: float, root: Path = ROOT) -> "tuple[dict | None, float, str]":
    """Run this script (of the checkout at `root`) as a child; (its last JSON line or None, launch
    epoch, error text)."""
    import subprocess  # here, not at the top: the children (what is timed) never import it

    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if not KEEP_NO_BYTECODE:  # Python's default: compiled modules are cached, as in any install
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    launch = time.time()
    try:
        # -m: run from the cached bytecode, as any imported module is (a script given by path is compiled
        # in every process, ~0.01 s here, which is the benchmark's cost, not simdist's)
        out = subprocess.run([sys.executable, "-m", "benchmarks.scale", *args], capture_output=True, text=True,
                             timeout=timeout_s, env=env, cwd=root)
    except subprocess.TimeoutExpired:
        return None, launch, f"timeout after {timeout_s:g} s"
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        return None, launch, f"exit {out.returncode}: {tail[:120]}"
    return json.loads(out.stdout.strip().splitlines()[-1]), launch, ""


def run_point(spec: str, timeout_s: float) -> dict:
    """Parent: one point in a fresh interpreter; whole-process wall time (launch to the simulate
    call's result, and launch to exit) measured from here."""
    r, launch, error = _child(["--child", spec], timeout_s)
    if r is None:
        return {"spec": spec, "error": error}
    return r | {"process_s": r["done_epoch"] - launch, "startup_s": r["start_epoch"] - launch,
                "exit_s": time.time() - launch}


def run_startup(repeats: int = 9) -> dict:
    """Start-up at 512 GPUs, median over `repeats` fresh processes: launch -> scenario loaded, and
    launch -> topology built and the ring's routes compiled; the CPU by phase from as many processes of the
    phases child, run in turn with them."""
    loaded, done, cpu, loaded_cpu = [], [], [], []
    phases: dict[str, list[float]] = {k: [] for k, _ in STARTUP_PHASES}
    for _ in range(repeats):
        r, launch, error = _child(["--startup-child"], 120)
        p, _, error_p = _child(["--startup-phases-child"], 120)
        if r is None or p is None:
            return {"error": error or error_p}
        loaded.append(r["loaded_epoch"] - launch)
        done.append(r["done_epoch"] - launch)
        cpu.append(r["cpu_s"])
        loaded_cpu.append(r["loaded_cpu_s"])
        for k, v in p["phases"].items():
            phases[k].append(v)
    mid = repeats // 2
    return {"load_s": sorted(loaded)[mid], "startup_s": sorted(done)[mid], "min_s": min(done), "max_s": max(done),
            "cpu_s": sorted(cpu)[mid], "load_cpu_s": sorted(loaded_cpu)[mid],
            "phases_cpu_s": {k: sorted(v)[mid] for k, v in phases.items()}}


def startup_table(startup: dict) -> list[str]:
    """Where the start-up's CPU goes: the median of each phase over the processes (the medians need not
    add up to the median total)."""
    lines = ["", "start-up CPU by phase (median of the processes, seconds):"]
    for key, what in STARTUP_PHASES:
        lines.append(f"  {startup['phases_cpu_s'][key]:6.3f}  {key:<11} {what}")
    return lines


def versus(other: Path, repeats: int, spec: str) -> list[str]:
    """This checkout against the one at `other` (e.g. main, as a git worktree): the start-up child and
    the point `spec`, alternating between the two checkouts process by process so both see the same load
    (on a shared machine the load moves from one minute to the next); medians and minima of CPU and wall."""
    import statistics

    lines = []
    for kind, args in (("start-up, 512 GPUs", ["--startup-child"]), (spec, ["--child", spec])):
        got: dict[Path, list[tuple[float, float]]] = {ROOT: [], other: []}
        loads = []
        for _ in range(repeats):
            for root in (other, ROOT):
                r, launch, error = _child(args, 600, root)
                if r is None:
                    return lines + [f"{kind}: {root}: {error}"]
                got[root].append((r["cpu_s"], r["done_epoch"] - launch))
            loads.append(os.getloadavg()[0])
        for root, label in ((other, "other"), (ROOT, "this ")):
            cpu = [c for c, _ in got[root]]
            wall = [w for _, w in got[root]]
            lines.append(f"{kind}: {label} ({root}): CPU median {statistics.median(cpu):.3f} s (min {min(cpu):.3f}),"
                         f" wall median {statistics.median(wall):.3f} s (min {min(wall):.3f})")
        lines.append(f"  {repeats} processes each; load average (1 min) {min(loads):.1f}-{max(loads):.1f}")
    return lines


def _row(r: dict, prev: dict | None) -> str:
    model, strategy, fabric, variant, gpus = r["spec"].split(":")
    head = f"{model:>9} {strategy:>12} {fabric:>8} {variant:>9} {int(gpus):>7}"
    if "error" in r:
        return f"{head}  {r['error']}"
    growth = ""
    if prev is not None and "error" not in prev:
        g0, g1 = int(prev["spec"].split(":")[-1]), int(gpus)
        growth = f"{math.log(r['process_s'] / prev['process_s']) / math.log(g1 / g0):.2f}"
    return (f"{head} {r['process_s']:>8.2f} {r['cpu_s']:>7.2f} {r['simulate_s']:>8.2f} {r['maxrss_GiB']:>7.2f} "
            f"{r['events']:>8} "
            f"{r['iteration_s'] * 1e3:>9.2f} {r['estimate_s'] * 1e3:>8.1f} "
            f"{r['estimate_iteration_s'] / r['iteration_s']:>7.4f} {growth:>6}")


# issue 10's targets: (row, sizes) run by --targets
TARGET_PLAN = ([(("resnet50", "ring", "fat_tree", "base"), SIZES)]
               + [(("resnet50", "ring", f, "base"), (65536,)) for f in ("ring", "torus2d")]
               + [(("resnet50", "ring", "fat_tree", v), (1024, 4096, 16384)) for v in ("straggler", "mixed")])


# the sharded-PS rows (8 colocated server shards), held to the same targets as the ring row: --ps-targets
PS_ROWS = (("resnet50", "ps", "fat_tree", "base"), ("gpt2-xl", "ps", "fat_tree", "base"))
PS_TARGET_PLAN = [(row, SIZES) for row in PS_ROWS]


LIMITS = {1024: (0.5, None), 16384: (5.0, None), 65536: (20.0, 4.0), 131072: (60.0, 12.0)}  # wall s, GiB


def row_targets(results: dict[str, dict], name: str, indent: str) -> list[str]:
    """One row's wall and memory targets per size (issue 10's, LIMITS) and its growth exponent, wall and CPU."""
    lines = []
    for gpus, (t_max, gib_max) in LIMITS.items():
        r = results.get(f"{name}:{gpus}")
        if r is None:
            continue
        if "error" in r:
            lines.append(f"{indent}{gpus:,} GPUs < {t_max:g} s: {r['error']} MISSED")
            continue
        text = (f"{indent}{gpus:,} GPUs < {t_max:g} s: {r['process_s']:.2f} s (CPU {r['cpu_s']:.2f} s)"
                f" {_ok(r['process_s'] < t_max)}")
        if gib_max is not None:
            text += f"; < {gib_max:g} GiB: {r['maxrss_GiB']:.2f} GiB {_ok(r['maxrss_GiB'] < gib_max)}"
        lines.append(text)
    ok = [(g, results[f"{name}:{g}"]) for g in SIZES if "error" not in results.get(f"{name}:{g}", {"error": 1})]
    for what, col in (("wall", "process_s"), ("CPU", "cpu_s")):
        growth = [(a, b, math.log(rb[col] / ra[col]) / math.log(b / a)) for (a, ra), (b, rb) in zip(ok, ok[1:])]
        if growth:
            worst = max(g for _, _, g in growth)
            steps = ", ".join(f"{a // 1024}k->{b // 1024}k {g:.2f}" for a, b, g in growth)
            lines.append(f"{indent}growth exponent <= 1.1 ({what}): worst {worst:.2f} ({steps}) {_ok(worst <= 1.1)}")
    return lines


def ps_summary(results: dict[str, dict]) -> list[str]:
    """The ring row's targets (wall and memory per size, growth exponent) for every sharded-PS row that ran."""
    lines = []
    for row in PS_ROWS:
        name = ":".join(row)
        if any(f"{name}:{g}" in results for g in SIZES):
            lines.append(f"  sharded PS, {row[0]} (8 colocated shards):")
            lines += row_targets(results, name, "    ")
    return lines


def _ok(flag: bool) -> str:
    return "met" if flag else "MISSED"


def summary(results: dict[str, dict], startup: dict | None) -> list[str]:
    """Every figure issue 10's targets name, from the points that ran (a point not run is skipped)."""
    lines = ["", "targets (issue 10), whole process = launch to the simulate call's result:"]
    if startup is not None and "error" not in startup:
        lines.append(f"  start-up at 512 GPUs < 0.3 s: {startup['startup_s']:.2f} s median "
                     f"({startup['min_s']:.2f}-{startup['max_s']:.2f}; scenario loaded at {startup['load_s']:.2f} s;"
                     f" CPU {startup['cpu_s']:.2f} s, {startup['load_cpu_s']:.2f} s to load)"
                     f" {_ok(startup['startup_s'] < 0.3)}")
    base = "resnet50:ring:fat_tree:base"
    lines += row_targets(results, base, "  ")
    for fabric in ("ring", "torus2d"):
        r = results.get(f"resnet50:ring:{fabric}:base:65536")
        if r is not None:
            got = r.get("error") or f"{r['maxrss_GiB']:.2f} GiB, {r['process_s']:.1f} s"
            lines.append(f"  {fabric} fabric, 65,536 ranks < 4 GiB: {got} {_ok('error' not in r and r['maxrss_GiB'] < 4)}")
    for variant in ("straggler", "mixed"):
        ratios = []
        for gpus in SIZES:
            r, b = results.get(f"resnet50:ring:fat_tree:{variant}:{gpus}"), results.get(f"{base}:{gpus}")
            if r and b and "error" not in r and "error" not in b:
                ratios.append((gpus, r["process_s"] / b["process_s"], r["cpu_s"] / b["cpu_s"]))
        if ratios:
            worst = max(max(p, q) for _, p, q in ratios)
            text = ", ".join(f"{g:,}: {p:.2f}x wall / {q:.2f}x CPU" for g, p, q in ratios)
            lines.append(f"  {variant} within 5x of symmetric: {text} {_ok(worst <= 5)}")
    return lines


def main() -> None:
    # the children (what is timed) are told apart before argparse is imported: parsing this script's
    # options is the benchmark's cost, not simdist's (~5 ms with gettext)
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(_point(sys.argv[2])))
        return
    if sys.argv[1:] in (["--startup-child"], ["--startup-phases-child"]):
        print(json.dumps(_startup(phases=sys.argv[1] == "--startup-phases-child")))
        return
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="sizes up to 4,096 GPUs")
    parser.add_argument("--max-gpus", type=int, default=max(SIZES), help="largest size to run")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per point")
    parser.add_argument("--only", action="append", default=[], help="model:strategy:fabric:variant (repeatable)")
    parser.add_argument("--targets", action="store_true", help="only the rows and sizes issue 10's targets name")
    parser.add_argument("--ps-targets", action="store_true",
                        help="the sharded-PS rows (ResNet-50 and GPT-2 XL) at every size, against the ring's targets")
    parser.add_argument("--startup", action="store_true",
                        help="time the start-up at 512 GPUs (9 processes, 9 more by phase)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON lines too")
    parser.add_argument("--profile", help="model:strategy:fabric:variant:gpus: cProfile one point in this process")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="keep PYTHONDONTWRITEBYTECODE for the children (they compile every module each time)")
    parser.add_argument("--versus", type=Path, help="another checkout (e.g. main's): its start-up and 1,024-GPU "
                        "point against this one's, process by process in turn")
    parser.add_argument("--repeats", type=int, default=10, help="processes per checkout with --versus")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--startup-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--startup-phases-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    global KEEP_NO_BYTECODE
    KEEP_NO_BYTECODE = args.no_bytecode
    if args.child:
        print(json.dumps(_point(args.child)))
        return
    if args.startup_child or args.startup_phases_child:
        print(json.dumps(_startup(phases=args.startup_phases_child)))
        return
    if args.profile:
        import cProfile
        import pstats

        cProfile.runctx("_point(spec)", globals(), {"spec": args.profile}, "/tmp/simdist-scale.prof")
        pstats.Stats("/tmp/simdist-scale.prof").sort_stats("cumulative").print_stats(30)
        return
    if args.versus:
        print("\n".join(versus(args.versus.resolve(), args.repeats, "resnet50:ring:fat_tree:base:1024")))
        return
    startup = run_startup() if args.startup or args.targets else None
    if startup is not None:
        print(f"start-up, 512 GPUs (launch -> routes of a ring all_reduce), median of 9: {startup}", flush=True)
    if startup is not None and "error" not in startup:
        print("\n".join(startup_table(startup)), flush=True)
    if args.startup:
        print("\n".join(summary({}, startup)))
        return
    cap = min(args.max_gpus, 4096) if args.quick else args.max_gpus
    if args.targets or args.ps_targets:
        plan = [(row, tuple(g for g in sizes if g <= cap))
                for row, sizes in (TARGET_PLAN if args.targets else []) + (PS_TARGET_PLAN if args.ps_targets else [])]
    else:
        rows = [tuple(o.split(":")) for o in args.only] or MATRIX
        plan = [(row, tuple(g for g in SIZES if g <= cap)) for row in rows]
    print(f"{'model':>9} {'strategy':>12} {'fabric':>8} {'variant':>9} {'gpus':>7} {'proc_s':>8} {'cpu_s':>7} "
          f"{'sim_s':>8} "
          f"{'GiB':>7} {'events':>8} {'iter_ms':>9} {'est_ms':>8} {'est/sim':>7} {'growth':>6}")
    results: dict[str, dict] = {}
    for row, sizes in plan:
        prev = None
        for gpus in sizes:
            r = run_point(":".join(row + (str(gpus),)), args.timeout)
            results[r["spec"]] = r
            print(_row(r, prev), flush=True)
            if args.json:
                print("#", json.dumps(r), flush=True)
            if "error" in r and r["error"].startswith("timeout"):
                break  # larger sizes of this row would time out too
            prev = r
    print("\n".join(summary(results, startup) + ps_summary(results)))


if __name__ == "__main__":
    main()
