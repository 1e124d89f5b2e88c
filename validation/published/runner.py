"""Predict every published case with the current simulator, uncalibrated, and compare with what was measured.

The report is DESIGN.md section 4's validate object (`cases`, `mape`, `max_error`, `ranking_ok`) plus
`out_of_sample_mape`, the fitting subset's name, per-category errors and the pairs whose order came out
wrong. A case whose scenario fails to load or run is a row with its `failure`, never a crash.
"""
from __future__ import annotations

import itertools
import math
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from simdist.engine.simulation import simulate
from simdist.io.load import load_scenario
from simdist.tables import format_table
from simdist.validation.published.cases import CASES_FILE, Metric, PublishedCase, ScenarioRef, load_cases
from simdist.validation.published.eta import SHARES, work_shares

TIE = 0.02   # measured values within 2 % of each other (or a ratio within 2 % of 1) have no order to get right


def _run(ref: ScenarioRef, extra: Sequence[str] = ()) -> dict:
    return simulate(load_scenario(ref.file, [*ref.overrides, *extra])).to_dict()


def predict(case: PublishedCase, run: Callable[[ScenarioRef, Sequence[str]], dict] = _run) -> float:
    """simdist's value of the case's metric (raises whatever loading or simulating the scenario raises)."""
    if case.metric is Metric.BUSBW_GBPS:
        rows = run(case.scenario, [f"workload.benchmark.sizes=['{case.size}']"])["collectives"] or []
        if len(rows) != 1:
            raise ValueError(f"expected one collective row at {case.size}, got {len(rows)}")
        return float(rows[0]["busbw_GBps"])
    if case.metric is Metric.SCALING_EFFICIENCY and case.baseline is not None:
        return _weak_scaling(run(case.scenario, []), run(case.baseline, []))
    if case.metric is Metric.SCALING_EFFICIENCY:
        eff = run(case.scenario, [])["scaling_efficiency"]
        if eff is None:
            raise ValueError("the scenario reports no scaling_efficiency (is it a training workload?)")
        return float(eff)
    if case.metric is Metric.TFLOPS_PER_GPU:
        out = run(case.scenario, [])
        if out.get("achieved_tflops_per_gpu") is None:
            raise ValueError("the scenario reports no achieved_tflops_per_gpu (is it a model-parallel run?)")
        return float(out["achieved_tflops_per_gpu"])
    per_gpu = {Metric.TOKENS_PER_S_PER_GPU: ("tokens_per_s", "a transformer training workload"),
               Metric.SAMPLES_PER_S_PER_GPU: ("samples_per_s", "a training workload")}
    if case.metric in per_gpu:
        key, what = per_gpu[case.metric]
        result = run(case.scenario, [])
        value = (result["throughput"] or {}).get(key)
        if value is None:
            raise ValueError(f"the scenario reports no {key} (is it {what}?)")
        return float(value) / float(result["gpus"])
    assert case.baseline is not None
    return _throughput_ratio(run(case.scenario, []), run(case.baseline, []))


def _throughput_ratio(result: dict, baseline: dict) -> float:
    """samples/s of a run over its baseline's."""
    return float(result["throughput"]["samples_per_s"]) / float(baseline["throughput"]["samples_per_s"])


def _weak_scaling(result: dict, baseline: dict) -> float:
    """Scaling efficiency against a smaller run: the throughput ratio over the GPU-count ratio (a source's
    'weak scaling' column divided by the number of nodes or GPUs)."""
    if result["gpus"] <= baseline["gpus"]:
        raise ValueError(f"the scenario runs {result['gpus']} GPUs, the baseline {baseline['gpus']}: a scaling "
                         "efficiency needs the baseline on fewer GPUs")
    return _throughput_ratio(result, baseline) / (result["gpus"] / baseline["gpus"])


