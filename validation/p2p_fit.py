"""Point-to-point fits: alpha (latency) and beta (bandwidth) per link class from the p2p sweeps.

Two fits per pair class, both in two stages (`fit_two_stage`): the bandwidth is the least-squares slope
of the one-way streams (>= 4 MB; their intercept absorbs tbf's free first burst, which a single
t = alpha + S/B over all sizes would misread as bandwidth), the latency is the median of the
ping-pongs (<= 4 KB, far inside the burst) less their S/B:
* plain: t = alpha + S / B, end to end; B / nominal bottleneck rate is the achieved efficiency;
* model: t = k_alpha x latency + k_beta / efficiency with k_alpha, k_beta from simdist's own network
  model of one transfer between the pair's GPUs (every link probed, as the collective fit does), so
  the latency is per link and the efficiency means what the simulator means by it.
Negative latencies are clamped to 0.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from simdist.collectives.schedule import CollectiveOp, Schedule, Step, Transfer
from simdist.engine.context import build_context
from simdist.errors import ScenarioError
from simdist.io.calibration import CalibrationProfile, LinkCalibration, apply_profile
from simdist.scenario import Fidelity, Scenario
from simdist.validation.cases import STREAM_MIN_BYTES

PROBE_LATENCY_S = 1e-3


def fit_alpha_beta(k_alpha: Sequence[float], k_beta: Sequence[float], measured_s: Sequence[float],
                   relative: bool = False) -> dict[str, float]:
    """Least squares of measured = k_alpha * latency + k_beta / efficiency; returns latency_s, efficiency, residuals.

    `relative` weights every point by 1/measured. Residuals are relative (fit / measured - 1):
    `rms_rel_residual`, `max_rel_residual`.
    """
    a, b, m = (np.asarray(v, dtype=float) for v in (k_alpha, k_beta, measured_s))
    if len(m) < 1 or not (len(a) == len(b) == len(m)) or not np.all(m > 0):
        raise ScenarioError.bad_value("calibration points", len(m), "at least one positive time with matching coefficients")
    w = 1 / m if relative else np.ones_like(m)
    aw, bw, mw = a * w, b * w, m * w
    latency, inv_eff = 0.0, float(np.sum(bw * mw) / np.sum(bw * bw))
    if len(m) >= 2 and np.ptp(a / b) > 1e-12 * np.max(a / b, initial=1.0):
        sol, *_ = np.linalg.lstsq(np.column_stack([aw, bw]), mw, rcond=None)
        if sol[0] >= 0:
            latency, inv_eff = float(sol[0]), float(sol[1])
    rel = (a * latency + b * inv_eff) / m - 1
    return {"latency_s": latency, "efficiency": 1.0 / inv_eff, "points": int(len(m)),
            "rms_rel_residual": float(np.sqrt(np.mean(rel ** 2))), "max_rel_residual": float(np.max(np.abs(rel)))}


def efficiency_given_latency(k_alpha: Sequence[float], k_beta: Sequence[float], measured_s: Sequence[float],
                             latency_s: float) -> dict[str, float]:
    """The efficiency that fits measured = k_alpha x latency_s + k_beta / efficiency with the latency fixed."""
    a, b, m = (np.asarray(v, dtype=float) for v in (k_alpha, k_beta, measured_s))
    inv_eff = float(np.sum(b * (m - a * latency_s)) / np.sum(b * b))
    if not inv_eff > 0:
        raise ScenarioError.bad_value("calibration points", list(m), f"times above the fixed latency {latency_s} s")
    rel = (a * latency_s + b * inv_eff) / m - 1
    return {"latency_s": latency_s, "efficiency": 1.0 / inv_eff, "points": int(len(m)),
            "rms_rel_residual": float(np.sqrt(np.mean(rel ** 2))), "max_rel_residual": float(np.max(np.abs(rel)))}


def fit_two_stage(k_alpha: Sequence[float], k_beta: Sequence[float], measured_s: Sequence[float],
                  stream: Sequence[bool]) -> dict[str, float]:
    """measured = k_alpha x latency + k_beta / efficiency, fitted in two stages: 1/efficiency is the least
    squares slope of the stream points (their intercept, `stream_intercept_s`, absorbs latency and tbf's
    free burst); the latency is the median over ping-pong points of (measured - k_beta / efficiency) / k_alpha,
    clamped at 0. Without ping-pongs the latency is the stream intercept / k_alpha (clamped); with one
    stream size the slope goes through that latency. Residuals are relative, per kind of point."""
    a, b, m = (np.asarray(v, dtype=float) for v in (k_alpha, k_beta, measured_s))
    st_ = np.asarray(stream, dtype=bool)
    if not (len(a) == len(b) == len(m) == len(st_)) or not np.all(m > 0) or not np.all(a > 0) or not st_.any():
        raise ScenarioError.bad_value("p2p points", len(m), "positive times, and at least one stream point")
    intercept = None
    if len(np.unique(b[st_])) >= 2:
        slope, intercept = np.polyfit(b[st_], m[st_], 1)
        inv_eff = float(slope)
    if (~st_).any():
        latency = max(0.0, float(np.median((m[~st_] - b[~st_] * (inv_eff if intercept is not None else 0.0)) / a[~st_])))
    else:
        latency = max(0.0, float(intercept / np.mean(a[st_]))) if intercept is not None else 0.0
    if intercept is None:
        inv_eff = float(np.sum(b[st_] * (m[st_] - a[st_] * latency)) / np.sum(b[st_] ** 2))
        if (~st_).any():  # the ping-pongs' own transfer time, now that the bandwidth is known
            latency = max(0.0, float(np.median((m[~st_] - b[~st_] * inv_eff) / a[~st_])))
    if not inv_eff > 0:
        raise ScenarioError.bad_value("p2p points", list(m), "stream times that grow with the size")
    rel = (a * latency + b * inv_eff) / m - 1
    out = {"latency_s": latency, "efficiency": 1.0 / inv_eff, "points": int(len(m)),
           "stream_intercept_s": None if intercept is None else float(intercept),
           "rms_rel_residual": float(np.sqrt(np.mean(rel ** 2))), "max_rel_residual": float(np.max(np.abs(rel)))}
    for name, sel in (("stream", st_), ("pingpong", ~st_)):
        if sel.any():
            out[f"{name}_rms_rel_residual"] = float(np.sqrt(np.mean(rel[sel] ** 2)))
    return out


def fit_p2p(sizes_bytes: Sequence[float], measured_s: Sequence[float], stream: Sequence[bool] | None = None) -> dict[str, float]:
    """t = alpha + S / B (two stages, `fit_two_stage`): alpha_s, bandwidth_Bps and residuals.

    `stream` marks the one-way stream points (default: sizes >= STREAM_MIN_BYTES), the rest are ping-pongs.
    """
    flags = [s >= STREAM_MIN_BYTES for s in sizes_bytes] if stream is None else list(stream)
    fit = fit_two_stage([1.0] * len(sizes_bytes), sizes_bytes, measured_s, flags)
    out = {"alpha_s": fit.pop("latency_s"), "bandwidth_Bps": fit.pop("efficiency")}
    return out | fit


def p2p_coefficients(scenario: Scenario, a: int, b: int, sizes_bytes: Sequence[float]) -> list[tuple[float, float]]:
    """(k_alpha, k_beta) per size of one transfer from rank a's GPU to rank b's, from simdist's estimate."""
    def times(latency_s: float) -> list[float]:
        s = apply_profile(scenario, CalibrationProfile(links=(LinkCalibration(latency_s=latency_s, efficiency=1.0),)))
        ctx = build_context(s, Fidelity.ESTIMATE)
        ranks = ctx.group.ranks
        if max(a, b) >= len(ranks):
            raise ScenarioError.bad_value("p2p pair", f"{a}-{b}", f"ranks below {len(ranks)} (the scenario's GPUs)")
        return [ctx.network.schedule_time(Schedule(CollectiveOp.BROADCAST, "p2p", size, (
            (Step((Transfer(ranks[a], ranks[b], size),)),),))) for size in sizes_bytes]

    t0, t1 = times(0.0), times(PROBE_LATENCY_S)
    return [((y - x) / PROBE_LATENCY_S, x) for x, y in zip(t0, t1)]


