"""`calibrate(run_dir)`: fit link latency and achieved bandwidth efficiency, per-algorithm factors and
compute efficiency from the measurements `validate(..., out=run_dir)` kept, into a CalibrationProfile.

Link fit: every point of a ring all_reduce sweep is time = k_alpha * latency + k_beta / efficiency,
where k_beta is the time at line rate with zero latency and k_alpha the time per second of per-link
latency (for a ring on one switch: k_alpha = 2(N-1) steps x 2 links, k_beta = 2(N-1)/N S / B), both
taken from simdist's own closed forms, so the fitted figures mean what the simulator means by them.
Ordinary least squares in (latency, 1/efficiency); a negative latency (the tbf burst makes small
messages fast) is clamped to 0 and the efficiency refitted.
"""
from __future__ import annotations

import datetime
import json
import math
import platform
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import numpy as np

from simdist.errors import ScenarioError
from simdist.io.calibration import CalibrationProfile, ComputeEntry, LinkCalibration
from simdist.results.writers import atomic_write_text
from simdist.scenario import Scenario

PROBE_LATENCY_S = 1e-3


def fit_alpha_beta(k_alpha: Sequence[float], k_beta: Sequence[float], measured_s: Sequence[float]) -> dict[str, float]:
    """Least squares of measured = k_alpha * latency + k_beta / efficiency; returns latency_s, efficiency, residuals.

    Residuals are relative (fit / measured - 1): `rms_rel_residual`, `max_rel_residual`.
    """
    a, b, m = (np.asarray(v, dtype=float) for v in (k_alpha, k_beta, measured_s))
    if len(m) < 1 or not (len(a) == len(b) == len(m)):
        raise ScenarioError.bad_value("calibration points", len(m), "at least one point with matching coefficients")
    latency, inv_eff = 0.0, float(np.sum(b * m) / np.sum(b * b))
    if len(m) >= 2 and np.ptp(a / b) > 1e-12 * np.max(a / b, initial=1.0):
        sol, *_ = np.linalg.lstsq(np.column_stack([a, b]), m, rcond=None)
        if sol[0] >= 0:
            latency, inv_eff = float(sol[0]), float(sol[1])
    fit = a * latency + b * inv_eff
    rel = fit / m - 1
    return {"latency_s": latency, "efficiency": 1.0 / inv_eff, "points": int(len(m)),
            "rms_rel_residual": float(np.sqrt(np.mean(rel ** 2))), "max_rel_residual": float(np.max(np.abs(rel)))}


def _all_links(scenario: Scenario, latency_s: float, efficiency: float) -> Scenario:
    from simdist.io.calibration import apply_profile

    return apply_profile(scenario, CalibrationProfile(links=(LinkCalibration(latency_s=latency_s, efficiency=efficiency),)))


def coefficients(scenario: Scenario) -> list[tuple[float, float, str]]:
    """(k_alpha, k_beta, algorithm) per benchmark size, from simdist's estimate with probe link figures."""
    from simdist.engine.simulation import simulate

    t0 = simulate(_all_links(scenario, 0.0, 1.0), "estimate").collectives or ()
    t1 = simulate(_all_links(scenario, PROBE_LATENCY_S, 1.0), "estimate").collectives or ()
    return [((r1.time_s - r0.time_s) / PROBE_LATENCY_S, float(r0.time_s), r0.algorithm) for r0, r1 in zip(t0, t1)]


def load_runs(run_dir: str | Path) -> list[dict]:
    """The measurement records `validate(..., out=run_dir)` wrote (run_dir/measurements/*.json)."""
    files = sorted(Path(run_dir).glob("measurements/*.json"))
    if not files:
        raise ScenarioError.bad_value("RUN_DIR", str(run_dir), "a folder written by `simdist validate --out` "
                                      "(with measurements/*.json)")
    return [json.loads(f.read_text()) for f in files]


def _scenario(rec: dict) -> Scenario:
    from simdist.io.load import load_scenario
    from validation.from_scenario import scale_rates

    return scale_rates(load_scenario(rec["file"]), rec.get("rate_scale", 1.0))


