"""`simdist validate` and `simdist calibrate`: run scenario files on the harness, simulate the same files,
compare (DESIGN.md section 4), and fit calibration profiles. The CLI wraps exactly these functions.

validate: files with the same emulated layout share one EmulatedCluster and one launch (DDP cases get
their own launch, fresh processes). Each file is simulated with the profile applied and every link
rate multiplied by `rate_scale` (the same factor the emulated links get).
"""
from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Sequence

from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.calibration import apply_profile, load_profile
from simdist.io.load import load_scenario
from simdist.progress import Progress
from simdist.results.writers import atomic_write_text
from simdist.strategies.plan import DTYPE_BYTES, build_plan
from simdist.validation.bench import Launcher, run_cases
from simdist.validation.calibrate import calibrate, describe, write_profile
from simdist.validation.cases import CaseKind, codec_case, p2p_case
from simdist.validation.codec_fit import probe_rows
from simdist.validation.compare import build_report, format_validation  # noqa: F401  (re-exported for the CLI)
from simdist.validation.emulab.cluster import check_privileges
from simdist.validation.from_scenario import plan_for, scale_rates
from simdist.validation.p2p_fit import p2p_times
from simdist.validation.plot import plot_report


def _load(files: Sequence[str], rate_scale: float, reps: int = 3) -> list[tuple[str, object, object]]:
    out = []
    for f in files:
        scenario = load_scenario(f)
        out.append((str(Path(f).resolve()), scenario, plan_for(scenario, Path(f).stem, rate_scale, reps=reps)))
    return out


def measure(plans: list[tuple[str, object, object]], launcher: str, rate_scale: float,
            timeout_s: float = 300.0, workdir: str | None = None, p2p: bool = True, codec: bool = False) -> list[dict]:
    """Run every plan's cases; one record per file: {file, name, metric, case, result, layout, environment}.

    With `p2p`, every layout's launch also runs a point-to-point sweep (one pair per pair class, a few
    seconds), kept as a record with metric "p2p" named `p2p-<first file>` (what `calibrate` fits links from).
    With `codec`, a layout with DDP cases also runs the codec probe (every hook on one-rank groups, on the
    first DDP case's MLP), kept as metric "codec" named `codec-<first file>`. Off by default: codec cost
    factors come from the codec time inside the DDP steps (validation/hook_timing.py), which the probe
    mistimes; it remains a microbenchmark of every hook without a DDP launch each.
    """
    launcher = Launcher(launcher)
    if launcher is Launcher.EMULAB:
        check_privileges()
    by_layout: dict[object, list[int]] = {}
    for i, (_, _, plan) in enumerate(plans):
        by_layout.setdefault(plan.layout, []).append(i)  # type: ignore[attr-defined]
    records: list[dict | None] = [None] * len(plans)
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")

    bar = Progress(len(by_layout), label="cluster layouts measured")
    try:
        for layout, idx in by_layout.items():
            cases = [c for i in idx for c in plans[i][2].cases]  # type: ignore[attr-defined]
            pp = p2p_case(layout.hosts, layout.nodes_per_leaf) if p2p and layout.hosts >= 2 else None  # type: ignore[attr-defined]
            cases += [pp] if pp is not None else []
            ddp = [c for c in cases if c.kind is CaseKind.DDP]  # the probe runs the (first) DDP case's MLP:
            probe = codec_case(ddp[0].hidden, ddp[0].depth, ddp[0].powersgd_rank) if codec and ddp else None  # codec cost depends on shapes
            cases += [probe] if probe is not None else []
            res = run_cases(cases, launcher, layout if launcher is Launcher.EMULAB else None,  # type: ignore[arg-type]
                            world_size=layout.hosts, timeout_s=timeout_s, workdir=workdir)  # type: ignore[attr-defined]
            env = dict(res["environment"])  # type: ignore[arg-type]
            launches = env.pop("launches", [])
            env |= {k: v for k, v in (launches[0] if launches else {}).items() if k in ("torch_version", "hostname", "backend")}
            results = iter(res["cases"])  # type: ignore[arg-type]
            bar.advance()
            for i in idx:
                path, scenario, plan = plans[i]
                for case in plan.cases:  # type: ignore[attr-defined]
                    records[i] = {"file": path, "name": Path(path).stem, "metric": plan.metric,  # type: ignore[attr-defined]
                                  "case": case.to_dict(), "result": next(results), "layout": layout.describe(),  # type: ignore[attr-defined]
                                  "launcher": str(launcher), "rate_scale": rate_scale, "measured_at": stamp,
                                  "environment": env}
            first = plans[idx[0]][0]
            for extra, metric in ((pp, "p2p"), (probe, "codec")):
                if extra is not None:
                    records.append({"file": first, "name": f"{metric}-{Path(first).stem}", "metric": metric,
                                    "case": extra.to_dict(), "result": next(results), "layout": layout.describe(),  # type: ignore[attr-defined]
                                    "launcher": str(launcher), "rate_scale": rate_scale, "measured_at": stamp,
                                    "environment": env})
    finally:
        bar.close()
    return [r for r in records if r is not None]


