"""`simdist plan`: search the allowed space with `estimate`, confirm the best with `simulate`.

The space is a set of axes (the same as a sweep's: GPU type and count, node interior, NIC, strategy,
bucket size, compression, ...). Every point is estimated (exhaustively up to `max_points`; beyond
that a seeded random sample of `max_points` points, then a local search that changes one axis at a
time around the best point until nothing improves); points that do not fit, break a constraint or
cannot run are dropped with their reasons counted; under `prune` (the default), compute classes
whose compute-only throughput bound cannot reach the top-k or the front are not estimated at all
(bound.py, _bounded_run). The best `confirm` points by the objective are simulated and re-ranked on
the simulated figures. The Pareto front is throughput against price per
hour over every feasible estimated point (useful throughput under the goodput objective).
"""
from __future__ import annotations

import functools
import json
import math
import random
import time
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Sequence

from simdist.errors import Issue, ScenarioError
from simdist.planner.axes import Axis, Point, expand
from simdist.planner.bound import ClassBound, compute_bound, is_compute_free
from simdist.planner.evaluate import PRUNED, Job, evaluate_point, parse_constraints
from simdist.planner.executors import LocalRunner, context_order, default_jobs
from simdist.planner.pareto import pareto_front
from simdist.planner.rows import INPUT_NAMES, RESULT_COLUMNS, STATUS_OK, canonical


class Objective(StrEnum):
    THROUGHPUT = "throughput"  # samples (tokens for transformers) per second, higher is better
    COST = "cost"  # dollars per sample (token), lower is better
    TIME_TO_TRAIN = "time_to_train"  # seconds to a sample or token budget, lower is better
    GOODPUT = "goodput"  # useful throughput under the scenario's failures (rate x goodput ratio), higher is better


@dataclass(frozen=True)
class PlanSpec:
    """What to search and how to rank it."""

    axes: tuple[Axis, ...]
    objective: Objective = Objective.THROUGHPUT
    constraints: tuple[str, ...] = ()
    samples: float | None = None  # budget for time_to_train (samples)
    tokens: float | None = None  # budget for time_to_train (tokens)
    top: int = 10
    confirm: int = 10
    max_points: int = 20_000
    seed: int = 0
    prune: bool = True  # skip compute classes whose throughput bound cannot reach the top-k or the front


@dataclass
class Plan:
    """The search's outcome: ranked candidates (confirmed first), the Pareto front, and counts."""

    objective: Objective
    ranked: list[dict[str, Any]]
    front: list[dict[str, Any]]
    space: int
    evaluated: int
    feasible: int
    rejected: dict[str, int] = field(default_factory=dict)
    search: str = "exhaustive"
    pruned: int = 0  # candidates never estimated: their compute bound could not reach the top-k or the front
    seconds: dict[str, float] = field(default_factory=dict)  # wall time of the search's phases (estimate, confirm)


def check_plan(spec: PlanSpec) -> None:
    """Refuse what cannot be ranked, naming the option."""
    if spec.objective == Objective.TIME_TO_TRAIN and not (spec.samples or spec.tokens):
        raise ScenarioError(Issue("--objective", "time_to_train needs a budget: --samples N or --tokens N"))
    if spec.samples and spec.tokens:
        raise ScenarioError(Issue("--tokens", "give --samples or --tokens, not both"))
    for name in ("top", "confirm", "max_points"):
        if getattr(spec, name) < (1 if name != "confirm" else 0):
            raise ScenarioError.bad_value(f"--{name.replace('_', '-')}", getattr(spec, name), "a positive count")


def check_goodput(spec: PlanSpec, base: dict, loader, overrides: Sequence[str], base_dir: str, name: str) -> None:
    """`--objective goodput` needs failures to count useful time under: refused when the scenario has none."""
    if spec.objective != Objective.GOODPUT:
        return
    if any(a.key == "failures" or a.key.startswith("failures.") for a in spec.axes):
        return
    try:
        has = loader(base, tuple(overrides), {}, base_dir, name).failures is not None
    except ScenarioError:  # the base alone may not load (an axis fills it in): judge by its data
        has = isinstance(base, dict) and base.get("failures") is not None
    if not has:
        raise ScenarioError(Issue("--objective", "goodput needs a failures section in the scenario (with "
                                                 "run.duration); this one has none"))