def _row(case: PublishedCase, run: Callable) -> dict:
    row: dict[str, Any] = {"name": case.name, "metric": case.metric.value, "category": case.category,
                           "measured": case.measured, "predicted": None, "error": None, "ratio": None,
                           "group": case.group, "tags": list(case.tags), "source": case.source_text(),
                           "scenario": case.scenario.describe(), "failure": None}
    if case.baseline is not None:
        row["baseline"] = case.baseline.describe()
    try:
        predicted = predict(case, run)
        if not math.isfinite(predicted) or predicted <= 0:
            raise ValueError(f"predicted {predicted!r}, not a positive number")
    except Exception as exc:  # noqa: BLE001 - a failing case is reported as a row, the suite goes on
        row["failure"] = f"{type(exc).__name__}: {exc}"
        return row
    row.update(predicted=predicted, error=abs(predicted - case.measured) / case.measured,
               ratio=case.measured / predicted)
    if case.anchor is not None:  # the same case with the source's single-GPU throughput as the compute anchor
        anchor = f"workload.single_gpu_throughput={case.anchor!r}"
        try:
            value = predict(case, lambda ref, extra: run(ref, [*extra, anchor]))
            row.update(anchored_predicted=value, anchored_error=abs(value - case.measured) / case.measured)
        except Exception as exc:  # noqa: BLE001 - reported, the plain figure stands
            row["anchored_failure"] = f"{type(exc).__name__}: {exc}"
    if case.reason and row["error"] > 0.25:
        row["reason"] = case.reason
    return row


def _ordered(a: float, b: float) -> int:
    """+1 if a > b, -1 if a < b, 0 when within TIE of each other."""
    if abs(a - b) <= TIE * max(abs(a), abs(b)):
        return 0
    return 1 if a > b else -1


RATIO_PAIR = "ratio_vs_baseline"  # a throughput_ratio case: which of its two runs (same hardware) is faster
GROUP_PAIR = "within_group"  # two cases of one group and metric: which has the larger figure


def _ratio_pairs(rows: list[dict]) -> list[dict]:
    """The ratio cases whose measured ratio has an order (outside TIE of 1)."""
    return [r for r in rows if r["metric"] == Metric.THROUGHPUT_RATIO.value and _ordered(r["measured"], 1.0) != 0]


def ranking(rows: list[dict]) -> tuple[int, list[dict]]:
    """Pairs checked and those ordered wrong: every ratio case against 1 (kind RATIO_PAIR: the faster of a
    same-hardware pair), every same-group pair of one metric (kind GROUP_PAIR)."""
    checked, wrong = 0, []
    ok_rows = [r for r in rows if r["predicted"] is not None]
    for r in _ratio_pairs(ok_rows):
        checked += 1
        if _ordered(r["predicted"], 1.0) != _ordered(r["measured"], 1.0):
            wrong.append({"pair": [r["name"], "baseline"], "kind": RATIO_PAIR, "category": r.get("category"),
                          "measured": r["measured"], "predicted": r["predicted"]})
    for a, b in itertools.combinations(ok_rows, 2):
        if not a["group"] or a["group"] != b["group"] or a["metric"] != b["metric"]:
            continue
        truth = _ordered(a["measured"], b["measured"])
        if truth == 0:
            continue
        checked += 1
        if _ordered(a["predicted"], b["predicted"]) != truth:
            wrong.append({"pair": [a["name"], b["name"]], "kind": GROUP_PAIR, "category": a.get("category"),
                          "measured": [a["measured"], b["measured"]],
                          "predicted": [a["predicted"], b["predicted"]]})
    return checked, wrong


def ranking_summary(rows: list[dict]) -> dict:
    """The ranking object: pairs checked, those misordered, and both counted per kind of pair."""
    checked, wrong = ranking(rows)
    ratio_checked = len(_ratio_pairs([r for r in rows if r["predicted"] is not None]))
    by_kind = {kind: {"pairs_checked": n, "misordered": sum(w["kind"] == kind for w in wrong)}
               for kind, n in ((RATIO_PAIR, ratio_checked), (GROUP_PAIR, checked - ratio_checked))}
    return {"pairs_checked": checked, "misordered": wrong, "by_kind": by_kind}


def _mape(rows: list[dict]) -> float | None:
    errs = [r["error"] for r in rows if r["error"] is not None]
    return sum(errs) / len(errs) if errs else None


def _grouped(rows: list[dict], key: str, fit_tag: str = "fit") -> dict:
    """MAPE, max error, cases within 25 % and failures per value of `key` (category or metric), and the
    MAPE of that group's cases outside the fitting subset (`out_of_sample_mape`, None when all are in it)."""
    out = {}
    for value in sorted({r[key] for r in rows}):
        mine = [r for r in rows if r[key] == value]
        errs = [r["error"] for r in mine if r["error"] is not None]
        out[value] = {"cases": len(mine), "mape": _mape(mine), "max_error": max(errs) if errs else None,
                      "within_25pct": sum(e <= 0.25 for e in errs), "failed": len(mine) - len(errs),
                      "out_of_sample_mape": _mape([r for r in mine if fit_tag not in r["tags"]]),
                      "fitted_cases": sum(fit_tag in r["tags"] for r in mine)}
    return out


