"""`simdist plan`: search the allowed space with `estimate`, confirm the best with `simulate`.

The space is a set of axes (the same as a sweep's: GPU type and count, node interior, NIC, strategy,
bucket size, compression, ...). How it is searched (`search`): `exhaustive` estimates every point;
`halving` runs successive halving over the fidelity ladder bound -> estimate -> simulate:1 -> simulate
(halving.py); `sample` estimates a seeded random sample of `max_points` points, then a local search
that changes one axis at a time around the best point until nothing improves; `auto` (the default) is
exhaustive up to `max_points` and halving beyond. Points that do not fit, break a constraint or
cannot run are dropped with their reasons counted; under `prune` (the default), compute classes
whose compute-only throughput bound cannot reach the top-k or the front are not estimated at all
(bound.py, _bounded_run). The best `confirm` points by the objective are simulated and re-ranked on
the simulated figures. The Pareto front is throughput against price per
hour over every feasible estimated point (useful throughput under the goodput objective).
Every ranked row says the highest rung it reached (`rung`: estimate, simulate:N or simulate).
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
from simdist.planner.bound import ClassBound, compute_bound, is_compute_free, no_bound_reason
from simdist.planner.evaluate import PRUNED, Job, evaluate_point, parse_constraints
from simdist.planner.executors import LocalRunner, context_order, default_jobs
from simdist.planner.halving import (DEFAULT_ETA, DEFAULT_RUNGS, Rung, best, check_eta, entering, parse_rungs,
                                     rung_caps, tie_order)
from simdist.planner.pareto import pareto_front
from simdist.planner.rows import INPUT_NAMES, RESULT_COLUMNS, STATUS_OK, canonical, input_values


class Objective(StrEnum):
    THROUGHPUT = "throughput"  # samples (tokens for transformers) per second, higher is better
    COST = "cost"  # dollars per sample (token), lower is better
    TIME_TO_TRAIN = "time_to_train"  # seconds to a sample or token budget, lower is better
    GOODPUT = "goodput"  # useful throughput under the scenario's failures (rate x goodput ratio), higher is better


class SearchMethod(StrEnum):
    AUTO = "auto"  # exhaustive up to max_points, successive halving beyond
    EXHAUSTIVE = "exhaustive"  # every point (whatever max_points says)
    HALVING = "halving"  # successive halving over the fidelity ladder (halving.py)
    SAMPLE = "sample"  # a seeded random sample of max_points, then the local search


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
    search: SearchMethod = SearchMethod.AUTO
    eta: int = DEFAULT_ETA  # successive halving keeps the best 1/eta at each rung
    rungs: tuple[str, ...] = DEFAULT_RUNGS  # successive halving's fidelity ladder


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
    rungs: list[dict[str, Any]] = field(default_factory=list)  # per rung: name, candidates entering, evaluated


def check_plan(spec: PlanSpec) -> None:
    """Refuse what cannot be ranked, naming the option."""
    if spec.objective == Objective.TIME_TO_TRAIN and not (spec.samples or spec.tokens):
        raise ScenarioError(Issue("--objective", "time_to_train needs a budget: --samples N or --tokens N"))
    if spec.samples and spec.tokens:
        raise ScenarioError(Issue("--tokens", "give --samples or --tokens, not both"))
    for name in ("top", "confirm", "max_points"):
        if getattr(spec, name) < (1 if name != "confirm" else 0):
            raise ScenarioError.bad_value(f"--{name.replace('_', '-')}", getattr(spec, name), "a positive count")
    check_eta(spec.eta)
    parse_rungs(spec.rungs)


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
                row["rung"] = "estimate"
                rows[key] = row

    pruned = 0
    bounds: dict[str, ClassBound | None] = {}  # per compute class, computed once (bound rung and skipping)
    inputs: dict[str, dict | None] = {}  # per compute class: gpus, nodes, cost_per_hour (None: it does not load)
    reasons: dict[str, str] = {}  # per compute class without a bound: why

    def bound_of(point: Point) -> ClassBound | None:
        ck = _class_of(point)
        if ck not in bounds:
            try:
                scenario = loader(base, tuple(overrides), point.as_dict(), base_dir, name)
            except ScenarioError:
                bounds[ck], inputs[ck], reasons[ck] = None, None, "does not load"
            else:
                bounds[ck], inputs[ck] = compute_bound(scenario), input_values(scenario)
                if bounds[ck] is None:
                    reasons[ck] = no_bound_reason(scenario) or "its plan cannot be built"
        return bounds[ck]

    def inputs_of(point: Point) -> dict | None:
        bound_of(point)
        return inputs[_class_of(point)]

    def estimate(points: list[Point]) -> str:
        """Estimate `points` (skipping, under spec.prune, classes that cannot matter); a note on the skips."""
        nonlocal pruned
        if not spec.prune:
            run(points)
            return ""
        skipped, note = _bounded_run(spec, points, run, rows, bound_of, jobs, reasons)
        pruned += skipped
        return note

    method = SearchMethod(spec.search)
    if method == SearchMethod.AUTO:
        method = SearchMethod.EXHAUSTIVE if space <= spec.max_points else SearchMethod.HALVING
    rungs = parse_rungs(spec.rungs) if method == SearchMethod.HALVING else ()
    rung_log: list[dict[str, Any]] = []
    started = time.perf_counter()
    with LocalRunner(job, frozenset(), jobs) as runner:  # one set of workers, warm, for every round
        if method == SearchMethod.EXHAUSTIVE:
            text = "exhaustive" + estimate(expand(spec.axes))
            rung_log.append({"rung": "estimate", "entered": space, "evaluated": len(rows)})
        elif method == SearchMethod.SAMPLE:
            n = min(space, spec.max_points)
            sample = sorted(random.Random(spec.seed).sample(range(space), n))
            note = estimate(_points_at(spec.axes, sample))
            text = f"random sample of {n} of {space}{note and ' (' + note[2:] + ')'}, then local search"
            _local_search(spec, rows, run)
            rung_log.append({"rung": "estimate", "entered": n, "evaluated": len(rows)})
        else:
            text = _halving_estimate(spec, rungs, space, bound_of, inputs_of, job.constraints, estimate, rows, run,
                                     rung_log)
    feasible = [r for r in rows.values() if _feasible(r, spec, rejected)]
    feasible.sort(key=lambda r: (score(r, spec), r["point"]))
    estimated = time.perf_counter()
    if method == SearchMethod.HALVING:
        ranked, sim_text = _halving_simulate(feasible, rungs, job, spec, jobs, rung_log)
        text += sim_text
    else:
        confirmed = _confirm(feasible[:spec.confirm], job, spec, jobs)
        if confirmed:
            rung_log.append({"rung": "simulate", "entered": len(confirmed), "evaluated": len(confirmed)})
        ranked = confirmed + feasible[len(confirmed):spec.top] if spec.top > len(confirmed) else confirmed[:spec.top]
    ranked = ranked[:spec.top]
    seconds = {"estimate": estimated - started, "confirm": time.perf_counter() - estimated}
    front = pareto_front(feasible, [lambda r: -(useful_rate(r, spec) or 0.0), lambda r: r["cost_per_hour_usd"] or 0.0])
    return Plan(spec.objective, ranked, front, space, len(rows), len(feasible), rejected, text, pruned, seconds,
                rung_log)


def _halving_estimate(spec: PlanSpec, rungs: Sequence[Rung], space: int, bound_of, inputs_of,
                      constraints: Sequence[str], estimate, rows: dict, run, log: list[dict[str, Any]]) -> str:
    """The rungs up to and including the estimate rung: the bound rung over the whole space (when the
    ladder starts with one) keeps the best of it by its class bound, then those are estimated (with the
    exact compute-bound skipping) and the local search runs around the best; returns the plan's header text."""
    caps = rung_caps(rungs, spec.max_points, spec.confirm, spec.eta)
    est_at = next(i for i, r in enumerate(rungs) if r.kind == "estimate")
    parts = [f"successive halving (eta {spec.eta}, rungs {','.join(r.name for r in rungs)})"]
    if rungs[0].kind == "bound":
        n = entering(space, spec.eta, caps[est_at])
        kept, classes, unbounded, excluded = _bound_rung(spec, n, bound_of, inputs_of, constraints)
        log.append({"rung": "bound", "entered": space, "evaluated": classes, "unbounded_classes": unbounded,
                    "excluded_by_constraints": excluded, "promoted": len(kept)})
        parts.append(f"bound {space} ({classes} compute classes{f', {unbounded} without a bound' if unbounded else ''}"
                     f"{f'; {excluded} excluded by constraints' if excluded else ''})")
    else:
        n = min(space, caps[est_at] or space)
        kept = sorted(random.Random(spec.seed).sample(range(space), n))
        parts.append(f"random sample of {n} of {space}")
    note = estimate(_points_at(spec.axes, kept))
    before = len(rows)
    _local_search(spec, rows, run)
    log.append({"rung": "estimate", "entered": len(kept), "evaluated": len(rows), "local_search": len(rows) - before})
    parts.append(f"estimate {len(kept)}" + (f" ({note[2:]})" if note else "")
                 + (f" + {len(rows) - before} by the local search" if len(rows) > before else ""))
    return " -> ".join(parts)