def predict(scenario: object, profile: object | None, rate_scale: float) -> dict:
    """Simulated figures for one scenario: {"rows": [(size_bytes, time_s, algorithm)]} or {"iteration_time_s"}."""
    s = scale_rates(scenario, rate_scale)  # type: ignore[arg-type]
    if profile is not None:
        s = apply_profile(s, profile)  # type: ignore[arg-type]
    result = simulate(s)
    if result.collectives:
        factor = (lambda alg: profile.algorithm_factor(alg)) if profile is not None else (lambda alg: 1.0)  # type: ignore[attr-defined]
        return {"rows": [(r.size_bytes, r.time_s * factor(r.algorithm), r.algorithm) for r in result.collectives]}
    b = result.breakdown_s
    if b is None:
        return {"iteration_time_s": result.iteration_time_s}

    grad = DTYPE_BYTES[s.workload.grad_dtype]
    return {"iteration_time_s": result.iteration_time_s,
            "breakdown_s": {"compute": b.compute + b.optimizer, "compression": b.compression,
                            "exposed_communication": b.exposed_communication},
            "bucket_bytes": [bc.bucket.size_bytes(grad) for bc in build_plan(s).buckets]}


def _predict_codec(rec: dict, profile: object | None, rate_scale: float) -> dict:
    """{"rows": measured vs simdist's codec time per hook} for a codec probe record (profile applied)."""
    try:
        s = scale_rates(load_scenario(rec["file"]), rate_scale)
        s = apply_profile(s, profile) if profile is not None else s  # type: ignore[arg-type]
        return {"rows": probe_rows(rec, s)}
    except (ValueError, KeyError, IndexError) as err:
        return {"error": f"{type(err).__name__}: {err}"}


def _predict_p2p(rec: dict, profile: object | None, rate_scale: float) -> dict:
    """{"times": simdist's estimate per p2p point} on the record's scenario (scaled, profile applied)."""
    try:
        s = scale_rates(load_scenario(rec["file"]), rate_scale)
        s = apply_profile(s, profile) if profile is not None else s  # type: ignore[arg-type]
        return {"times": p2p_times(s, rec["result"]["points"])}
    except (ValueError, KeyError, IndexError) as err:
        return {"error": f"{type(err).__name__}: {err}"}


def validate(files: list[str], launcher: str, calibration: str | None, out: str | None,
             rate_scale: float = 1.0, records: list[dict] | None = None, codec_probe: bool = False,
             reps: int = 3) -> dict:
    """Measure `files` on `launcher` (emulab | local | torchrun), simulate them (with the profile), compare.
    Each case is timed `reps` times after one warm-up; the figure compared is the median.

    Returns {"cases": [{name, metric, predicted, measured, error, ...}], "mape", "max_error",
    "ranking_ok", ...}. With `out`: out/measurements/<file>.json (raw), out/validation.json, and
    out/predicted_vs_measured.png. `records` reuses earlier measurements instead of running the harness;
    `codec_probe` adds the one-rank codec probe to layouts with DDP cases (`measure`).
    """
    if not files:
        raise ScenarioError.bad_value("FILE", files, "at least one scenario file")
    profile = load_profile(calibration) if calibration else None
    plans = _load(files, rate_scale, reps)
    if records is None:
        records = measure(plans, launcher, rate_scale, codec=codec_probe)
    predictions = {}
    for path, scenario, _ in plans:
        try:
            predictions[path] = predict(scenario, profile, rate_scale)
        except (ValueError, KeyError, NotImplementedError) as err:  # a simulator gap: report the case unpredicted
            predictions[path] = {"error": f"{type(err).__name__}: {err}"}
    for rec in records:
        if rec["metric"] == "p2p":
            predictions[f"p2p:{rec['name']}"] = _predict_p2p(rec, profile, rate_scale)
        elif rec["metric"] == "codec":
            predictions[f"codec:{rec['name']}"] = _predict_codec(rec, profile, rate_scale)
    report = build_report(records, predictions)
    report["calibration"] = calibration
    report["launcher"] = str(launcher)
    report["rate_scale"] = rate_scale
    if out:
        o = Path(out)
        for rec in records:
            atomic_write_text(o / "measurements" / f"{rec['name']}.json", json.dumps(rec, indent=1))
        atomic_write_text(o / "validation.json", json.dumps(report, indent=1))
        plot_report(report, o / "predicted_vs_measured.png")
    return report


def calibrate_command(run_dir: str, out: str) -> str:
    """Fit a profile from `run_dir` (written by validate --out), write it to `out`; returns a summary."""
    profile = calibrate(run_dir)
    path = write_profile(profile, out)
    return f"wrote {path}\n{describe(profile)}"