def useful_rate(row: dict[str, Any], spec: PlanSpec) -> float | None:
    """The rate the objective ranks by: the rate, times the goodput ratio under the goodput objective."""
    r = rate(row, spec)
    if spec.objective != Objective.GOODPUT or r is None:
        return r
    ratio = row.get("goodput_ratio")
    return r * ratio if ratio is not None else None


def rate(row: dict[str, Any], spec: PlanSpec) -> float | None:
    """Tokens per second when the objective counts tokens (and the model has them), else samples per second."""
    if spec.tokens or (spec.objective != Objective.TIME_TO_TRAIN and row.get("tokens_per_s")):
        return row.get("tokens_per_s")
    return row.get("samples_per_s")


def time_to_train_s(row: dict[str, Any], spec: PlanSpec) -> float | None:
    r = rate(row, spec)
    budget = spec.tokens or spec.samples
    return budget / r if r and budget else None


def score(row: dict[str, Any], spec: PlanSpec) -> float:
    """The objective as a number to minimise (inf when the row has no figure for it)."""
    r = rate(row, spec)
    if not r:
        return math.inf
    if spec.objective == Objective.THROUGHPUT:
        return -r
    if spec.objective == Objective.GOODPUT:  # useful throughput: rate x goodput ratio (useful / wall time)
        return -(useful_rate(row, spec) or 0.0) or math.inf
    if spec.objective == Objective.COST:
        return row["cost_per_hour_usd"] / 3600.0 / r if row.get("cost_per_hour_usd") else math.inf
    return time_to_train_s(row, spec) or math.inf


def _evaluate(runner: LocalRunner, points: Sequence[Point]) -> list[tuple[str, dict | None]]:
    """Outcomes in the order of `points`, run grouped by cluster (the runner returns chunks as they finish)."""
    by_index: dict[int, tuple[str, dict | None]] = {}
    for batch in runner.run(context_order(points)):
        by_index.update((i, (kind, row)) for i, kind, row in batch)
    return [by_index[p.index] for p in points]


def _key(values: Any) -> str:
    return json.dumps(canonical(dict(values)), sort_keys=True)


def _neighbours(point: Point, axes: Sequence[Axis]) -> list[dict[str, Any]]:
    """The points one step away on one axis (the previous or next value)."""
    values = point.as_dict()
    out = []
    for a in axes:
        i = a.values.index(values[a.key])
        for j in (i - 1, i + 1):
            if 0 <= j < len(a.values):
                out.append({**values, a.key: a.values[j]})
    return out


def search(spec: PlanSpec, base: dict, loader, *, base_dir: str = ".", name: str = "scenario",
           overrides: Sequence[str] = (), jobs: int = 0) -> Plan:
    """Estimate the space, keep what fits and meets the constraints, confirm the best by simulation."""
    check_plan(spec)
    check_goodput(spec, base, loader, overrides, base_dir, name)
    known = [a.key for a in spec.axes] + list(INPUT_NAMES) + list(RESULT_COLUMNS) + ["time_to_train_s"]
    parse_constraints(spec.constraints, known)
    jobs = jobs or default_jobs()
    job = Job(base=base, loader=loader, base_dir=base_dir, name=name, overrides=tuple(overrides),
              fidelity="estimate", constraints=tuple(c for c in spec.constraints if "time_to_train_s" not in c))
    space = math.prod(len(a.values) for a in spec.axes)
    rows: dict[tuple, dict] = {}
    rejected: dict[str, int] = {}

    def run(points: list[Point]) -> None:
        for point, (kind, row) in zip(points, _evaluate(runner, points)):
            key = _key(point.values)
            if kind == PRUNED:
                rejected["constraints"] = rejected.get("constraints", 0) + 1
                rows[key] = {}
            elif row is not None:
                row["time_to_train_s"] = time_to_train_s(row, spec) if row["status"] == STATUS_OK else None
                rows[key] = row

    pruned = 0

    def bound_of(point: Point) -> ClassBound | None:
        try:
            scenario = loader(base, tuple(overrides), point.as_dict(), base_dir, name)
        except ScenarioError:
            return None
        return compute_bound(scenario)

    def estimate(points: list[Point]) -> str:
        """Estimate `points` (skipping, under spec.prune, classes that cannot matter); a note on the skips."""
        nonlocal pruned
        if not spec.prune:
            run(points)
            return ""
        pruned, note = _bounded_run(spec, points, run, rows, bound_of, jobs)
        return note

    started = time.perf_counter()
    with LocalRunner(job, frozenset(), jobs) as runner:  # one set of workers, warm, for every round
        if space <= spec.max_points:
            method = "exhaustive" + estimate(expand(spec.axes))
        else:
            rng = random.Random(spec.seed)
            sample = sorted(rng.sample(range(space), spec.max_points))
            note = estimate(_points_at(spec.axes, sample))
            method = f"random sample of {spec.max_points} of {space}{note and ' (' + note[2:] + ')'}, then local search"
            _local_search(spec, rows, run)
    feasible = [r for r in rows.values() if _feasible(r, spec, rejected)]
    feasible.sort(key=lambda r: (score(r, spec), r["point"]))
    estimated = time.perf_counter()
    confirmed = _confirm(feasible[:spec.confirm], job, spec, jobs)
    seconds = {"estimate": estimated - started, "confirm": time.perf_counter() - estimated}
    ranked = confirmed + feasible[len(confirmed):spec.top] if spec.top > len(confirmed) else confirmed[:spec.top]
    front = pareto_front(feasible, [lambda r: -(useful_rate(r, spec) or 0.0), lambda r: r["cost_per_hour_usd"] or 0.0])
    return Plan(spec.objective, ranked, front, space, len(rows), len(feasible), rejected, method, pruned, seconds)