def anchored_summary(rows: list[dict]) -> dict:
    """The anchored figures (workload.single_gpu_throughput = the source's own single-GPU throughput) beside the
    plain ones: MAPE over the anchored cases both ways, scaling efficiency with every anchor that exists applied,
    and the pairs misordered then."""
    mine = [r for r in rows if r.get("anchored_error") is not None]
    swapped = [dict(r, predicted=r["anchored_predicted"], error=r["anchored_error"]) if r in mine else r
               for r in rows]
    scaling = [r for r in swapped if r["metric"] == Metric.SCALING_EFFICIENCY.value]
    return {"cases": [r["name"] for r in mine], "mape": _mape([dict(r, error=r["anchored_error"]) for r in mine]),
            "unanchored_mape": _mape(mine), "scaling_efficiency_mape": _mape(scaling),
            "ranking": ranking_summary(swapped),
            "failed": [r["name"] for r in rows if r.get("anchored_failure")]}


def perfect_scaling_summary(rows: list[dict]) -> dict:
    """The trivial predictor beside simdist on the scaling-efficiency cases: the MAPE of predicting 1.0 (perfect
    linear scaling) for each of them, so that a scaling MAPE is read against what no model at all would score."""
    mine = [r for r in rows if r["metric"] == Metric.SCALING_EFFICIENCY.value and r["error"] is not None]
    return {"cases": len(mine), "mape": _mape(mine),
            "perfect_scaling_mape": _mape([dict(r, error=abs(1.0 - r["measured"]) / r["measured"]) for r in mine])}


def _once(run: Callable) -> Callable:
    """`run` with each distinct scenario (file, overrides, extra) simulated once per suite: simulation is
    deterministic, and the LLM tables repeat a layout across releases (one 405B layout is six rows)."""
    results: dict = {}

    def once(ref: ScenarioRef, extra: Sequence[str] = ()) -> dict:
        key = (ref.file, ref.overrides, tuple(extra))
        if key not in results:
            results[key] = run(ref, extra)
        return results[key]
    return once


def selected(cases: Sequence[PublishedCase], categories: Sequence[str] | None) -> list[PublishedCase]:
    """The cases of the named categories (all of them for None); a name no case has is a ValueError that lists
    the suite's categories."""
    if categories is None:
        return list(cases)
    known = sorted({c.category for c in cases})
    unknown = sorted(set(categories) - set(known))
    if unknown:
        raise ValueError(f"no published case has category {', '.join(unknown)}; the categories are {', '.join(known)}")
    return [c for c in cases if c.category in set(categories)]


def run_suite(path: str | Path = CASES_FILE, run: Callable = _run, categories: Sequence[str] | None = None) -> dict:
    """The validate object for every case in the data file, or for the cases of `categories` only (the LLM
    tables' largest layouts take most of the whole suite's few CPU-minutes)."""
    start = time.perf_counter()
    data = load_cases(path)
    cases = selected(data.cases, categories)
    run = _once(run)
    from simdist.progress import Progress

    shares = work_shares(cases)  # the bar counts work, not cases: they differ 100-fold (eta.py)
    bar = Progress(SHARES, label="of the suite's work")
    rows = []
    try:
        for i, (case, share) in enumerate(zip(cases, shares), start=1):
            rows.append(_row(case, run))
            bar.note = f"case {i}/{len(cases)}"
            bar.advance(share)
    finally:
        bar.close()
    done = [r for r in rows if r["error"] is not None]
    fit = [r for r in rows if data.fit_subset in r["tags"]]
    held = [r for r in rows if data.fit_subset not in r["tags"]]
    rank = ranking_summary(rows)
    by_cat = _grouped(rows, "category", data.fit_subset)
    return {
        "suite": "published", "data": str(data.path), "fidelity": "scenario's run.fidelity (simulate), uncalibrated",
        "categories": None if categories is None else sorted(set(categories)),
        "cases": rows,
        "mape": _mape(rows),
        "max_error": max((r["error"] for r in done), default=None),
        "ranking_ok": not rank["misordered"],
        "out_of_sample_mape": _mape(held),
        "fitting_subset": {"name": data.fit_subset, "cases": [r["name"] for r in fit], "fitted": data.fitted,
                           "in_sample_mape": _mape(fit)},
        "by_category": by_cat,
        "by_metric": _grouped(rows, "metric", data.fit_subset),
        "ranking": rank,
        "failed": [r["name"] for r in rows if r["failure"]],
        "unexplained": [r["name"] for r in done if r["error"] > 0.25 and not r.get("reason")],
        "within_25pct": sum(r["error"] <= 0.25 for r in done),
        "anchored": anchored_summary(rows),
        "scaling_vs_perfect": perfect_scaling_summary(rows),
        "reserved_sources_checked": data.reserved_sources_checked,
        "wall_s": time.perf_counter() - start,
    }


