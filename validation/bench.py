"""Driver: launch one worker per emulated host (or locally, or under torchrun), wait, collect the JSON.

    python -m simdist.validation.bench --launcher emulab --hosts 4 --rate "500 Mb/s" --case all_reduce:sizes=16MB
    python -m simdist.validation.bench --launcher local --hosts 4 --case ps:servers=1,sizes=4MB
    python -m simdist.validation.bench cleanup          # remove sdt-* namespaces left by a killed run

Each DDP case gets its own launch (fresh processes); all other cases share one launch.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from enum import StrEnum
from pathlib import Path
from typing import Sequence

import simdist
from simdist.errors import ScenarioError, SimdistError
from simdist.validation.cases import Case, split_launches
from simdist.validation.emulab.cluster import EmulatedCluster
from simdist.validation.emulab.layout import EmulabLayout

# The folder holding the `simdist` package this process imported (the checkout, or site-packages for a wheel):
# workers start there with it on PYTHONPATH and run `python -m simdist.validation.worker`.
REPO_ROOT = Path(simdist.__file__).resolve().parent.parent
BASE_PORT = 29500


class Launcher(StrEnum):
    EMULAB = "emulab"  # one rank per namespace sdt-h<i>, shaped links
    LOCAL = "local"  # every rank on 127.0.0.1, no shaping: a quick smoke test
    TORCHRUN = "torchrun"  # torch.distributed.run on this machine (on a real cluster: see README)


class LaunchError(SimdistError):
    """A worker launch failed or timed out; the message carries the tail of the failing rank's log."""

    exit_code = 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kill(procs: list[subprocess.Popen]) -> None:
    """Terminate the process groups of our own workers (each started in its own session)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.05)
    for p in procs:
        if p.poll() is None:
            p.wait()


def _tail(path: Path, chars: int = 1500) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    lines = [ln for ln in text.splitlines() if "hostname of the client socket" not in ln]
    return "\n".join(lines)[-chars:]


def torchrun_argv(cases_path: str, out_path: str, nproc_per_node: int, nnodes: int = 1,
                  rdzv_endpoint: str | None = None, python: str = sys.executable,
                  extra: Sequence[str] = ()) -> list[str]:
    """The torchrun command for one launch; with `rdzv_endpoint` it is the per-node command of a real cluster."""
    argv = [python, "-m", "torch.distributed.run", f"--nnodes={nnodes}", f"--nproc-per-node={nproc_per_node}"]
    argv += ["--standalone"] if rdzv_endpoint is None else ["--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv_endpoint}"]
    return argv + ["-m", "simdist.validation.worker", "--cases", cases_path, "--out", out_path, *extra]


class _Launch:
    """Start the ranks of one launch, wait with a deadline, return the rank-0 JSON."""

    def __init__(self, launcher: Launcher, world: int, ranks_per_host: int, workdir: Path,
                 cluster: EmulatedCluster | None, timeout_s: float, python: str) -> None:
        self.launcher, self.world, self.rph = launcher, world, ranks_per_host
        self.workdir, self.cluster, self.timeout_s, self.python = workdir, cluster, timeout_s, python

    def run(self, index: int, cases: list[Case], meta: dict[str, object]) -> dict[str, object]:
        cases_path = self.workdir / f"cases{index}.json"
        out_path = self.workdir / f"result{index}.json"
        cases_path.write_text(json.dumps([c.to_dict() for c in cases]))
        worker = [self.python, "-m", "simdist.validation.worker", "--cases", str(cases_path), "--out", str(out_path),
                  "--meta", json.dumps(meta), "--timeout-s", str(self.timeout_s)]
        base_env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
                    "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        algo = cases[0].nccl_algo  # split_launches gives every case of a launch the same one
        if algo:
            base_env["NCCL_ALGO"] = algo
        procs: list[subprocess.Popen] = []
        logs: list[Path] = []
        try:
            if self.launcher is Launcher.TORCHRUN:
                log = self.workdir / f"torchrun{index}.log"
                logs.append(log)
                argv = torchrun_argv(str(cases_path), str(out_path), self.world, python=self.python,
                                     extra=["--meta", json.dumps(meta), "--timeout-s", str(self.timeout_s)])
                env = {**base_env, "GLOO_SOCKET_IFNAME": "lo"}
                procs.append(subprocess.Popen(argv, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                              start_new_session=True, cwd=REPO_ROOT))
            else:
                port = _free_port() if self.launcher is Launcher.LOCAL else BASE_PORT + index
                for rank in range(self.world):
                    host, local = divmod(rank, self.rph)
                    renv = {"RANK": str(rank), "WORLD_SIZE": str(self.world), "LOCAL_RANK": str(local),
                            "LOCAL_WORLD_SIZE": str(self.rph), "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
                    log = self.workdir / f"launch{index}-rank{rank}.log"
                    logs.append(log)
                    kw = dict(stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO_ROOT)
                    if self.cluster is None:
                        renv |= {"MASTER_ADDR": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo"}
                        procs.append(subprocess.Popen(worker, env={**base_env, **renv}, **kw))  # type: ignore[call-overload]
                    else:
                        renv |= {"MASTER_ADDR": self.cluster.layout.address(0), "GLOO_SOCKET_IFNAME": f"h{host}"}
                        renv["PYTHONPATH"] = base_env["PYTHONPATH"]
                        procs.append(self.cluster.popen(host, worker, env=renv, **kw))
            deadline = time.monotonic() + self.timeout_s
            while any(p.poll() is None for p in procs):
                if time.monotonic() > deadline or any(p.returncode not in (None, 0) for p in procs):
                    break
                time.sleep(0.1)
            failed = [i for i, p in enumerate(procs) if p.returncode not in (0, None)]
            failed += [i for i, p in enumerate(procs) if p.returncode is None]
            if failed:
                i = failed[0]
                why = "timed out" if procs[i].returncode is None else f"exited with {procs[i].returncode}"
                raise LaunchError(f"launch {index} ({', '.join(c.label for c in cases)}): rank {i} {why} "
                                  f"after {self.timeout_s if procs[i].returncode is None else 'start'}"
                                  f"\n{_tail(logs[i])}")
        finally:
            _kill(procs)
        return json.loads(out_path.read_text())


def run_cases(cases: Sequence[Case], launcher: Launcher | str = Launcher.LOCAL, layout: EmulabLayout | None = None,
              world_size: int | None = None, ranks_per_host: int = 1, timeout_s: float = 300.0,
              workdir: str | None = None, python: str = sys.executable) -> dict[str, object]:
    """Measure `cases`; returns {"environment": {...}, "cases": [per-case results in order]}.

    emulab needs `layout` (it builds the EmulatedCluster for the duration); local and torchrun run
    `world_size` ranks (default: layout.hosts x ranks_per_host, else 4) on this machine.
    """
    launcher = Launcher(launcher)
    if launcher is Launcher.EMULAB and layout is None:
        raise ValueError("the emulab launcher needs a layout")
    if launcher is not Launcher.TORCHRUN and any(c.nccl_algo == "Tree" for c in cases):
        raise ScenarioError.bad_value(
            "communication.strategy", "tree", f"ring with --launcher {launcher} (gloo has no tree all_reduce): set "
            "communication.backend: gloo, whose all_reduce simdist models as the ring gloo runs, or validate "
            "the tree on GPUs (--launcher torchrun, NCCL_ALGO=Tree)")
    world = world_size or ((layout.hosts * ranks_per_host) if layout is not None else 4)
    if launcher is Launcher.EMULAB:
        world = layout.hosts * ranks_per_host  # type: ignore[union-attr]
    meta: dict[str, object] = {"launcher": str(launcher), "ranks_per_host": ranks_per_host}
    if launcher is Launcher.EMULAB:
        meta["emulab"] = layout.describe()  # type: ignore[union-attr]
    order = {id(c): i for i, c in enumerate(cases)}
    results: dict[int, dict[str, object]] = {}
    envs = []
    with ExitStack() as stack:
        wd = Path(workdir) if workdir else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sdt-bench-")))
        wd.mkdir(parents=True, exist_ok=True)
        cluster = stack.enter_context(EmulatedCluster(layout)) if launcher is Launcher.EMULAB else None  # type: ignore[arg-type]
        launch = _Launch(launcher, world, ranks_per_host, wd, cluster, timeout_s, python)
        for index, group in enumerate(split_launches(list(cases))):
            data = launch.run(index, group, meta)
            envs.append(data["environment"])
            for case, res in zip(group, data["cases"]):  # type: ignore[arg-type]
                results[order[id(case)]] = res
    return {"environment": {**meta, "world_size": world, "launches": envs},
            "cases": [results[i] for i in sorted(results)]}


def _layout_from_args(args: "object") -> EmulabLayout | None:
    from simdist.units import parse_bandwidth
    from simdist.validation.emulab.layout import from_scenario

    if args.scenario:
        from simdist.io.load import load_scenario  # lazily: io/ is optional for plain-parameter runs
        return from_scenario(load_scenario(args.scenario, list(args.set)), rate_scale=args.rate_scale)
    if args.hosts is None:
        return None
    rate = parse_bandwidth(args.rate, "--rate") * 8
    up = parse_bandwidth(args.uplink_rate, "--uplink-rate") * 8 if args.uplink_rate else None
    return EmulabLayout(args.hosts, rate, nodes_per_leaf=args.nodes_per_leaf,
                        oversubscription=args.oversubscription, uplink_rate_bps=up)


def _print_table(layout: EmulabLayout | None, result: dict[str, object]) -> None:
    from simdist.validation.predict import add_predictions

    rows = add_predictions(layout, result) if layout is not None else [
        {"label": r["label"], "size_bytes": p["size_bytes"], "measured_s": p["median_s"], "min_s": p["min_s"],
         "max_s": p["max_s"], "predicted_s": None, "ratio": None}
        for r in result["cases"] for p in r["points"]]  # type: ignore[union-attr]
    print(f"{'case':<16} {'MB':>8} {'median ms':>10} {'min ms':>9} {'max ms':>9} {'pred ms':>9} {'ratio':>7}")
    for r in rows:
        pred = "-" if r["predicted_s"] is None else f"{r['predicted_s'] * 1e3:9.2f}"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:7.3f}"
        print(f"{r['label']:<16} {r['size_bytes'] / 1e6:8.2f} {r['measured_s'] * 1e3:10.2f} {r['min_s'] * 1e3:9.2f} "
              f"{r['max_s'] * 1e3:9.2f} {pred:>9} {ratio:>7}")


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from simdist.validation.cases import parse_case

    ap = argparse.ArgumentParser(prog="python -m simdist.validation.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("verb", nargs="?", default="run", choices=["run", "cleanup"])
    ap.add_argument("--launcher", default="local", choices=[m.value for m in Launcher])
    ap.add_argument("--hosts", type=int, help="emulated hosts (one rank each)")
    ap.add_argument("--rate", default="1 Gb/s", help="host link rate, e.g. '500 Mb/s'")
    ap.add_argument("--nodes-per-leaf", type=int, help="hosts per rack; omit for a single switch")
    ap.add_argument("--oversubscription", type=float, default=1.0)
    ap.add_argument("--uplink-rate", help="rack uplink rate (default nodes_per_leaf x rate / oversubscription)")
    ap.add_argument("--scenario", help="take the cluster from a simdist scenario file")
    ap.add_argument("--set", action="append", default=[], help="scenario override key=value")
    ap.add_argument("--rate-scale", type=float, default=1.0, help="multiply the scenario's NIC rate")
    ap.add_argument("--world-size", type=int, help="ranks for local/torchrun (default hosts, else 4)")
    ap.add_argument("--ranks-per-host", type=int, default=1)
    ap.add_argument("--case", action="append", default=[], help="e.g. all_reduce:sizes=4MB/16MB,reps=5")
    ap.add_argument("--cases-file", help="JSON list of case dicts")
    ap.add_argument("--timeout-s", type=float, default=300.0)
    ap.add_argument("--out", help="write the result JSON here")
    ap.add_argument("--json", action="store_true", help="print the result JSON instead of a table")
    args = ap.parse_args(argv)
    try:
        if args.verb == "cleanup":
            from simdist.validation.emulab.cluster import cleanup_stale
            removed = cleanup_stale()
            print(f"removed {len(removed)} namespaces" + (f": {' '.join(removed)}" if removed else ""))
            return 0
        from simdist.validation.cases import case_from_dict
        cases = [parse_case(c) for c in args.case]
        if args.cases_file:
            cases += [case_from_dict(d, f"cases[{i}]") for i, d in enumerate(json.loads(Path(args.cases_file).read_text()))]
        if not cases:
            ap.error("give at least one --case or --cases-file")
        layout = _layout_from_args(args)
        if args.launcher == Launcher.EMULAB:
            from simdist.validation.emulab.cluster import check_privileges
            check_privileges()
            if layout is None:
                ap.error("--launcher emulab needs --hosts or --scenario")
        result = run_cases(cases, args.launcher, layout, args.world_size, args.ranks_per_host, args.timeout_s)
    except SimdistError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted; the emulated cluster was torn down", file=sys.stderr)
        return 130
    if args.out:
        tmp = f"{args.out}.tmp{os.getpid()}"
        Path(tmp).write_text(json.dumps(result, indent=1))
        os.replace(tmp, args.out)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        _print_table(layout if args.launcher == Launcher.EMULAB else None, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
