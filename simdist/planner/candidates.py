"""Every candidate of a plan with its status and reason, and the fidelity its figures come from.

A plan looks at many more candidates than it ranks. Each one ends in exactly one status:

    ranked        feasible: ran, fits in memory, meets every constraint; `rank` orders them (the
                  simulated ones first, then by their estimated score)
    pruned        dropped before ranking, `pruned_by` says by what: memory (does not fit in GPU memory),
                  compute bound (its compute class's throughput bound cannot reach the top-k or the
                  Pareto front, prune.py), constraint (the constraint it fails), objective (no figure for
                  the objective, e.g. no tokens/s), halving (below the bound rung's cut)
    infeasible    a valid scenario that cannot run (no route, ...), with the reason
    invalid       the candidate's scenario is refused, with the error (error: an internal error)
    not_examined  outside a sampled search's sample

`fidelity` says where the row's figures come from: estimate, simulate (or simulate:N, a short run),
bound (only bound_samples_per_s / bound_tokens_per_s, the compute bound), or empty (no figure). A
simulated row keeps its estimate beside it (estimate_iteration_time_s, estimate_samples_per_s,
estimate_tokens_per_s), so a ranked table and the Pareto front (drawn from estimates) can be told apart.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from simdist.planner.axes import Factor, Point, points_at, space_size
from simdist.planner.objective import PlanSpec, _holds, score
from simdist.planner.rows import RESULT_COLUMNS, STATUS_INFEASIBLE, STATUS_OK
from simdist.units import format_memory

RANKED, PRUNED, NOT_EXAMINED = "ranked", "pruned", "not_examined"
MEMORY_TEXT = "does not fit in GPU memory"  # how memory.check_fits words an out-of-memory refusal
FIGURES = tuple(c for c in RESULT_COLUMNS if c not in ("status", "reason", "fidelity", "meets_constraints")) \
    + ("time_to_train_s",)
SIDE_FIGURES = ("estimate_iteration_time_s", "estimate_samples_per_s", "estimate_tokens_per_s",
                "bound_samples_per_s", "bound_tokens_per_s")
STATUS_COLUMNS = ("status", "rank", "pruned_by", "reason", "fidelity", "on_pareto_front")
LIST_LIMIT = 100_000  # a larger space lists only the candidates it examined


@dataclass
class Examined:
    """What happened to the candidates that never became a result row during a search."""

    excluded: dict[str, tuple[Point, dict]] = field(default_factory=dict)  # by a constraint on inputs
    bound_skipped: list[Point] = field(default_factory=list)  # their compute class's bound could not matter
    unexamined: str = ""  # why the rest of the space was never looked at ("" = nothing left over)
    constraint_of: Callable[[Point], str] = lambda point: ""  # the input constraint a candidate fails, or ''


def columns(spec: PlanSpec) -> tuple[str, ...]:
    """The candidate table's columns: point, the axes, the status columns, the figures."""
    return ("point", *(a.key for a in spec.axes), *STATUS_COLUMNS, *FIGURES, *SIDE_FIGURES)


def classify(row: dict[str, Any], spec: PlanSpec) -> tuple[str, str, str]:
    """(status, pruned_by, reason) of a candidate that has a result row."""
    status, reason = row["status"], row.get("reason") or ""
    if status == STATUS_INFEASIBLE and reason.startswith(MEMORY_TEXT):
        return PRUNED, "memory", reason
    if status != STATUS_OK:
        return status, "", reason
    if row.get("memory_fits") is False:
        return PRUNED, "memory", f"{MEMORY_TEXT}: needs {format_memory(row['memory_per_gpu_bytes'])} per GPU"
    if row.get("meets_constraints") is False:
        return PRUNED, "constraint", f"fails {row.get('failed_constraint') or 'a constraint'!r}"
    for c in spec.constraints:
        if "time_to_train_s" in c and not _holds(c, row):
            return PRUNED, "constraint", f"fails {c!r}"
    if score(row, spec) == math.inf:
        return PRUNED, "objective", f"no figure for the {spec.objective.value} objective"
    if row.get("confirm_error"):
        return RANKED, "", f"ranked by its estimate: the simulation failed ({row['confirm_error']})"
    return RANKED, "", ""


