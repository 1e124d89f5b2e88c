"""Codec cost: simdist's predicted encode + decode time of a DDP hook, and the measured / predicted factor
`simdist calibrate` writes as a profile's `codecs` entry.

The factor comes from the DDP steps themselves: each DDP case times its hook's own work inside the
measured 4-rank step (`codec_in_step_s`, validation/hook_timing.py: the hook's span minus its collectives'),
and the prediction is the same step's `compression` time in simdist's breakdown (the codec's ops priced
where compression.placement runs them: the worker's GPU, or its CPU for a `vendor: cpu` rank; calibrated
links and compute, codec factor 1). The older codec probe
(`simdist.validation.ddp_case.run_codec_case`: DDP steps on one-rank groups, codec = local[hook] - local[none])
is still read for methods no DDP step measured, but it mistimes the Python hooks against the step
(int8 15-30 % slow, PowerSGD 20-25 % fast on 2 shared cores), so in-step figures win.
"""
from __future__ import annotations

import statistics
from typing import Mapping

from simdist.compression import make_codec
from simdist.compression.placement import bucket_codec_cost, codec_path
from simdist.io.calibration import CodecEntry
from simdist.scenario import CompressionMethod, CompressionSpec, Scenario
from simdist.validation.cases import PROBE_RATIO

HOOK_METHODS = {m.value: m for m in CompressionMethod if m is not CompressionMethod.NONE}  # hook name -> codec


def mlp_shapes(hidden: int, depth: int) -> list[tuple[int, ...]]:
    """Gradient shapes of `depth` x Linear(hidden, hidden) with bias, in backward order."""
    return [s for _ in range(depth) for s in ((hidden,), (hidden, hidden))]


def predicted_codec_s(scenario: Scenario, hook: str, hidden: int, depth: int, powersgd_rank: int,
                      workers: int, ratio: float = PROBE_RATIO) -> float:
    """Encode + decode seconds simdist charges `hook` for one bucket of the MLP's fp32 gradients on the
    scenario's first device (top-k / random-k keeping `ratio`), with the scenario's codec factor applied.
    Priced where the simulator runs the hook (compression.placement: the worker's GPU, or its CPU for a
    `vendor: cpu` device such as the emulated cluster's ranks), so a fitted factor divides by that baseline."""

    method = HOOK_METHODS[hook]
    cal = scenario.compute_calibration
    spec = CompressionSpec(method, ratio=ratio if method in (CompressionMethod.TOPK, CompressionMethod.RANDOMK) else None,
                           rank=powersgd_rank if method is CompressionMethod.POWERSGD else None)
    codec = make_codec(spec, cal.codec_cost_factor(method.value) if cal else 1.0)
    device = scenario.cluster.node_groups[0].gpu
    cost = bucket_codec_cost(codec, mlp_shapes(hidden, depth), device, 4, workers,
                             codec_path(method, device, is_ps=False))  # a DDP hook, never BytePS's path
    return cost.encode_s + cost.decode_s


def probe_rows(rec: Mapping, scenario: Scenario) -> list[dict]:
    """Per hook of a codec probe record: measured codec seconds and simdist's prediction on `scenario`."""
    res, case = rec["result"], rec["case"]
    workers = 1  # the probe runs each rank on its own one-rank group
    out = []
    for hook, measured in res["codec_s"].items():
        if hook not in HOOK_METHODS:
            continue
        pred = predicted_codec_s(scenario, hook, case["hidden"], case["depth"], case["powersgd_rank"], workers)
        out.append({"name": f"{rec['name']}/{hook}", "hook": hook, "params": res["params"],
                    "measured": measured, "predicted": pred, "ratio": measured / pred if pred > 0 else None,
                    "local_none_s": res["local"]["none"]["median_s"], "compute_s": res["compute"]["median_s"]})
    return out


def step_codec_row(rec: Mapping, predicted_s: float) -> dict | None:
    """A DDP step record's in-step codec figures against simdist's `predicted_s` (codec factor 1), or None
    when the step ran no codec (hook none, a codec that falls back to dense, or an older record)."""
    hook, res = rec["case"].get("hook"), rec["result"]
    if hook not in HOOK_METHODS or "codec_in_step_s" not in res or not predicted_s > 0:
        return None
    measured = float(res["codec_in_step_s"])
    return {"name": rec["name"], "hook": hook, "params": res["params"], "measured": measured,
            "predicted": predicted_s, "ratio": measured / predicted_s}


def fit_codecs(records: list[tuple[Mapping, Scenario]], gpu_key: str,
               steps: list[dict] = ()) -> tuple[CodecEntry, ...]:  # type: ignore[assignment]
    """One CodecEntry per hook: the median of measured / predicted over the in-step rows `steps`
    (`step_codec_row`); for a hook without any, over the codec probe `records` (uncalibrated prediction)."""
    ratios: dict[str, list[float]] = {}
    points: dict[str, list[dict]] = {}
    source: dict[str, str] = {}
    for row in steps:
        if row["measured"] > 0:
            ratios.setdefault(row["hook"], []).append(row["ratio"])
            points.setdefault(row["hook"], []).append({k: row[k] for k in ("name", "params", "measured", "predicted", "ratio")})
            source[row["hook"]] = "in-step (each rank's hook span minus its collectives, MAX over ranks)"
    in_step = set(ratios)
    for rec, scenario in records:
        for row in probe_rows(rec, scenario):
            if row["hook"] in in_step or row["ratio"] is None or not row["measured"] > 0:
                continue
            ratios.setdefault(row["hook"], []).append(row["ratio"])
            points.setdefault(row["hook"], []).append(
                {k: row[k] for k in ("params", "measured", "predicted", "ratio")})
            source[row["hook"]] = "codec probe (one-rank DDP groups)"
    return tuple(CodecEntry(gpu_key, HOOK_METHODS[h].value, statistics.median(v),
                            {"points": len(v), "values": points[h], "source": source[h]})
                 for h, v in sorted(ratios.items()))
