"""Single-GPU compute calibration: time matmuls and every layer of catalog models, compare with simdist's
roofline, fit the compute efficiency and write a calibration profile.

`python -m simdist.validation.gpu_calibrate --gpu h200-sxm-141gb --out calibration/h200-sxm-141gb.json` on a GPU;
`--device cpu --models tiny` runs the same pipeline on the CPU in seconds (for the tests). Layers with
equal work (a transformer's identical blocks) are timed once. docs/validation.md explains the figures.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from simdist.compute import ComputeCalibration, LayerTime, layer_times, matmul_efficiency
from simdist.hardware.specs import GpuSpec
from simdist.io.calibration import CalibrationProfile
from simdist.io.calibration import ComputeEntry
from simdist.results.writers import atomic_write_text
from simdist.workload import layers as L
from simdist.workload.specs import ModelSpec
from simdist.validation.layer_proxies import ProxyPlan, build_proxy, plan_model

DTYPES = ("fp32", "fp16", "bf16")
# model key -> (batch per GPU, sequence length) when --batch / --seq are not given
MODEL_DEFAULTS: dict[str, tuple[int, int | None]] = {
    "resnet50": (64, None), "bert-large": (16, 128), "gpt2": (8, 1024), "tiny": (2, 32), "tiny-cnn": (4, None)}
DEFAULT_BATCH = 8
# (m, n, k) of the matmul sweep: square GEMMs, then skinny ones shaped like transformer layers
SWEEP: dict[str, tuple[tuple[int, int, int], ...]] = {
    "cuda": ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
             (16384, 1024, 1024), (16384, 4096, 1024), (16384, 1024, 4096), (2048, 50304, 768), (128, 8192, 8192)),
    "cpu": ((64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 64, 256), (64, 512, 128)),
}
FIT_KINDS = ("linear", "conv", "attention")  # kinds whose factor is fitted when the run has >= MIN_KIND_LAYERS
MIN_KIND_LAYERS = 3


@dataclass(frozen=True)
class ModelCase:
    """One model at the batch (and sequence length) it is timed at."""

    key: str
    batch: int
    seq_len: int | None
    model: ModelSpec


def tiny_model(key: str, seq_len: int | None = None) -> ModelSpec:
    """Catalog-free small models for CPU runs: 'tiny' (2-layer GPT, hidden 64) and 'tiny-cnn' (3 convs on 32 x 32)."""
    from simdist.workload.transformer import parametric_gpt

    if key == "tiny":
        return parametric_gpt(2, 64, 4, 512, seq_len or 32, name="tiny")
    layers, x = [], L.Shape(3, 32, 32)
    for i, (c, s) in enumerate(((16, 1), (32, 2), (64, 2))):
        spec, x = L.conv(f"c{i}.conv", x, c, 3, s, 1)
        layers += [spec, L.norm(f"c{i}.bn", x.elems, c), L.activation(f"c{i}.relu", x.elems, saves=False)]
    spec, x = L.pool("pool", x, 2, 2)
    gp, x = L.global_pool("avgpool", x)
    layers += [spec, gp, L.linear("fc", 1, x.c, 10)]
    return ModelSpec("tiny-cnn", "cnn", tuple(layers), source="simdist.validation.gpu_calibrate")


def resolve_model(key: str, batch: int | None = None, seq_len: int | None = None) -> ModelCase:
    """The model `key` (catalog or tiny) with its default batch and sequence length unless given."""
    from simdist.workload.catalog import default_seq_len, get_model

    b, s = MODEL_DEFAULTS.get(key, (DEFAULT_BATCH, None))
    if key in ("tiny", "tiny-cnn"):
        s = seq_len or s if key == "tiny" else None
        return ModelCase(key, batch or b, s, tiny_model(key, s))
    s = (seq_len or s or default_seq_len(key)) if default_seq_len(key) is not None else None
    return ModelCase(key, batch or b, s, get_model(key, s))


# ---------------------------------------------------------------------------------------------- timing

def make_timer(device: str) -> Callable[[Callable[[], Any], int, int], float]:
    """`timer(fn, warmup, reps)` -> median seconds: CUDA events on a GPU, perf_counter after a sync on the CPU."""
    import torch

    def cuda_timer(fn: Callable[[], Any], warmup: int, reps: int) -> float:
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return statistics.median(times)

    def cpu_timer(fn: Callable[[], Any], warmup: int, reps: int) -> float:
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    return cuda_timer if str(device).startswith("cuda") else cpu_timer


def torch_dtype(dtype: str) -> Any:
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]


def matmul_sweep(gpu: GpuSpec, dtype: str, device: str, shapes: Sequence[tuple[int, int, int]],
                 warmup: int = 3, reps: int = 10) -> list[dict[str, Any]]:
    """Achieved FLOP/s and fraction of the catalog peak of `gpu` for each (m, n, k) GEMM."""
    import torch

    timer, td, peak = make_timer(device), torch_dtype(dtype), gpu.flops(dtype)
    rows = []
    for m, n, k in shapes:
        a, b = torch.randn(m, k, device=device, dtype=td), torch.randn(k, n, device=device, dtype=td)
        t = timer(lambda: torch.matmul(a, b), warmup, reps)
        rows.append({"m": m, "n": n, "k": k, "time_s": t, "flops_per_s": 2.0 * m * n * k / t,
                     "efficiency": 2.0 * m * n * k / t / peak})
        del a, b
    return rows


def sweep_efficiency(rows: Sequence[dict[str, Any]]) -> float:
    """The 'large matmul' efficiency simdist means: the mean over the two largest square GEMMs of the sweep."""
    square = sorted((r for r in rows if r["m"] == r["n"] == r["k"]), key=lambda r: r["m"])[-2:] or list(rows)
    return statistics.fmean(r["efficiency"] for r in square)


def time_model(case: ModelCase, device: str, dtype: str, warmup: int = 2, reps: int = 5) -> list[dict[str, Any]]:
    """Median forward and backward seconds of every layer's proxy (equal plans timed once), in forward order."""
    import torch

    timer, td = make_timer(device), torch_dtype(dtype)
    cache: dict[ProxyPlan, dict[str, Any]] = {}
    out = []
    for plan in plan_model(case.model):
        if plan.key not in cache:
            proxy = build_proxy(plan, case.batch, device, td)
            with torch.enable_grad():
                fwd = timer(proxy.forward, warmup, reps)
                targets = proxy.grad_targets()
                bwd = 0.0
                if targets:
                    y = proxy.forward()
                    g = torch.randn_like(y)
                    bwd = timer(lambda: torch.autograd.grad(y, targets, g, retain_graph=True), warmup, reps)
                    del y, g
            cache[plan.key] = {"op": proxy.op, "exact": proxy.exact, "fwd_s": fwd, "bwd_s": bwd}
            del proxy, targets
        out.append({"name": plan.layer.name, "kind": plan.layer.kind, **cache[plan.key]})
    if str(device).startswith("cuda"):
        torch.cuda.empty_cache()
    return out