def _fmt(v: float | None, spec: str = ".3g") -> str:
    return "-" if v is None else format(v, spec)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def _by_kind(rank: dict) -> str:
    k = rank.get("by_kind", {})
    ratio, group = k.get(RATIO_PAIR, {}), k.get(GROUP_PAIR, {})
    return (f"the faster of a same-hardware pair: {ratio.get('misordered', 0)} of {ratio.get('pairs_checked', 0)} "
            f"wrong; orderings within a group: {group.get('misordered', 0)} of {group.get('pairs_checked', 0)}")


def format_report(report: dict) -> str:
    """Aligned table: one row per case, then the aggregates."""
    rows = []
    for r in report["cases"]:
        rows.append([r["name"], r["metric"], _fmt(r["measured"]), _fmt(r["predicted"]),
                     _fmt(r["ratio"], ".2f"), _pct(r["error"]), _fmt(r.get("anchored_predicted")),
                     r["failure"] or r.get("anchored_failure") or ""])
    lines = [format_table(["case", "metric", "measured", "predicted", "measured/predicted", "error", "anchored",
                           "failure"], rows), ""]
    for key in ("category", "metric"):
        agg = [[c, str(v["cases"]), _pct(v["mape"]), _pct(v.get("out_of_sample_mape")),
                str(v.get("fitted_cases", 0)), _pct(v["max_error"]), f"{v['within_25pct']}", str(v["failed"])]
               for c, v in report[f"by_{key}"].items()]
        lines += [format_table([key, "cases", "MAPE", "out of sample", "fitted", "max error", "within 25 %",
                                "failed"], agg), ""]
    fs = report["fitting_subset"]
    misordered = report["ranking"]["misordered"]
    lines += [
        f"cases {len(report['cases'])}, failed {len(report['failed'])}, within 25 %: {report['within_25pct']}",
        f"MAPE {_pct(report['mape'])}, max error {_pct(report['max_error'])} (uncalibrated)",
        f"out-of-sample MAPE {_pct(report['out_of_sample_mape'])} (fitting subset '{fs['name']}': "
        f"{len(fs['cases'])} cases; fitted: {fs['fitted']})",
        f"ranking {'ok' if report['ranking_ok'] else 'WRONG'}: {report['ranking']['pairs_checked']} pairs checked, "
        f"{len(misordered)} misordered ({_by_kind(report['ranking'])})",
    ]
    an = report.get("anchored")
    if an and an["cases"]:
        lines.append(f"anchored (workload.single_gpu_throughput = the source's single-GPU figure, "
                     f"{len(an['cases'])} cases): MAPE {_pct(an['mape'])} against {_pct(an['unanchored_mape'])} "
                     f"unanchored; scaling efficiency {_pct(an['scaling_efficiency_mape'])}; "
                     f"{len(an['ranking']['misordered'])} of {an['ranking']['pairs_checked']} pairs misordered")
    sp = report.get("scaling_vs_perfect")
    if sp and sp["cases"]:
        lines.append(f"scaling efficiency ({sp['cases']} cases): MAPE {_pct(sp['mape'])} against "
                     f"{_pct(sp['perfect_scaling_mape'])} for predicting perfect scaling (1.0) every time")
    if report["unexplained"]:
        lines.append(f"outside 25 % with no reason in the data file: {', '.join(report['unexplained'])}")
    lines += [f"  misordered ({m.get('kind', '?')}): {m['pair'][0]} vs {m['pair'][1]}: measured {m['measured']}, "
              f"predicted {m['predicted']}" for m in misordered]
    return "\n".join(lines)