def _points_at(axes: Sequence[Axis], indices: Sequence[int]) -> list[Point]:
    """Points of the Cartesian product at flat indices (the last axis varying fastest), without expanding it."""
    out = []
    for flat in indices:
        values, rest = [], flat
        for a in reversed(axes):
            rest, i = divmod(rest, len(a.values))
            values.append((a.key, a.values[i]))
        out.append(Point(flat, tuple(reversed(values))))
    return out


def _local_search(spec: PlanSpec, rows: dict, run) -> None:
    """From the best point so far, estimate unvisited neighbours until no neighbour is better."""
    while True:
        ok = [r for r in rows.values() if r and r.get("status") == STATUS_OK and r.get("memory_fits")]
        if not ok:
            return
        best = min(ok, key=lambda r: score(r, spec))
        point = Point(best["point"], tuple((a.key, best[a.key]) for a in spec.axes))
        fresh = [n for n in _neighbours(point, spec.axes) if _key(n) not in rows]
        if not fresh:
            return
        flat = []
        for n in fresh:
            f = 0
            for a in spec.axes:
                f = f * len(a.values) + a.values.index(n[a.key])
            flat.append(f)
        run(_points_at(spec.axes, flat))
        new_best = min((r for r in rows.values() if r and r.get("status") == STATUS_OK), key=lambda r: score(r, spec))
        if score(new_best, spec) >= score(best, spec):
            return