# ---------------------------------------------------------------------------------------------- comparison

def with_efficiency(gpu: GpuSpec, dtype: str, efficiency: float) -> GpuSpec:
    """`gpu` with compute_efficiency[dtype] replaced, exactly as applying a profile's compute entry does."""
    return replace(gpu, compute_efficiency={**gpu.compute_efficiency, dtype: efficiency})


def predict(case: ModelCase, gpu: GpuSpec, dtype: str, cal: ComputeCalibration | None = None) -> list[LayerTime]:
    return layer_times(case.model, gpu, case.batch, dtype, cal)


def total_s(times: Sequence[LayerTime]) -> float:
    return math.fsum(t.total_s for t in times)


def _rel(pred: float, meas: float) -> float:
    return abs(pred - meas) / meas if meas > 0 else 0.0


def compare_model(case: ModelCase, measured: Sequence[dict[str, Any]], predicted: Sequence[LayerTime]) -> dict[str, Any]:
    """Per layer kind and in total: measured and predicted forward+backward seconds and their ratio."""
    kinds: dict[str, list[float]] = {}
    for m, p in zip(measured, predicted):
        acc = kinds.setdefault(m["kind"], [0, 0.0, 0.0])
        acc[0] += 1
        acc[1] += m["fwd_s"] + m["bwd_s"]
        acc[2] += p.total_s
    meas, pred = sum(m["fwd_s"] + m["bwd_s"] for m in measured), total_s(predicted)
    layer_err = [_rel(p.total_s, m["fwd_s"] + m["bwd_s"]) for m, p in zip(measured, predicted) if m["fwd_s"] + m["bwd_s"] > 0]
    return {"model": case.key, "batch": case.batch, "seq_len": case.seq_len,
            "by_kind": {k: {"layers": n, "measured_s": a, "predicted_s": b, "ratio": a / b if b else math.nan}
                        for k, (n, a, b) in sorted(kinds.items())},
            "measured_s": meas, "predicted_s": pred, "ratio": meas / pred if pred else math.nan,
            "error": _rel(pred, meas), "layer_mape": statistics.fmean(layer_err) if layer_err else 0.0}


