"""Predicted vs measured: per-case rows, MAPE, max error and the ranking check of `simdist validate`.

error = |predicted - measured| / measured (DESIGN.md section 4). Network-bound cases are the
collective benchmarks; DDP steps also carry compute and codec time on shared CPU cores, so they are
reported with their own aggregates (`mape_steps`) and kept out of `mape_network_bound`
(docs/validation.md says why). Point-to-point and codec probes are microbenchmarks, reported apart.
"""
from __future__ import annotations

import itertools
import statistics
from typing import Any

TIE_TOLERANCE = 0.05
DDP_STEP = "DDP step: compute + codec + communication on 2 shared CPU cores, scored apart (mape_steps; docs/validation.md)"


def _rows(rec: dict, pred: dict) -> list[dict[str, Any]]:
    res = rec["result"]
    layout = rec["layout"]
    fabric = (layout["hosts"], layout["host_rate_bps"], layout["racks"], layout.get("uplink_rate_bps"))
    out = []
    if rec["metric"] == "time_s":
        rows = pred.get("rows") or [None] * len(res["points"])
        for p, row in zip(res["points"], rows):
            size = p["size_bytes"]
            out.append({"name": f"{rec['name']}/{size / 1e6:g}MB", "metric": "time_s",
                        "predicted": None if row is None else row[1], "measured": p["median_s"],
                        "min": p["min_s"], "max": p["max_s"], "size_bytes": size,
                        "algorithm": None if row is None else row[2], "file": rec["file"],
                        "network_bound": True, "group": ["time_s", size, *fabric],
                        "out_of_envelope": None})
    else:
        step = res["step"]
        row = {"name": rec["name"], "metric": "iteration_time_s", "predicted": pred.get("iteration_time_s"),
               "measured": step["median_s"], "min": step["min_s"], "max": step["max_s"],
               "size_bytes": res.get("grad_bytes"), "algorithm": rec["case"].get("hook"), "file": rec["file"],
               "compute_measured": res["compute"]["median_s"], "network_bound": False,
               "group": ["iteration_time_s", res.get("params"), *fabric], "out_of_envelope": DDP_STEP}
        if "local" in res:  # the split: codec = local - compute, communication = step - local
            row["codec_measured"] = res["codec_s"]
            row["communication_measured"] = step["median_s"] - res["local"]["median_s"]
        if "codec_in_step_s" in res:  # the hooks' own time inside the DDP step (validation/hook_timing.py)
            row["codec_local_measured"] = row.pop("codec_measured", None)
            row["codec_measured"], row["codec_timed_in_step"] = res["codec_in_step_s"], True
        if "phases" in res:  # medians of the DDP step's own phases (MAX over ranks per step)
            ph = res["phases"]
            row["phases_measured"] = {k: ph[k]["median_s"] for k in ("forward", "backward", "optimizer")} | {
                "bucket_comm": [b["comm"]["median_s"] for b in ph["buckets"]]}
        if "bucket_bytes" in res:
            row["buckets_measured"] = res["bucket_bytes"]  # what DDP formed
        if "bucket_bytes" in pred:
            row["buckets_predicted"] = pred["bucket_bytes"]  # what simdist packed
        if pred.get("breakdown_s"):
            b = pred["breakdown_s"]
            row |= {"compute_predicted": b["compute"], "codec_predicted": b["compression"],
                    "communication_predicted": b["exposed_communication"]}
        out.append(row)
    for r in out:
        if pred.get("error"):
            r["note"] = f"simulation failed: {pred['error']}"
        elif pred.get("note"):
            r["note"] = pred["note"]
        r["error"] = None if r["predicted"] is None else abs(r["predicted"] - r["measured"]) / r["measured"]
        r["ratio"] = None if r["predicted"] is None else r["measured"] / r["predicted"]
    return out