def _bound_rung(spec: PlanSpec, n: int, bound_of, inputs_of, constraints: Sequence[str]
                ) -> tuple[list[int], int, int, int]:
    """The flat indices of the `n` candidates with the best class bounds among those the constraints on
    inputs admit (candidates of classes without a bound first, those that do not load last; ties broken
    by a seeded random order); the number of classes, how many had no bound, and how many candidates the
    constraints excluded (the excluded count covers the classes examined only)."""
    from simdist.planner.evaluate import _conjuncts

    free = [i for i, a in enumerate(spec.axes) if is_compute_free(a.key)]
    fixed = [i for i, a in enumerate(spec.axes) if i not in free]
    sizes = [len(a.values) for a in spec.axes]
    n_free = math.prod(sizes[i] for i in free)
    n_classes = math.prod(sizes[i] for i in fixed)
    free_keys = {spec.axes[i].key for i in free}
    pre_names = {a.key for a in spec.axes} | set(INPUT_NAMES)
    terms = [e for e in _conjuncts(tuple(constraints)) if e.names <= pre_names]
    class_terms = [e for e in terms if not e.names & free_keys]
    member_terms = [e for e in terms if e.names & free_keys]
    scores: list[tuple[float, int]] = []
    unbounded = excluded = 0
    known: dict[int, dict] = {}
    for c in range(n_classes):
        point = _points_at(spec.axes, [_compose(c, 0, fixed, free, sizes)])[0]
        b = _bound_score(bound_of(point), spec)
        got = inputs_of(point)
        if got is not None:
            known[c] = {**point.as_dict(), **got}
            if not all(e.evaluate(known[c]) for e in class_terms):
                excluded += n_free
                continue
        unbounded += b is None and got is not None
        scores.append((math.inf if got is None else -math.inf if b is None else b[0], c))
    ties = tie_order([c for _, c in scores], spec.seed)
    order = best(scores, len(scores), ties)
    by_class = dict((c, sc) for sc, c in scores)
    kept: list[int] = []
    rng = random.Random(spec.seed)
    i = 0
    while i < len(order) and len(kept) < n:
        j = i  # a group of classes with equal scores: all of it, or a seeded random part of it
        while j < len(order) and by_class[order[j]] == by_class[order[i]]:
            j += 1
        members = [(c, m) for c in order[i:j] for m in range(n_free)]
        if member_terms:
            admitted = [(c, m) for c, m in members if c not in known or all(
                e.evaluate({**known[c], **_points_at(spec.axes, [_compose(c, m, fixed, free, sizes)])[0].as_dict()})
                for e in member_terms)]
            excluded += len(members) - len(admitted)
            members = admitted
        need = n - len(kept)
        picked = members if len(members) <= need else [members[k] for k in sorted(rng.sample(range(len(members)), need))]
        kept += [_compose(c, m, fixed, free, sizes) for c, m in picked]
        i = j
    return sorted(kept), n_classes, unbounded, excluded