def _minimize_log(f: Callable[[float], float], lo: float = 1e-6, hi: float = 1.0, grid: int = 121) -> float:
    """argmin of f over [lo, hi] on a log grid, refined by golden-section search around the best point."""
    xs = [math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * i / (grid - 1)) for i in range(grid)]
    i = min(range(grid), key=lambda j: f(xs[j]))
    a, b = math.log(xs[max(i - 1, 0)]), math.log(xs[min(i + 1, grid - 1)])
    r = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        c, d = b - r * (b - a), a + r * (b - a)
        if f(math.exp(c)) <= f(math.exp(d)):
            b = d
        else:
            a = c
    best = math.exp((a + b) / 2)
    return min((best, xs[i]), key=f)


def fit_efficiency(cases: Sequence[ModelCase], measured: Sequence[Sequence[dict[str, Any]]], gpu: GpuSpec,
                   dtype: str) -> tuple[float, dict[str, Any]]:
    """The matmul efficiency (simdist's default kind factors kept) minimising the squared relative errors of
    the models' forward+backward totals; returns it with its residuals."""
    meas = [sum(m["fwd_s"] + m["bwd_s"] for m in ms) for ms in measured]

    def loss(e: float) -> float:
        g = with_efficiency(gpu, dtype, e)
        return math.fsum((total_s(predict(c, g, dtype)) / t - 1) ** 2 for c, t in zip(cases, meas))

    e = _minimize_log(loss)
    g = with_efficiency(gpu, dtype, e)
    rel = [total_s(predict(c, g, dtype)) / t - 1 for c, t in zip(cases, meas)]
    return e, {"method": "least squares of relative errors of per-model forward+backward totals",
               "points": len(rel), "rms_rel_residual": math.sqrt(statistics.fmean(r * r for r in rel)),
               "max_rel_residual": max(abs(r) for r in rel)}


def fit_kind_factors(cases: Sequence[ModelCase], measured: Sequence[Sequence[dict[str, Any]]], gpu: GpuSpec,
                     dtype: str, efficiency: float) -> dict[str, dict[str, Any]]:
    """Per kind with >= MIN_KIND_LAYERS layers in the run: the efficiency that fits that kind's layer times by
    least squares (seconds), and the factor on `efficiency` it implies (it may exceed 1: simdist caps efficiency
    x factor at 1; `capped` says the fitted kind efficiency itself exceeded 1)."""
    out = {}
    for kind in FIT_KINDS:
        rows = [(c, i, m["fwd_s"] + m["bwd_s"]) for c, ms in zip(cases, measured) for i, m in enumerate(ms)
                if m["kind"] == kind]
        if len(rows) < MIN_KIND_LAYERS:
            continue
        only = ComputeCalibration(kind_factor={kind: 1.0})

        def loss(e: float) -> float:
            g = with_efficiency(gpu, dtype, e)
            preds = {c.key: predict(c, g, dtype, only) for c in cases}
            return math.fsum((preds[c.key][i].total_s - t) ** 2 for c, i, t in rows)

        e = _minimize_log(loss)
        out[kind] = {"efficiency": min(1.0, e), "factor": min(1.0, e) / efficiency, "layers": len(rows),
                     "capped": e > 1.0}
    return out


# ---------------------------------------------------------------------------------------------- the run