def ranking(cases: list[dict[str, Any]], tie: float = TIE_TOLERANCE) -> list[dict[str, Any]]:
    """Per comparable group (same metric, size and fabric): the pairs whose predicted order differs from
    the measured one. Pairs predicted within `tie` of each other are not checked."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for c in cases:
        if c["predicted"] is not None:
            groups.setdefault(repr(c["group"]), []).append(c)
    out = []
    for key, members in groups.items():
        if len(members) < 2:
            continue
        wrong = []
        for a, b in itertools.combinations(members, 2):
            lo, hi = sorted((a["predicted"], b["predicted"]))
            if hi <= lo * (1 + tie):
                continue
            if (a["predicted"] < b["predicted"]) != (a["measured"] < b["measured"]):
                wrong.append([a["name"], b["name"]])
        out.append({"group": [m["name"] for m in members], "network_bound": all(m["network_bound"] for m in members),
                    "predicted_order": [m["name"] for m in sorted(members, key=lambda m: m["predicted"])],
                    "measured_order": [m["name"] for m in sorted(members, key=lambda m: m["measured"])],
                    "misordered_pairs": wrong, "ok": not wrong})
    return out


def _mape(cases: list[dict[str, Any]]) -> float | None:
    errs = [c["error"] for c in cases if c["error"] is not None]
    return statistics.fmean(errs) if errs else None


def build_report(records: list[dict], predictions: dict[str, dict]) -> dict[str, Any]:
    """The `simdist validate --json` object from measurement records and per-file predictions."""
    cases = [row for rec in records if rec["metric"] not in ("p2p", "codec")
             for row in _rows(rec, predictions.get(rec["file"], {}))]
    errs = [c["error"] for c in cases if c["error"] is not None]
    ranks = ranking(cases)
    net = [c for c in cases if c["network_bound"] and not c["out_of_envelope"]]
    steps = [c for c in cases if c["metric"] == "iteration_time_s"]
    return {"cases": cases, "mape": _mape(cases), "max_error": max(errs) if errs else None,
            "mape_steps": _mape(steps),
            "max_error_steps": max((c["error"] for c in steps if c["error"] is not None), default=None),
            "ranking_ok": all(r["ok"] for r in ranks),
            "mape_network_bound": _mape(net),
            "max_error_network_bound": max((c["error"] for c in net if c["error"] is not None), default=None),
            "ranking_ok_network_bound": all(r["ok"] for r in ranking(net)),
            "ranking": ranks,
            "excluded_from_network_bound": {c["name"]: c["out_of_envelope"] for c in cases if c["out_of_envelope"]},
            "not_predicted": sorted(c["name"] for c in cases if c["predicted"] is None),
            "p2p": [row for rec in records if rec["metric"] == "p2p"
                    for row in p2p_rows(rec, predictions.get(f"p2p:{rec['name']}", {}))],
            "codec": [row for rec in records if rec["metric"] == "codec"
                      for row in codec_rows(predictions.get(f"codec:{rec['name']}", {}))],
            "codec_in_step": codec_in_step_rows(steps)}


def codec_in_step_rows(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per DDP step with a codec: the hooks' in-step encode/decode time, measured and as simdist charged it."""
    out = []
    for c in steps:
        meas, pred = c.get("codec_measured"), c.get("codec_predicted")
        if not c.get("codec_timed_in_step") or not pred or meas is None:
            continue  # no in-step timing, or no codec in the prediction
        out.append({"name": c["name"], "hook": c["algorithm"], "measured": meas, "predicted": pred,
                    "ratio": meas / pred, "step_ratio": c["ratio"]})
    return out


def codec_rows(pred: dict) -> list[dict[str, Any]]:
    """Codec probe figures per hook (measured vs simdist's codec time; microbenchmarks, not in the MAPE)."""
    if pred.get("error"):
        return [{"name": "codec probe", "note": pred["error"], "measured": None, "predicted": None, "ratio": None}]
    return list(pred.get("rows", []))