def _link_class(s: Scenario) -> tuple[str, str]:
    link = s.cluster.node_groups[0].nic.link
    return link.name, link.transport


def _gpu_key(s: Scenario) -> str:
    g = s.cluster.node_groups[0].gpu
    return g.name if g.key == "custom" else g.key


def calibrate(run_dir: str | Path) -> CalibrationProfile:
    """Fit a profile from the ring all_reduce sweeps (links), other benchmarks (algorithm factors) and
    DDP compute-only steps (compute efficiency) found in `run_dir`."""
    from simdist.engine.simulation import simulate
    from simdist.io.calibration import apply_profile

    runs = load_runs(run_dir)
    scenarios = [_scenario(r) for r in runs]
    sweeps: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for rec, s in zip(runs, scenarios):
        if rec["metric"] != "time_s" or rec["case"]["kind"] != "all_reduce":
            continue
        for (ka, kb, _), p in zip(coefficients(s), rec["result"]["points"]):
            sweeps.setdefault(_link_class(s), []).append((ka, kb, p["median_s"]))
    links = []
    for (name, transport), pts in sorted(sweeps.items()):
        fit = fit_alpha_beta(*zip(*pts))
        nominal = {float(s.cluster.node_groups[0].nic.link.bandwidth_Bps) for s in scenarios if _link_class(s) == (name, transport)}
        fit["nominal_Bps"] = sorted(nominal)
        links.append(LinkCalibration(name, transport, None, fit["latency_s"], min(1.0, fit["efficiency"]), fit))
    profile = CalibrationProfile(links=tuple(links))
    algorithms: dict[str, list[float]] = {}
    compute: dict[tuple[str, str], list[float]] = {}
    for rec, s in zip(runs, scenarios):
        cal = apply_profile(s, profile)
        if rec["metric"] == "time_s":
            for row, p in zip(simulate(cal, "estimate").collectives or (), rec["result"]["points"]):
                algorithms.setdefault(row.algorithm, []).append(p["median_s"] / row.time_s)
        elif "compute" in rec["result"]:
            predicted = simulate(cal, "estimate").breakdown_s.compute
            gpu = cal.cluster.node_groups[0].gpu
            dtype = cal.workload.precision.value
            old = gpu.compute_efficiency.get(dtype, 1.0)
            compute.setdefault((_gpu_key(s), dtype), []).append(old * predicted / rec["result"]["compute"]["median_s"])
    comp = tuple(ComputeEntry(g, d, min(1.0, statistics.median(v)), {"points": len(v), "values": v})
                 for (g, d), v in sorted(compute.items()))
    env = runs[0].get("environment", {})
    provenance = {"measured_at": runs[0].get("measured_at"), "fitted_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "where": env.get("hostname") or platform.node(), "launcher": runs[0].get("launcher"),
                  "torch_version": env.get("torch_version"), "run_dir": str(run_dir),
                  "files": sorted({r["file"] for r in runs}),
                  "algorithm_factor_spread": {k: [min(v), max(v)] for k, v in algorithms.items()}}
    return replace(profile, algorithms={k: statistics.median(v) for k, v in sorted(algorithms.items())},
                   compute=comp, provenance=provenance)


def write_profile(profile: CalibrationProfile, path: str | Path) -> Path:
    """Write `profile` as JSON, atomically (temp file + rename)."""
    p = Path(path)
    atomic_write_text(p, profile.to_json())
    return p


def describe(profile: CalibrationProfile) -> str:
    """A short human summary of a profile (what `simdist calibrate` prints)."""
    lines = []
    for c in profile.links:
        f = c.fit
        lines.append(f"link {c.name}/{c.transport}: latency {c.latency_s * 1e3:.3f} ms, efficiency {c.efficiency:.4f} "
                     f"({f.get('points')} points, rms residual {100 * f.get('rms_rel_residual', math.nan):.2f} %)")
    lines += [f"algorithm {k}: x{v:.4f}" for k, v in profile.algorithms.items()]
    lines += [f"compute {c.gpu} {c.dtype}: efficiency {c.efficiency:.4f}" for c in profile.compute]
    return "\n".join(lines)