def calibrate(gpu: GpuSpec, cases: Sequence[ModelCase], dtype: str, device: str, *, sweep: bool = True,
              warmup: int = 2, reps: int = 5, log: Callable[[str], None] = lambda s: None) -> tuple[CalibrationProfile, dict]:
    """Measure, compare, fit: returns the calibration profile and the full report (see docs/validation.md)."""
    import torch

    t0 = time.perf_counter()
    rows = matmul_sweep(gpu, dtype, device, SWEEP["cuda" if str(device).startswith("cuda") else "cpu"]) if sweep else []
    mm_eff = sweep_efficiency(rows) if rows else None
    log(format_sweep(rows, gpu, dtype) if rows else "matmul sweep skipped")
    measured = []
    for c in cases:
        t = time.perf_counter()
        measured.append(time_model(c, device, dtype, warmup, reps))
        log(f"timed {c.key} (batch {c.batch}{f', seq {c.seq_len}' if c.seq_len else ''}): "
            f"{len(c.model.layers)} layers in {time.perf_counter() - t:.1f} s")
    before = [compare_model(c, m, predict(c, gpu, dtype)) for c, m in zip(cases, measured)]
    eff, fit = fit_efficiency(cases, measured, gpu, dtype) if cases else (mm_eff, {"method": "matmul sweep"})
    if eff is None:
        raise ValueError("nothing to fit: no models and no matmul sweep")
    eff = min(1.0, eff)
    calibrated = with_efficiency(gpu, dtype, eff)
    after = [compare_model(c, m, predict(c, calibrated, dtype)) for c, m in zip(cases, measured)]
    kinds = fit_kind_factors(cases, measured, gpu, dtype, eff) if cases else {}
    kind_cal = ComputeCalibration(kind_factor={k: v["factor"] for k, v in kinds.items()})
    after_kinds = [compare_model(c, m, predict(c, calibrated, dtype, kind_cal)) for c, m in zip(cases, measured)]

    def mape(rs: list[dict]) -> float | None:
        return statistics.fmean(r["error"] for r in rs) if rs else None

    summary = {"mape_before": mape(before), "mape_after": mape(after), "mape_after_kind_factors": mape(after_kinds),
               "efficiency_before": matmul_efficiency(gpu, dtype), "efficiency_after": eff,
               "matmul_sweep_efficiency": mm_eff}
    provenance = {"tool": "simdist.validation.gpu_calibrate", "gpu": gpu.key, "dtype": dtype, "device": str(device),
                  "device_name": torch.cuda.get_device_name(device) if str(device).startswith("cuda") else
                  (platform.processor() or platform.machine()),
                  "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
                  "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "host": platform.node(), "models": [{"model": c.key, "batch": c.batch, "seq_len": c.seq_len} for c in cases],
                  "warmup": warmup, "reps": reps, "seconds": round(time.perf_counter() - t0, 3)}
    entry_fit = {**fit, **summary, "kind_factors": kinds,
                 "models": [{"model": b["model"], "ratio_before": b["ratio"], "ratio_after": a["ratio"]}
                            for b, a in zip(before, after)],
                 "matmul_sweep": [{k: r[k] for k in ("m", "n", "k", "efficiency")} for r in rows]}
    entry = ComputeEntry(gpu.key, dtype, eff, entry_fit, kind_factor={k: v["factor"] for k, v in kinds.items()})
    profile = CalibrationProfile(compute=(entry,), provenance=provenance)
    report = {"gpu": gpu.key, "dtype": dtype, "provenance": provenance, "summary": summary, "kind_factors": kinds,
              "matmul_sweep": rows, "before": before, "after": after, "after_kind_factors": after_kinds,
              "layers": [{"model": c.key, "layers": [{**m, **{"pred_fwd_s": p.fwd_s, "pred_bwd_s": p.bwd_s}}
                                                     for m, p in zip(ms, predict(c, gpu, dtype))]}
                         for c, ms in zip(cases, measured)]}
    return profile, report


def format_sweep(rows: Sequence[dict[str, Any]], gpu: GpuSpec, dtype: str) -> str:
    lines = [f"matmul sweep, {dtype}, catalog peak {gpu.flops(dtype) / 1e12:.1f} TFLOP/s",
             f"  {'m x n x k':>22} {'ms':>9} {'TFLOP/s':>9} {'of peak':>8}"]
    lines += [f"  {'%dx%dx%d' % (r['m'], r['n'], r['k']):>22} {r['time_s'] * 1e3:9.3f} {r['flops_per_s'] / 1e12:9.2f} "
              f"{r['efficiency']:8.3f}" for r in rows]
    return "\n".join(lines)