def _bound_figures(bound) -> dict[str, Any]:
    if bound is None:
        return {}
    tokens = bound.samples_per_s * bound.tokens_per_sample if bound.tokens_per_sample else None
    return {"bound_samples_per_s": bound.samples_per_s, "bound_tokens_per_s": tokens,
            "cost_per_hour_usd": bound.price_per_hour}


def candidate_rows(spec: PlanSpec, fs: Sequence[Factor], rows: dict[str, dict], seen: Examined,
                   whole: Sequence[dict], front: Sequence[dict], bound_for: Callable[[Point], Any]
                   ) -> tuple[list[dict[str, Any]], int]:
    """Every candidate's row, in point order, and how many candidates were left unlisted (never examined,
    in a space larger than LIST_LIMIT). `whole` is every feasible candidate in rank order."""
    keys = [a.key for a in spec.axes]
    on_front = {r["point"] for r in front}
    final = {r["point"]: r for r in rows.values() if r}
    final.update((r["point"], r) for r in whole)  # a simulated row replaces its estimate
    rank_of = {r["point"]: i for i, r in enumerate(whole, 1)}
    out: dict[int, dict[str, Any]] = {}

    def put(index: int, values: dict, status: str, pruned_by: str, reason: str, fidelity: str,
            figures: dict[str, Any]) -> None:
        out[index] = {"point": index, **{k: values.get(k) for k in keys}, "status": status, "rank": None,
                      "pruned_by": pruned_by, "reason": reason, "fidelity": fidelity,
                      "on_pareto_front": index in on_front,
                      **{c: figures.get(c) for c in (*FIGURES, *SIDE_FIGURES)}}

    for index, row in final.items():
        status, by, reason = classify(row, spec)
        put(index, row, status, by, reason, row.get("rung") or row.get("fidelity") or "", row)
    ranked = sorted((r for r in out.values() if r["status"] == RANKED), key=lambda r: rank_of.get(r["point"], math.inf))
    for i, r in enumerate(ranked, 1):
        r["rank"] = i
    for point, payload in seen.excluded.values():
        put(point.index, point.as_dict(), PRUNED, "constraint", payload.get("reason") or "fails a constraint", "",
            payload)
    k = max(spec.top, spec.confirm, 1)
    for point in seen.bound_skipped:
        put(point.index, point.as_dict(), PRUNED, "compute bound",
            f"its compute class's throughput bound cannot reach the top {k} or the Pareto front", "bound",
            _bound_figures(bound_for(point)))
    space = space_size(fs)
    if not seen.unexamined or len(out) >= space:
        return [out[i] for i in sorted(out)], 0
    if space > LIST_LIMIT:
        return [out[i] for i in sorted(out)], space - len(out)
    halving = seen.unexamined.startswith("below the bound rung")
    for point in points_at(fs, [i for i in range(space) if i not in out]):
        if halving:
            failed = seen.constraint_of(point)  # the bound rung applies the constraints on inputs first
            put(point.index, point.as_dict(), PRUNED, "constraint" if failed else "halving",
                failed or seen.unexamined, "bound", _bound_figures(bound_for(point)))
        else:
            put(point.index, point.as_dict(), NOT_EXAMINED, "", seen.unexamined, "", {})
    return [out[i] for i in sorted(out)], 0


def status_counts(candidates: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Candidates per status, pruned ones per what pruned them ('pruned (memory)')."""
    counts: dict[str, int] = {}
    for c in candidates:
        name = f"{c['status']} ({c['pruned_by']})" if c["pruned_by"] else c["status"]
        counts[name] = counts.get(name, 0) + 1
    return counts