def p2p_times(scenario: Scenario, points: Sequence[dict]) -> list[float]:
    """simdist's estimate of each p2p point (one transfer of size_bytes from pair[0]'s GPU to pair[1]'s)."""
    ranks = build_context(scenario, Fidelity.ESTIMATE).group.ranks
    net = build_context(scenario, Fidelity.ESTIMATE).network
    return [net.schedule_time(Schedule(CollectiveOp.BROADCAST, "p2p", p["size_bytes"], (
        (Step((Transfer(ranks[p["pair"][0]], ranks[p["pair"][1]], p["size_bytes"]),)),),))) for p in points]


def link_class(scenario: Scenario, pair_class: str) -> tuple[str, str, str | None]:
    """(name, transport, role) of the link that bounds a pair of `pair_class` in the emulated layout:
    one GPU per node: the NIC (same switch) or the fabric uplink (across racks); several GPUs per node:
    the intra-node link (same node) or the NIC (across nodes). Same-switch classes leave role open."""
    g = scenario.cluster.node_groups[0]
    several = g.gpus_per_node > 1
    if pair_class == "cross_uplink":
        link, role = (g.nic.link, "nic") if several else (scenario.cluster.fabric.link, "fabric")
    else:
        link, role = (g.intra_node.gpu_link, "intra_node") if several else (g.nic.link, None)
    assert link is not None
    return link.name, link.transport, role