def format_report(report: dict[str, Any]) -> str:
    """Measured/predicted per kind and per model, before and after, and the MAPEs."""
    s = report["summary"]
    lines = []
    for b, a, k in zip(report["before"], report["after"], report["after_kind_factors"]):
        lines.append(f"{b['model']} (batch {b['batch']}): measured/predicted per kind, fwd+bwd, before calibration")
        lines.append(f"  {'kind':<11} {'layers':>6} {'measured ms':>12} {'predicted ms':>13} {'ratio':>7}")
        lines += [f"  {kind:<11} {v['layers']:6d} {v['measured_s'] * 1e3:12.3f} {v['predicted_s'] * 1e3:13.3f} {v['ratio']:7.3f}"
                  for kind, v in b["by_kind"].items()]
        lines.append(f"  {'total':<11} {'':6} {b['measured_s'] * 1e3:12.3f} {b['predicted_s'] * 1e3:13.3f} {b['ratio']:7.3f}"
                     f"   after: {a['predicted_s'] * 1e3:.3f} ms (error {a['error']:.1%}), with kind factors "
                     f"{k['predicted_s'] * 1e3:.3f} ms (error {k['error']:.1%})")
    lines.append(f"efficiency {report['gpu']} {report['dtype']}: before {s['efficiency_before']:.4f}, "
                 f"fitted {s['efficiency_after']:.4g}"
                 + (f", matmul sweep {s['matmul_sweep_efficiency']:.4g}" if s["matmul_sweep_efficiency"] else ""))
    lines += [f"kind {k}: efficiency {v['efficiency']:.4g} from {v['layers']} layers, factor {v['factor']:.3f}"
              f"{' (efficiency capped at 1)' if v['capped'] else ''}" for k, v in report["kind_factors"].items()]
    if s["mape_before"] is not None:
        lines.append(f"MAPE of model totals: before {s['mape_before']:.1%}, after {s['mape_after']:.1%}, "
                     f"after with kind factors {s['mape_after_kind_factors']:.1%}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simdist.validation.gpu_calibrate", description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", required=True, help="catalog GPU key the prediction uses (simdist catalog gpus)")
    ap.add_argument("--models", default=None, help="comma list of catalog keys or tiny/tiny-cnn "
                    "(default resnet50,bert-large,gpt2 on CUDA, tiny,tiny-cnn on CPU); 'none' = sweep only")
    ap.add_argument("--batch", type=int, default=None, help="batch per model (default: per-model table)")
    ap.add_argument("--seq", type=int, default=None, help="sequence length of sequence models")
    ap.add_argument("--dtype", choices=DTYPES, default=None, help="default fp16 on CUDA, fp32 on CPU")
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="CPU threads of torch for --device cpu (default 1: "
                    "steadier timings on a shared machine)")
    ap.add_argument("--no-sweep", action="store_true", help="skip the matmul sweep")
    ap.add_argument("--out", default=None, help="write the calibration profile here (JSON, atomically)")
    ap.add_argument("--report", default=None, help="write the full report here (JSON)")
    args = ap.parse_args(argv)
    import torch

    from simdist.io.catalog import gpus

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    catalog = gpus()
    if args.gpu not in catalog:
        print(f"error: --gpu {args.gpu!r}: expected a catalog key, one of {', '.join(catalog)}", file=sys.stderr)
        return 2
    dtype = args.dtype or ("fp16" if device == "cuda" else "fp32")
    keys = args.models or ("resnet50,bert-large,gpt2" if device == "cuda" else "tiny,tiny-cnn")
    try:
        cases = [] if keys == "none" else [resolve_model(k.strip(), args.batch, args.seq) for k in keys.split(",")]
    except (KeyError, ValueError) as err:
        print(f"error: --models {keys!r}: {err}", file=sys.stderr)
        return 2
    if device == "cuda":
        torch.backends.cudnn.benchmark = True  # as training scripts run; the warm-up absorbs the autotuning
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 here
    threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(args.threads)
    try:
        profile, report = calibrate(catalog[args.gpu], cases, dtype, device, sweep=not args.no_sweep,
                                    warmup=args.warmup, reps=args.reps, log=print)
    finally:
        torch.set_num_threads(threads)
    print(format_report(report))
    if args.out:
        atomic_write_text(Path(args.out), profile.to_json())
        print(f"profile written to {args.out}")
    if args.report:
        atomic_write_text(Path(args.report), json.dumps(report, indent=1, default=float) + "\n")
        print(f"report written to {args.report}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
