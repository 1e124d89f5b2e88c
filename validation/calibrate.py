"""`calibrate(run_dir)`: fit link latency and achieved bandwidth efficiency, per-algorithm factors and
compute efficiency from the measurements `validate(..., out=run_dir)` kept, into a CalibrationProfile.

Link fit: every point of a ring all_reduce sweep is time = k_alpha * latency + k_beta / efficiency,
where k_beta is the time at line rate with zero latency and k_alpha the time per second of per-link
latency (for a ring on one switch: k_alpha = 2(N-1) steps x 2 links, k_beta = 2(N-1)/N S / B), both
taken from simdist's own closed forms, so the fitted figures mean what the simulator means by them.
Ordinary least squares in (latency, 1/efficiency); a negative latency (the tbf burst makes small
messages fast) is clamped to 0 and the efficiency refitted.

Point-to-point sweeps (validation/p2p_fit.py) give alpha and beta per link class directly. Where both
exist, the profile takes the latency from the p2p fit (ping-pongs measure it; ring sweeps cannot
separate it from the tbf burst) and the efficiency from the ring sweep refitted at that latency; the
per-algorithm factors then come from the collective benchmarks. Every link entry's `fit` keeps both
fits with their residuals and `used` says which one gave which figure.
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

from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.calibration import CalibrationProfile, ComputeEntry, LinkCalibration, apply_profile
from simdist.io.load import load_scenario
from simdist.results.writers import atomic_write_text
from simdist.scenario import Scenario

from simdist.validation.codec_fit import fit_codecs, step_codec_row
from simdist.validation.from_scenario import scale_rates
from simdist.validation.p2p_fit import PROBE_LATENCY_S, efficiency_given_latency, fit_alpha_beta, fit_p2p_records  # noqa: F401


def _all_links(scenario: Scenario, latency_s: float, efficiency: float) -> Scenario:
    return apply_profile(scenario, CalibrationProfile(links=(LinkCalibration(latency_s=latency_s, efficiency=efficiency),)))


def coefficients(scenario: Scenario) -> list[tuple[float, float, str]]:
    """(k_alpha, k_beta, algorithm) per benchmark size, from simdist's estimate with probe link figures."""
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
    return scale_rates(load_scenario(rec["file"]), rec.get("rate_scale", 1.0))


def _link_class(s: Scenario) -> tuple[str, str]:
    link = s.cluster.node_groups[0].nic.link
    return link.name, link.transport


def _gpu_key(s: Scenario) -> str:
    g = s.cluster.node_groups[0].gpu
    return g.name if g.key == "custom" else g.key


def _link_entry(key: tuple[str, str, str | None], p2p: dict | None, sweep: list | None,
                scenarios: list[Scenario]) -> LinkCalibration:
    """One link class: latency from the p2p fit when there is one (else the collective fit), efficiency from
    the collective fit (refitted with that latency fixed) when there is one (else the p2p fit)."""
    name, transport, role = key
    fit: dict = {}
    if sweep is not None:
        coll = fit_alpha_beta(*zip(*sweep))
        coll["nominal_Bps"] = sorted({float(s.cluster.node_groups[0].nic.link.bandwidth_Bps)
                                      for s in scenarios if _link_class(s) == (name, transport)})
        fit["collective"] = coll
    if p2p is not None:
        fit["p2p"] = p2p
        latency, used_lat = p2p["model"]["latency_s"], "p2p"
    else:
        latency, used_lat = fit["collective"]["latency_s"], "collective"
    if sweep is not None:
        eff_fit = fit["collective"] if used_lat == "collective" else efficiency_given_latency(*zip(*sweep), latency)
        fit["collective_at_p2p_latency"] = eff_fit if used_lat == "p2p" else None
        efficiency, used_eff = eff_fit["efficiency"], "collective"
    else:
        efficiency, used_eff = p2p["model"]["efficiency"], "p2p"  # type: ignore[index]
    fit["used"] = {"latency_s": used_lat, "efficiency": used_eff}
    # the figures `describe` and older readers look at, from the fit that was used
    src = fit["collective"] if used_eff == "collective" and used_lat == "collective" else \
        (fit.get("collective_at_p2p_latency") or p2p["model"])  # type: ignore[index]
    fit |= {k: src[k] for k in ("points", "rms_rel_residual", "max_rel_residual")}
    if sweep is not None:
        fit["nominal_Bps"] = fit["collective"]["nominal_Bps"]
    return LinkCalibration(name, transport, role, latency, min(1.0, efficiency), fit)


