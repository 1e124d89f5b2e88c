"""Codec cost: simdist's predicted encode + decode time of a DDP hook on the codec probe's MLP, and the
measured / predicted factor `simdist calibrate` writes as a profile's `codecs` entry.

The probe (`validation.ddp_case.run_codec_case`) times DDP steps on one-rank groups, so a hook's cost is
local[hook] - local[none] with no network in it; the prediction is the same codec's roofline kernels
(`simdist.compression`) on the scenario's GPU for one bucket holding every gradient of the MLP.
"""
from __future__ import annotations

import statistics
from typing import Mapping

from simdist.io.calibration import CodecEntry
from simdist.scenario import CompressionMethod, CompressionSpec, Scenario
from validation.cases import PROBE_RATIO

HOOK_METHODS = {m.value: m for m in CompressionMethod if m is not CompressionMethod.NONE}  # hook name -> codec


def mlp_shapes(hidden: int, depth: int) -> list[tuple[int, ...]]:
    """Gradient shapes of `depth` x Linear(hidden, hidden) with bias, in backward order."""
    return [s for _ in range(depth) for s in ((hidden,), (hidden, hidden))]


def predicted_codec_s(scenario: Scenario, hook: str, hidden: int, depth: int, powersgd_rank: int,
                      workers: int, ratio: float = PROBE_RATIO) -> float:
    """Encode + decode seconds simdist charges `hook` for one bucket of the MLP's fp32 gradients on the
    scenario's first GPU (top-k / random-k keeping `ratio`), with the scenario's codec factor applied."""
    from simdist.compression import make_codec

    method = HOOK_METHODS[hook]
    cal = scenario.compute_calibration
    spec = CompressionSpec(method, ratio=ratio if method in (CompressionMethod.TOPK, CompressionMethod.RANDOMK) else None,
                           rank=powersgd_rank if method is CompressionMethod.POWERSGD else None)
    codec = make_codec(spec, cal.codec_cost_factor(method.value) if cal else 1.0)
    gpu = scenario.cluster.node_groups[0].gpu
    shapes = mlp_shapes(hidden, depth)
    return codec.encode_time_s(shapes, gpu, 4, workers) + codec.decode_time_s(shapes, gpu, workers, 4)


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


def fit_codecs(records: list[tuple[Mapping, Scenario]], gpu_key: str) -> tuple[CodecEntry, ...]:
    """One CodecEntry per hook: the median over probe records of measured / predicted (uncalibrated)."""
    ratios: dict[str, list[float]] = {}
    points: dict[str, list[dict]] = {}
    for rec, scenario in records:
        for row in probe_rows(rec, scenario):
            if row["ratio"] is not None and row["measured"] > 0:
                ratios.setdefault(row["hook"], []).append(row["ratio"])
                points.setdefault(row["hook"], []).append(
                    {k: row[k] for k in ("params", "measured", "predicted", "ratio")})
    return tuple(CodecEntry(gpu_key, HOOK_METHODS[h].value, statistics.median(v),
                            {"points": len(v), "values": points[h], "source": "codec probe (one-rank DDP groups)"})
                 for h, v in sorted(ratios.items()))