def nominal_Bps(layout: dict[str, Any], pair_class: str) -> float:
    """The emulated bottleneck rate of a pair in bytes/s (tbf rate, before TCP framing)."""
    rate = layout["host_rate_bps"]
    if pair_class == "cross_uplink" and layout.get("uplink_rate_bps"):
        rate = min(rate, layout["uplink_rate_bps"])
    return float(rate) / 8


def fit_p2p_records(records: Sequence[dict], scenarios: Sequence[Scenario]) -> dict[tuple[str, str, str | None], dict]:
    """Per link class (name, transport, role): {'pair_class', 'plain': [fit_p2p + nominal_Bps and
    efficiency_vs_nominal, per emulated rate], 'model': fit_alpha_beta over all its points, the points}."""
    pts: dict[tuple[str, str, str | None], dict[str, Any]] = {}
    for rec, s in zip(records, scenarios):
        for p in rec["result"]["points"]:
            key = link_class(s, p["pair_class"])
            d = pts.setdefault(key, {"pair_class": p["pair_class"], "rows": []})
            (ka, kb), = p2p_coefficients(s, p["pair"][0], p["pair"][1], [p["size_bytes"]])
            d["rows"].append((p["size_bytes"], p["median_s"], ka, kb, nominal_Bps(rec["layout"], p["pair_class"]),
                              p.get("mode", "stream") == "stream"))
    out = {}
    for key, d in sorted(pts.items(), key=lambda kv: (kv[0][2] is None, str(kv[0]))):
        sizes, meas, ka, kb, nom, stream = zip(*d["rows"])
        plain = []
        for rate in sorted(set(nom)):  # the plain fit is per emulated rate; the model fit spans them
            sel = [i for i, n in enumerate(nom) if n == rate]
            f = fit_p2p([sizes[i] for i in sel], [meas[i] for i in sel], [stream[i] for i in sel])
            plain.append({**f, "nominal_Bps": rate, "efficiency_vs_nominal": f["bandwidth_Bps"] / rate})
        out[key] = {"pair_class": d["pair_class"], "plain": plain, "model": fit_two_stage(ka, kb, meas, stream),
                    "sizes_bytes": list(sizes), "measured_s": list(meas)}
    return out
