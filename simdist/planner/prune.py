"""Skipping compute classes that cannot matter while a plan estimates (bound.py gives each class's bound).

`bounded_run` estimates classes best bound first and skips a class whose best possible score is worse
than the k-th best feasible score so far and which an estimated row beats at no higher price (so it is
neither in the top-k nor on the Pareto front); every estimated row is checked against its class's bound.
"""
from __future__ import annotations

import math

from simdist.planner.axes import Point, values_key
from simdist.planner.bound import ClassBound, is_compute_free
from simdist.planner.objective import Objective, PlanSpec, drop_reason, rate, score, useful_rate
from simdist.planner.rows import STATUS_OK


def bounded_run(spec: PlanSpec, points: list[Point], run, rows: dict, bound_of, jobs: int,
                reasons: dict[str, str] | None = None, on_skip=None) -> tuple[list[Point], str]:
    """Estimate `points` compute class by compute class (bound.py), best bound first, skipping each class
    whose bound is beaten by what is estimated already; returns (the candidates skipped, a note for the
    plan). `on_skip(n)` hears of each skipped class's n candidates (the progress bar).

    A class is skipped only when its best possible score is strictly worse than the k-th best feasible
    score so far (k = max(top, confirm): ranked and confirmed rows are exactly those of estimating all)
    and an estimated feasible row with a strictly higher rate at no higher price dominates it (so it is
    not on the Pareto front either). Under the goodput objective the bound is the healthy rate's: the
    useful rate is that rate times a goodput ratio <= 1 (bound.py). Classes without a bound are always
    estimated, and the note counts them with the reason.
    """
    classes: dict[str, list[Point]] = {}
    for p in points:
        classes.setdefault(class_of(p), []).append(p)
    if len(classes) * 4 > len(points):
        run(points)  # too few candidates per class for the bounds to pay for themselves
        return [], ""
    bounds = {ck: bound_score(bound_of(pts[0]), spec) for ck, pts in classes.items()}
    why: dict[str, int] = {}
    for ck in classes:
        if bounds[ck] is None:
            r = (reasons or {}).get(ck, "no bound")
            why[r] = why.get(r, 0) + len(classes[ck])
    unbounded = (f"; {sum(why.values())} without a bound, always estimated ("
                 + ", ".join(f"{n} {r}" for r, n in sorted(why.items())) + ")") if why else ""
    order = sorted(classes, key=lambda ck: (bounds[ck] is not None, bounds[ck][0] if bounds[ck] else 0.0))
    k = max(spec.top, spec.confirm, 1)
    size = min(max(256, 64 * jobs), max(k, len(points) // 8))  # a round keeps every worker busy, but a
    # small space still gets several rounds (a class is only skipped against rounds already estimated)
    skipped: list[Point] = []
    i = 0
    while i < len(order):
        feasible = [r for r in rows.values() if r and drop_reason(r, spec) is None]
        kth = sorted(score(r, spec) for r in feasible)[k - 1] if len(feasible) >= k else math.inf
        batch: list[Point] = []
        while i < len(order) and len(batch) < size:
            ck = order[i]
            i += 1
            b = bounds[ck]
            if b is not None and b[0] > kth and _dominated(b, feasible, spec):
                skipped += classes[ck]
                if on_skip is not None:
                    on_skip(len(classes[ck]))
            else:
                batch += classes[ck]
        if not batch:
            continue
        run(batch)
        broken = [p for p in batch if bounds[class_of(p)] is not None and not _within(rows.get(values_key(p.values)),
                                                                                       bounds[class_of(p)], spec)]
        if broken:  # the bound failed on an estimated candidate: trust it no more, estimate everything
            rest = skipped + [p for ck in order[i:] for p in classes[ck]]
            if rest:
                run(rest)
            return [], (f"; compute bound exceeded by point {broken[0].index}, so all {len(points)} "
                       "candidates were estimated")
    note = (f"; {len(points) - len(skipped)} estimated, {len(skipped)} skipped by a compute bound "
            f"({len(classes)} compute classes)") if skipped else ""
    return skipped, note + unbounded


def class_of(point: Point) -> str:
    return values_key({k: v for k, v in point.values if not is_compute_free(k)})


def _bound_rate(b: ClassBound, spec: PlanSpec) -> float | None:
    """The bound on the rate `rate()` ranks by (tokens when it counts tokens), None when it has none."""
    counts_tokens = spec.tokens or (spec.objective != Objective.TIME_TO_TRAIN and b.tokens_per_sample)
    if counts_tokens:
        return b.samples_per_s * b.tokens_per_sample if b.tokens_per_sample else None
    return b.samples_per_s


def bound_score(b: ClassBound | None, spec: PlanSpec) -> tuple[float, float, float] | None:
    """(best possible score, best possible rate, price per hour) of a class, or None (no bound)."""
    if b is None:
        return None
    r = _bound_rate(b, spec)
    if r is None:  # no figure for the objective: every candidate of the class is dropped anyway
        return (math.inf, 0.0, b.price_per_hour or 0.0)
    if spec.objective in (Objective.THROUGHPUT, Objective.GOODPUT):  # useful rate <= rate (goodput ratio <= 1)
        best = -r
    elif spec.objective == Objective.COST:
        best = b.price_per_hour / 3600.0 / r if b.price_per_hour else math.inf
    else:  # time to train
        best = (spec.tokens or spec.samples) / r
    return (best, r, b.price_per_hour or 0.0)


def _dominated(b: tuple[float, float, float], feasible: list[dict], spec: PlanSpec) -> bool:
    """Some estimated feasible row is faster than the class can be, at no higher price per hour."""
    _, r, price = b
    return any((useful_rate(f, spec) or 0.0) > r and (f["cost_per_hour_usd"] or 0.0) <= price for f in feasible)


def _within(row: dict | None, b: tuple[float, float, float], spec: PlanSpec) -> bool:
    """An estimated candidate respects its class's bound (rate and price); a row without a rate does."""
    if not row or row.get("status") != STATUS_OK:
        return True
    r = rate(row, spec)
    price_ok = (row.get("cost_per_hour_usd") or 0.0) == b[2]
    return price_ok and (r is None or r <= b[1] * (1 + 1e-9))