def _compose(cls: int, member: int, fixed: list[int], free: list[int], sizes: list[int]) -> int:
    """The flat index of the candidate with class index `cls` (mixed radix over the compute axes) and member
    index `member` (over the compute-free axes), the last axis varying fastest."""
    digits = [0] * len(sizes)
    for group, value in ((fixed, cls), (free, member)):
        for i in reversed(group):
            value, digits[i] = divmod(value, sizes[i])
    flat = 0
    for i, d in enumerate(digits):
        flat = flat * sizes[i] + d
    return flat


def _halving_simulate(feasible: list[dict], rungs: Sequence[Rung], job: Job, spec: PlanSpec, jobs: int,
                      log: list[dict[str, Any]]) -> tuple[list[dict], str]:
    """The simulation rungs: each takes the best ceil(n / eta) feasible candidates of the rung before it
    (at most its cap), simulates them and ranks them on the simulated figures. Returns the ranking (the
    last rung's candidates first, then each earlier rung's others, best rung first) and header text."""
    caps = rung_caps(rungs, spec.max_points, spec.confirm, spec.eta)
    est_at = next(i for i, r in enumerate(rungs) if r.kind == "estimate")
    entered = log[-1]["entered"]
    levels: list[list[dict]] = [feasible]
    parts = []
    for i in range(est_at + 1, len(rungs)):
        n = entering(entered, spec.eta, caps[i])
        pool = levels[-1]
        chosen = pool[:n]
        if not chosen:
            break
        simulated = _confirm(chosen, job, spec, jobs, rungs[i])
        ok = [r for r in simulated if r.get("rung") == rungs[i].name]
        ok_sorted = [r for r in ok if _reason(r, spec) is None] + [r for r in ok if _reason(r, spec) is not None]
        failed = [r for r in simulated if r.get("rung") != rungs[i].name]
        levels[-1] = pool[n:]
        levels.append(ok_sorted + failed)
        log.append({"rung": rungs[i].name, "entered": len(chosen), "evaluated": len(ok)})
        parts.append(f"{rungs[i].name} {len(chosen)}")
        entered = len(chosen)
    ranked = [r for level in reversed(levels) for r in level]
    return ranked, (" -> " + " -> ".join(parts)) if parts else ""


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