def _predicted_codec_step_s(s: Scenario, base: CalibrationProfile) -> float:
    """simdist's encode + decode time in one DDP step of `s` under `base` (no codec factor)."""
    b = simulate(apply_profile(s, base), "estimate").breakdown_s
    return 0.0 if b is None else float(b.compression)


def calibrate(run_dir: str | Path) -> CalibrationProfile:
    """Fit a profile from the p2p sweeps and ring all_reduce sweeps (links: `_link_entry` says which fit
    gives what), the collective benchmarks (algorithm factors), DDP compute-only steps (compute efficiency)
    and the codec time inside DDP steps with a compressing hook (codec cost factors; codec probes only for
    methods no step measured: validation/codec_fit.py)."""
    runs = load_runs(run_dir)
    scenarios = [_scenario(r) for r in runs]
    sweeps: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for rec, s in zip(runs, scenarios):
        if rec["metric"] != "time_s" or rec["case"]["kind"] != "all_reduce":
            continue
        for (ka, kb, _), p in zip(coefficients(s), rec["result"]["points"]):
            sweeps.setdefault(_link_class(s), []).append((ka, kb, p["median_s"]))
    p2p = fit_p2p_records(*zip(*[(r, s) for r, s in zip(runs, scenarios) if r["metric"] == "p2p"])) \
        if any(r["metric"] == "p2p" for r in runs) else {}
    links = [_link_entry(key, p2p.get(key), sweeps.pop((key[0], key[1]), None) if key[2] is None else None, scenarios)
             for key in p2p]  # cross-uplink classes (role set) first: specific entries win
    links += [_link_entry((name, transport, None), None, pts, scenarios) for (name, transport), pts in sorted(sweeps.items())]
    profile = CalibrationProfile(links=tuple(links))
    algorithms: dict[str, list[float]] = {}
    compute: dict[tuple[str, str], list[float]] = {}
    for rec, s in zip(runs, scenarios):
        cal = apply_profile(s, profile)
        if rec["metric"] in ("p2p", "codec"):
            continue
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
    probes = [(r, s) for r, s in zip(runs, scenarios) if r["metric"] == "codec"]
    base = replace(profile, compute=comp)  # links and compute as the validation applies them, no codec factor
    steps = [row for r, s in zip(runs, scenarios) if r["metric"] == "iteration_time_s"
             for row in [step_codec_row(r, _predicted_codec_step_s(s, base))] if row is not None]
    gpu_key = _gpu_key(probes[0][1] if probes else scenarios[0])
    codecs = fit_codecs(probes, gpu_key, steps) if probes or steps else ()
    env = runs[0].get("environment", {})
    provenance = {"measured_at": runs[0].get("measured_at"), "fitted_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "where": env.get("hostname") or platform.node(), "launcher": runs[0].get("launcher"),
                  "torch_version": env.get("torch_version"), "run_dir": str(run_dir),
                  "files": sorted({r["file"] for r in runs}),
                  "algorithm_factor_spread": {k: [min(v), max(v)] for k, v in algorithms.items()}}
    return replace(profile, algorithms={k: statistics.median(v) for k, v in sorted(algorithms.items())},
                   compute=comp, codecs=codecs, provenance=provenance)


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
        used = f.get("used", {"latency_s": "collective", "efficiency": "collective"})
        lines.append(f"link {c.name}/{c.transport}{'/' + c.role if c.role else ''}: latency {c.latency_s * 1e3:.3f} ms "
                     f"({used['latency_s']}), efficiency {c.efficiency:.4f} ({used['efficiency']}; {f.get('points')} points, "
                     f"rms residual {100 * f.get('rms_rel_residual', math.nan):.2f} %)")
        for pl in f.get("p2p", {}).get("plain", []):
            lines.append(f"  p2p {f['p2p']['pair_class']} at {pl['nominal_Bps'] * 8 / 1e6:g} Mb/s: alpha "
                         f"{pl['alpha_s'] * 1e3:.3f} ms, {pl['bandwidth_Bps'] * 8 / 1e6:.1f} Mb/s = "
                         f"{pl['efficiency_vs_nominal']:.4f} x nominal")
    lines += [f"algorithm {k}: x{v:.4f}" for k, v in profile.algorithms.items()]
    lines += [f"compute {c.gpu} {c.dtype}: efficiency {c.efficiency:.4f}" for c in profile.compute]
    lines += [f"codec {c.method} on {c.gpu}: x{c.factor:.3f} of the roofline encode/decode ({c.fit.get('points')} points, "
              f"{str(c.fit.get('source', 'codec probe')).split(' (')[0]})"
              for c in profile.codecs]
    return "\n".join(lines)
