"""Point-to-point fits: alpha (latency) and beta (bandwidth) per link class from the p2p sweeps.

Two fits per pair class, both by least squares of *relative* residuals (a sweep spans 1 KB ping-pongs
and 16 MB streams, so absolute residuals would ignore the latency points):
* plain: t = alpha + S / B, end to end; B / nominal bottleneck rate is the achieved efficiency;
* model: t = k_alpha x latency + k_beta / efficiency with k_alpha, k_beta from simdist's own network
  model of one transfer between the pair's GPUs (every link probed, as the collective fit does), so
  the latency is per link and the efficiency means what the simulator means by it.
Negative latencies are clamped to 0 and the bandwidth refitted.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from simdist.errors import ScenarioError
from simdist.scenario import Scenario

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


def fit_p2p(sizes_bytes: Sequence[float], measured_s: Sequence[float]) -> dict[str, float]:
    """t = alpha + S / B by relative least squares: alpha_s (>= 0), bandwidth_Bps and residuals."""
    fit = fit_alpha_beta([1.0] * len(sizes_bytes), sizes_bytes, measured_s, relative=True)
    return {"alpha_s": fit["latency_s"], "bandwidth_Bps": fit["efficiency"], "points": fit["points"],
            "rms_rel_residual": fit["rms_rel_residual"], "max_rel_residual": fit["max_rel_residual"]}


def p2p_coefficients(scenario: Scenario, a: int, b: int, sizes_bytes: Sequence[float]) -> list[tuple[float, float]]:
    """(k_alpha, k_beta) per size of one transfer from rank a's GPU to rank b's, from simdist's estimate."""
    from simdist.collectives.schedule import CollectiveOp, Schedule, Step, Transfer
    from simdist.engine.context import build_context
    from simdist.io.calibration import CalibrationProfile, LinkCalibration, apply_profile
    from simdist.scenario import Fidelity

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
    from simdist.collectives.schedule import CollectiveOp, Schedule, Step, Transfer
    from simdist.engine.context import build_context
    from simdist.scenario import Fidelity

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
            d["rows"].append((p["size_bytes"], p["median_s"], ka, kb, nominal_Bps(rec["layout"], p["pair_class"])))
    out = {}
    for key, d in sorted(pts.items(), key=lambda kv: (kv[0][2] is None, str(kv[0]))):
        sizes, meas, ka, kb, nom = zip(*d["rows"])
        plain = []
        for rate in sorted(set(nom)):  # the plain fit is per emulated rate; the model fit spans them
            sel = [i for i, n in enumerate(nom) if n == rate]
            f = fit_p2p([sizes[i] for i in sel], [meas[i] for i in sel])
            plain.append({**f, "nominal_Bps": rate, "efficiency_vs_nominal": f["bandwidth_Bps"] / rate})
        out[key] = {"pair_class": d["pair_class"], "plain": plain, "model": fit_alpha_beta(ka, kb, meas, relative=True),
                    "sizes_bytes": list(sizes), "measured_s": list(meas)}
    return out