def _bounded_run(spec: PlanSpec, points: list[Point], run, rows: dict, bound_of, jobs: int,
                 reasons: dict[str, str] | None = None) -> tuple[int, str]:
    """Estimate `points` compute class by compute class (bound.py), best bound first, skipping each class
    whose bound is beaten by what is estimated already; returns (candidates skipped, a note for the plan).

    A class is skipped only when its best possible score is strictly worse than the k-th best feasible
    score so far (k = max(top, confirm): ranked and confirmed rows are exactly those of estimating all)
    and an estimated feasible row with a strictly higher rate at no higher price dominates it (so it is
    not on the Pareto front either). Under the goodput objective the bound is the healthy rate's: the
    useful rate is that rate times a goodput ratio <= 1 (bound.py). Classes without a bound are always
    estimated, and the note counts them with the reason.
    """
    classes: dict[str, list[Point]] = {}
    for p in points:
        classes.setdefault(_class_of(p), []).append(p)
    if len(classes) * 4 > len(points):
        run(points)  # too few candidates per class for the bounds to pay for themselves
        return 0, ""
    bounds = {ck: _bound_score(bound_of(pts[0]), spec) for ck, pts in classes.items()}
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
    return len(skipped), note + unbounded


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


@dataclass(frozen=True)
class ShortRun:
    """A loader whose scenarios run `iterations` measured iterations after their warmup and one failure
    replica (the simulate:N rung); a run given by duration without failures runs by iterations instead."""

    loader: Any
    iterations: int

    def __call__(self, base, overrides, values, base_dir, name):
        s = self.loader(base, overrides, values, base_dir, name)
        r = s.run
        return replace(s, run=replace(r, iterations=r.warmup + self.iterations, replicas=1,
                                      duration_s=r.duration_s if s.failures is not None else None))


def _confirm(rows: list[dict], job: Job, spec: PlanSpec, jobs: int, rung: Rung | None = None) -> list[dict]:
    """Simulate the best estimated rows and re-rank them on the simulated figures (`rung`: a short run;
    None or `simulate`: the scenario's own run, which marks the rows confirmed)."""
    if not rows:
        return []
    rung = rung or Rung("simulate")
    points = [Point(r["point"], tuple((a.key, r[a.key]) for a in spec.axes)) for r in rows]
    sim_job = replace(job, fidelity="simulate", constraints=())
    if rung.iterations is not None:
        sim_job = replace(sim_job, loader=ShortRun(job.loader, rung.iterations))
    out = []
    with LocalRunner(sim_job, frozenset(), min(jobs, len(points))) as runner:
        outcomes = _evaluate(runner, points)
    full = rung.iterations is None
    for est, (kind, row) in zip(rows, outcomes):
        if row is None or row["status"] != STATUS_OK:
            out.append({**est, "confirmed": False, "confirm_error": (row or {}).get("reason", kind)})
            continue
        row["time_to_train_s"] = time_to_train_s(row, spec)
        row["estimate_iteration_time_s"] = est.get("estimate_iteration_time_s", est["iteration_time_s"])
        row["confirmed"] = full
        row["rung"] = rung.name
        out.append(row)
    out.sort(key=lambda r: (0 if r.get("rung") == rung.name else 1, score(r, spec), r["point"]))
    return out
