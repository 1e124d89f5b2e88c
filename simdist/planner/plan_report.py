"""`simdist plan`'s text and JSON: the top-k table, the Pareto front, and why the winner wins."""
from __future__ import annotations

from typing import Any, Sequence

from simdist.planner.plan import Objective, Plan, PlanSpec, rate, useful_rate
from simdist.tables import format_table

TERMS = ("compute_s", "communication_s", "exposed_communication_s", "compression_s", "optimizer_s")


def _inputs(row: dict[str, Any], axis_keys: Sequence[str]) -> list[Any]:
    return [row.get(k) for k in axis_keys]


def format_plan(plan: Plan, spec: PlanSpec) -> str:
    keys = [a.key for a in spec.axes]
    unit = "tokens/s" if spec.tokens or any(r.get("tokens_per_s") for r in plan.ranked) else "samples/s"
    headers = ["rank", *keys, "gpus", unit, "iteration_s", "$/hour", "$/Msample" if unit == "samples/s" else "$/Mtoken",
               "time_to_train_h", "rung"]
    goodput = plan.objective == Objective.GOODPUT
    if goodput:
        headers[-1:-1] = ["goodput_ratio", f"useful {unit}"]
    rows = []
    for i, r in enumerate(plan.ranked, 1):
        per = r["cost_per_hour_usd"] / 3600.0 / rate(r, spec) * 1e6 if rate(r, spec) else None
        ttt = r.get("time_to_train_s")
        rows.append([i, *_inputs(r, keys), r["gpus"], rate(r, spec), r["iteration_time_s"], r["cost_per_hour_usd"],
                     per, ttt / 3600 if ttt else None]
                    + ([r.get("goodput_ratio"), useful_rate(r, spec)] if goodput else [])
                    + [r.get("rung") or ("simulate" if r.get("confirmed") else "estimate")])
    out = [f"plan: objective {plan.objective.value}; {plan.search}; space {plan.space} points, evaluated "
           f"{plan.evaluated}, feasible {plan.feasible}"
           + (f" (dropped: {', '.join(f'{v} {k}' for k, v in sorted(plan.rejected.items()))})" if plan.rejected else ""),
           "", format_table(headers, rows, title="best candidates (confirmed by simulation first; rung: the "
                                                 "highest fidelity each reached)")]
    front_unit = f"useful {unit}" if goodput else unit
    front = [[*_inputs(r, keys), r["gpus"], useful_rate(r, spec), r["cost_per_hour_usd"]] for r in plan.front]
    out += ["", format_table([*keys, "gpus", front_unit, "$/hour"], front,
                             title=f"Pareto front: {front_unit} against price per hour ({len(front)} points)")]
    if len(plan.ranked) >= 2:
        out += ["", why_text(plan.ranked[0], plan.ranked[1], keys)]
    return "\n".join(out)


def why_text(winner: dict[str, Any], runner_up: dict[str, Any], keys: Sequence[str]) -> str:
    """The winner's breakdown beside the runner-up's, term by term, and where their inputs differ."""
    diff = [k for k in keys if winner.get(k) != runner_up.get(k)] + (["gpus"] if winner["gpus"] != runner_up["gpus"] else [])
    rows = [[k, winner.get(k), runner_up.get(k), None] for k in diff]
    for t in ("iteration_time_s", *TERMS):
        a, b = winner.get(t), runner_up.get(t)
        rows.append([t, a, b, (b - a) if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None])
    return format_table(["", "winner", "runner-up", "runner-up - winner"], rows,
                        title="why the winner wins (per iteration, seconds)")


def plan_json(plan: Plan) -> dict[str, Any]:
    return {"objective": plan.objective.value, "search": plan.search, "space": plan.space,
            "evaluated": plan.evaluated, "pruned": plan.pruned, "feasible": plan.feasible, "rejected": plan.rejected,
            "rungs": plan.rungs,
            "ranked": plan.ranked, "pareto_front": plan.front,
            "why": {"winner": plan.ranked[0], "runner_up": plan.ranked[1]} if len(plan.ranked) >= 2 else None}
