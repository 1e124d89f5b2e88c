"""`simdist plan`'s text, JSON and table file: the top-k table, the Pareto front, why the winner wins, and
every candidate with its status (candidates.py)."""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Sequence

from simdist.planner.candidates import columns, status_counts
from simdist.planner.plan import Objective, Plan, PlanSpec, rate, useful_rate
from simdist.planner.rows import cell
from simdist.planner.store import write_parquet
from simdist.results.writers import atomic_write_text
from simdist.tables import format_table

TERMS = ("compute_s", "communication_s", "exposed_communication_s", "compression_s", "optimizer_s")


def _inputs(row: dict[str, Any], axis_keys: Sequence[str]) -> list[Any]:
    return [row.get(k) for k in axis_keys]


def _simulated(row: dict[str, Any]) -> bool:
    return str(row.get("rung") or row.get("fidelity") or "").startswith("simulate")


def estimated_rate(row: dict[str, Any], spec: PlanSpec) -> float | None:
    """The row's rate by the estimate (a simulated row keeps its estimate as estimate_*)."""
    if not _simulated(row):
        return rate(row, spec)
    return rate({"samples_per_s": row.get("estimate_samples_per_s"),
                 "tokens_per_s": row.get("estimate_tokens_per_s")}, spec)


def unit_of(plan: Plan, spec: PlanSpec) -> str:
    return "tokens/s" if spec.tokens or any(r.get("tokens_per_s") for r in plan.ranked) else "samples/s"


def objective_figure(row: dict[str, Any], spec: PlanSpec, unit: str) -> tuple[str, float | None]:
    """The objective as a user reads it: (its name with unit, the row's value)."""
    per = "Mtoken" if unit == "tokens/s" else "Msample"
    if spec.objective == Objective.COST:
        r = rate(row, spec)
        return f"cost ($/{per})", (row["cost_per_hour_usd"] / 3600.0 / r * 1e6
                                   if r and row.get("cost_per_hour_usd") else None)
    if spec.objective == Objective.TIME_TO_TRAIN:
        ttt = row.get("time_to_train_s")
        return "time to train (h)", ttt / 3600 if ttt else None
    if spec.objective == Objective.GOODPUT:
        return f"useful {unit}", useful_rate(row, spec)
    return f"throughput ({unit})", rate(row, spec)


def format_plan(plan: Plan, spec: PlanSpec) -> str:
    keys = [a.key for a in spec.axes]
    unit = unit_of(plan, spec)
    headers = ["rank", *keys, "gpus", f"{unit} simulated", f"{unit} estimated", "iteration_s", "$/hour",
               "$/Msample" if unit == "samples/s" else "$/Mtoken", "time_to_train_h", "rung"]
    goodput = plan.objective == Objective.GOODPUT
    if goodput:
        headers[-1:-1] = ["goodput_ratio", f"useful {unit}"]
    rows = []
    for i, r in enumerate(plan.ranked, 1):
        per = r["cost_per_hour_usd"] / 3600.0 / rate(r, spec) * 1e6 if rate(r, spec) else None
        ttt = r.get("time_to_train_s")
        rows.append([i, *_inputs(r, keys), r["gpus"], rate(r, spec) if _simulated(r) else None,
                     estimated_rate(r, spec), r["iteration_time_s"], r["cost_per_hour_usd"], per,
                     ttt / 3600 if ttt else None]
                    + ([r.get("goodput_ratio"), useful_rate(r, spec)] if goodput else [])
                    + [r.get("rung") or ("simulate" if r.get("confirmed") else "estimate")])
    counts = status_counts(plan.candidates)
    out = [f"plan: objective {plan.objective.value}; {plan.search}; space {plan.space} points",
           "candidates: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
           + (f", {plan.unlisted} never examined (not listed)" if plan.unlisted else ""),
           "", format_table(headers, rows, title="best candidates (simulated first; the other figures come from "
                                                 "the rung each reached)")]
    front_unit = f"useful {unit}" if goodput else unit
    front = [[*_inputs(r, keys), r["gpus"], useful_rate(r, spec), r["cost_per_hour_usd"]] for r in plan.front]
    out += ["", format_table([*keys, "gpus", f"{front_unit} estimated", "$/hour"], front,
                             title=f"Pareto front of the estimates: {front_unit} against price per hour "
                                   f"({len(front)} points)")]
    if len(plan.ranked) >= 2:
        out += ["", why_text(plan.ranked[0], plan.ranked[1], keys, spec, unit)]
    return "\n".join(out)