def _bounded_run(spec: PlanSpec, points: list[Point], run, rows: dict, bound_of, jobs: int) -> tuple[int, str]:
    """Estimate `points` compute class by compute class (bound.py), best bound first, skipping each class
    whose bound is beaten by what is estimated already; returns (candidates skipped, a note for the plan).

    A class is skipped only when its best possible score is strictly worse than the k-th best feasible
    score so far (k = max(top, confirm): ranked and confirmed rows are exactly those of estimating all)
    and an estimated feasible row with a strictly higher rate at no higher price dominates it (so it is
    not on the Pareto front either). The goodput objective is not bounded (its ratio comes from failures).
    """
    classes: dict[str, list[Point]] = {}
    for p in points:
        classes.setdefault(_class_of(p), []).append(p)
    if spec.objective == Objective.GOODPUT or len(classes) * 4 > len(points):
        run(points)  # too few candidates per class for the bounds to pay for themselves
        return 0, ""
    bounds = {ck: _bound_score(bound_of(pts[0]), spec) for ck, pts in classes.items()}
    order = sorted(classes, key=lambda ck: (bounds[ck] is not None, bounds[ck][0] if bounds[ck] else 0.0))
    k = max(spec.top, spec.confirm, 1)
    size = min(max(256, 64 * jobs), max(k, len(points) // 8))  # a round keeps every worker busy, but a
    # small space still gets several rounds (a class is only skipped against rounds already estimated)
    skipped: list[Point] = []
    i = 0
    while i < len(order):
        feasible = [r for r in rows.values() if r and _reason(r, spec) is None]
        kth = sorted(score(r, spec) for r in feasible)[k - 1] if len(feasible) >= k else math.inf
        batch: list[Point] = []
        while i < len(order) and len(batch) < size:
            ck = order[i]
            i += 1
            b = bounds[ck]
            if b is not None and b[0] > kth and _dominated(b, feasible, spec):
                skipped += classes[ck]
            else:
                batch += classes[ck]
        if not batch:
            continue
        run(batch)
        broken = [p for p in batch if bounds[_class_of(p)] is not None and not _within(rows.get(_key(p.values)),
                                                                                       bounds[_class_of(p)], spec)]
        if broken:  # the bound failed on an estimated candidate: trust it no more, estimate everything
            rest = skipped + [p for ck in order[i:] for p in classes[ck]]
            if rest:
                run(rest)
            return 0, (f"; compute bound exceeded by point {broken[0].index}, so all {len(points)} "
                       "candidates were estimated")
    note = (f"; {len(points) - len(skipped)} estimated, {len(skipped)} skipped by a compute bound "
            f"({len(classes)} compute classes)") if skipped else ""
    return len(skipped), note


def _class_of(point: Point) -> str:
    return _key({k: v for k, v in point.values if not is_compute_free(k)})


def _bound_rate(b: ClassBound, spec: PlanSpec) -> float | None:
    """The bound on the rate `rate()` ranks by (tokens when it counts tokens), None when it has none."""
    counts_tokens = spec.tokens or (spec.objective != Objective.TIME_TO_TRAIN and b.tokens_per_sample)
    if counts_tokens:
        return b.samples_per_s * b.tokens_per_sample if b.tokens_per_sample else None
    return b.samples_per_s


def _bound_score(b: ClassBound | None, spec: PlanSpec) -> tuple[float, float, float] | None:
    """(best possible score, best possible rate, price per hour) of a class, or None (no bound)."""
    if b is None:
        return None
    r = _bound_rate(b, spec)
    if r is None:  # no figure for the objective: every candidate of the class is dropped anyway
        return (math.inf, 0.0, b.price_per_hour or 0.0)
    if spec.objective == Objective.THROUGHPUT:
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


def _reason(row: dict, spec: PlanSpec) -> str | None:
    """Why a row is not a feasible candidate (None: it is)."""
    if row["status"] != STATUS_OK:
        return row["status"]
    if row.get("memory_fits") is False:
        return "memory"
    if row.get("meets_constraints") is False:
        return "constraints"
    if any(not _holds(c, row) for c in spec.constraints if "time_to_train_s" in c):
        return "constraints"
    if score(row, spec) == math.inf:
        return "no figure for the objective"
    return None


def _feasible(row: dict, spec: PlanSpec, rejected: dict[str, int]) -> bool:
    """A row that ran, fits in memory and meets every constraint; the others are counted by reason."""
    if not row:
        return False
    reason = _reason(row, spec)
    if reason:
        rejected[reason] = rejected.get(reason, 0) + 1
    return reason is None


def _holds(text: str, row: dict) -> bool:
    return _parsed(text).evaluate(row)


@functools.lru_cache(maxsize=64)
def _parsed(text: str):
    from simdist.planner.expr import Expression

    return Expression(text)


def _confirm(rows: list[dict], job: Job, spec: PlanSpec, jobs: int) -> list[dict]:
    """Simulate the best estimated rows and re-rank them on the simulated figures."""
    if not rows:
        return []
    points = [Point(r["point"], tuple((a.key, r[a.key]) for a in spec.axes)) for r in rows]
    sim_job = replace(job, fidelity="simulate", constraints=())
    out = []
    with LocalRunner(sim_job, frozenset(), min(jobs, len(points))) as runner:
        outcomes = _evaluate(runner, points)
    for est, (kind, row) in zip(rows, outcomes):
        if row is None or row["status"] != STATUS_OK:
            out.append({**est, "confirmed": False, "confirm_error": (row or {}).get("reason", kind)})
            continue
        row["time_to_train_s"] = time_to_train_s(row, spec)
        row["estimate_iteration_time_s"] = est["iteration_time_s"]
        row["confirmed"] = True
        out.append(row)
    out.sort(key=lambda r: (0 if r.get("confirmed") else 1, score(r, spec), r["point"]))
    return out