def p2p_rows(rec: dict, pred: dict) -> list[dict[str, Any]]:
    """Point-to-point figures (kept out of the MAPE: microbenchmarks that calibrate the links, not cases)."""
    times = pred.get("times") or [None] * len(rec["result"]["points"])
    out = []
    for p, t in zip(rec["result"]["points"], times):
        out.append({"name": f"{rec['name']}/{p['pair'][0]}-{p['pair'][1]}/{p['size_bytes'] / 1e6:g}MB",
                    "pair_class": p["pair_class"], "mode": p["mode"], "size_bytes": p["size_bytes"],
                    "measured": p["median_s"], "min": p["min_s"], "max": p["max_s"], "predicted": t,
                    "measured_bandwidth_Bps": p["size_bytes"] / p["median_s"],
                    "ratio": None if t is None else p["median_s"] / t, "note": pred.get("error")})
    return out


def format_validation(report: dict[str, Any]) -> str:
    """An aligned table: case, metric, predicted and measured ms, measured/predicted, error; then aggregates."""
    from simdist.tables import format_table

    def ms(v: float | None) -> float | None:
        return None if v is None else round(v * 1e3, 2)

    rows = [[c["name"], c["metric"], ms(c["predicted"]), ms(c["measured"]),
             None if c["ratio"] is None else round(c["ratio"], 3),
             None if c["error"] is None else f"{100 * c['error']:.1f}%", "no" if not c["network_bound"] else ("excluded" if c["out_of_envelope"] else "yes")]
            for c in report["cases"]]
    table = format_table(["case", "metric", "predicted ms", "measured ms", "meas/pred", "error", "net-bound"], rows)

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.2f}%"

    tail = [f"MAPE {pct(report['mape'])}, max error {pct(report['max_error'])}, ranking "
            f"{'ok' if report['ranking_ok'] else 'WRONG'}",
            f"network-bound: MAPE {pct(report.get('mape_network_bound'))}, max error "
            f"{pct(report.get('max_error_network_bound'))}, ranking "
            f"{'ok' if report.get('ranking_ok_network_bound', True) else 'WRONG'}"]
    if report.get("mape_steps") is not None:
        tail.append(f"DDP steps: MAPE {pct(report['mape_steps'])}, max error {pct(report.get('max_error_steps'))}")
    for r in report.get("ranking", []):
        if not r["ok"]:
            tail.append("misordered: " + "; ".join(" vs ".join(p) for p in r["misordered_pairs"]))
    for name in report.get("not_predicted", []):
        tail.append(f"not predicted: {name}")
    for name, why in report.get("excluded_from_network_bound", {}).items():
        if why and not why.startswith("DDP"):
            tail.append(f"excluded from network-bound MAPE: {name}: {why.split(':')[0]}")
    p2p = report.get("p2p") or []
    if p2p:
        table += "\n\npoint-to-point (one-way; microbenchmarks, not in the MAPE)\n" + format_table(
            ["pair", "class", "mode", "predicted ms", "measured ms", "meas/pred", "Mb/s"],
            [[r["name"], r["pair_class"], r["mode"], ms(r["predicted"]), round(r["measured"] * 1e3, 3),
              None if r["ratio"] is None else round(r["ratio"], 3), round(r["measured_bandwidth_Bps"] * 8 / 1e6, 1)]
             for r in p2p])
    in_step = report.get("codec_in_step") or []
    if in_step:
        table += "\n\ncodec inside the DDP step (each hook's span minus its collectives, MAX over ranks)\n" + format_table(
            ["step", "hook", "predicted ms", "measured ms", "meas/pred", "step meas/pred"],
            [[r["name"], r["hook"], ms(r["predicted"]), ms(r["measured"]), round(r["ratio"], 3),
              None if r["step_ratio"] is None else round(r["step_ratio"], 3)] for r in in_step])
    codec = [r for r in report.get("codec") or [] if r.get("measured") is not None]
    if codec:
        table += "\n\ncodec probe (DDP on one-rank groups: encode + decode, no network; not in the MAPE)\n" + format_table(
            ["hook", "params", "predicted ms", "measured ms", "meas/pred"],
            [[r["name"], r["params"], ms(r["predicted"]), ms(r["measured"]),
              None if r["ratio"] is None else round(r["ratio"], 3)] for r in codec])
    return table + "\n" + "\n".join(tail)