def why_text(winner: dict[str, Any], runner_up: dict[str, Any], keys: Sequence[str], spec: PlanSpec | None = None,
             unit: str = "samples/s") -> str:
    """The objective the winner wins on, then its breakdown beside the runner-up's, term by term, and where
    their inputs differ."""
    diff = [k for k in keys if winner.get(k) != runner_up.get(k)] + (["gpus"] if winner["gpus"] != runner_up["gpus"] else [])
    rows = []
    if spec is not None:
        name, a = objective_figure(winner, spec, unit)
        _, b = objective_figure(runner_up, spec, unit)
        rows.append([f"objective: {name}", a, b, (b - a) if a is not None and b is not None else None])
        rows.append(["figures from", winner.get("rung") or winner.get("fidelity"),
                     runner_up.get("rung") or runner_up.get("fidelity"), None])
    rows += [[k, winner.get(k), runner_up.get(k), None] for k in diff]
    for t in ("iteration_time_s", *TERMS):
        a, b = winner.get(t), runner_up.get(t)
        rows.append([t, a, b, (b - a) if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None])
    return format_table(["", "winner", "runner-up", "runner-up - winner"], rows,
                        title="why the winner wins (the objective, then each iteration's terms in seconds)")


def plan_json(plan: Plan, spec: PlanSpec | None = None) -> dict[str, Any]:
    out = {"objective": plan.objective.value, "search": plan.search, "space": plan.space,
           "evaluated": plan.evaluated, "pruned": plan.pruned, "feasible": plan.feasible, "rejected": plan.rejected,
           "rungs": plan.rungs,
           "ranked": plan.ranked, "pareto_front": plan.front,
           "why": {"winner": plan.ranked[0], "runner_up": plan.ranked[1]} if len(plan.ranked) >= 2 else None,
           "status_counts": status_counts(plan.candidates), "unlisted": plan.unlisted,
           "candidates": plan.candidates}
    if spec is not None and len(plan.ranked) >= 2:
        unit = unit_of(plan, spec)
        name, a = objective_figure(plan.ranked[0], spec, unit)
        out["why"]["objective"] = {"name": name, "winner": a, "runner_up": objective_figure(plan.ranked[1], spec,
                                                                                              unit)[1]}
    return out


_KIND_KEYS = ("gpu", "intra_node", "strategy")  # axis keys (last part) that say what kind of candidate a point is


def _is_kind(key: str) -> bool:
    return key.split(".")[-1] in _KIND_KEYS or key.startswith("training.parallelism.") or key == "training.recompute"


def pareto_labels(spec: PlanSpec) -> tuple:
    """(group, label) for the Pareto plot: a candidate's kind from its GPU, node interior, strategy and layout
    axes (a legend entry each), and the other axes' values written beside each front point; a zipped group
    is named by its first key."""
    implied = {k for group in spec.zipped for k in group[1:]}  # a zipped partner follows its group's first key
    keys = [a.key for a in spec.axes if a.key not in implied]
    kind = [k for k in keys if _is_kind(k)]
    rest = [k for k in keys if not _is_kind(k)]

    def text(row: dict, keys: Sequence[str]) -> str:
        return ", ".join(f"{k.split('.')[-1]} {row.get(k)}" for k in keys)

    return ((lambda r: text(r, kind)) if kind else None), ((lambda r: text(r, rest)) if rest else None)


def write_candidates(plan: Plan, spec: PlanSpec, path: str, fmt: str = "csv") -> None:
    """Every candidate, one row each (candidates.columns), as CSV or Parquet (typed per column)."""
    cols = columns(spec)
    text_rows = [{c: cell(r.get(c)) for c in cols} for r in plan.candidates]
    if fmt == "parquet":
        write_parquet(text_rows, cols, path)
        return
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    writer.writeheader()
    writer.writerows(text_rows)
    atomic_write_text(Path(path), buf.getvalue())
