"""`simdist plan`: search the allowed space with `estimate`, confirm the best with `simulate`.

The space is a set of axes (the same as a sweep's: GPU type and count, node interior, NIC, strategy,
bucket size, compression, ...). How it is searched (`search`): `exhaustive` estimates every point;
`halving` runs successive halving over the fidelity ladder bound -> estimate -> simulate:N -> simulate
(halving.py for the ladder and its rules, halving_search.py for the steps); `sample` estimates a seeded random sample of `max_points` points, then a local search
that changes one axis at a time around the best point until nothing improves; `auto` (the default) is
exhaustive up to `max_points` and halving beyond. Points that do not fit, break a constraint or
cannot run are dropped with their reasons counted; under `prune` (the default), compute classes
whose compute-only throughput bound cannot reach the top-k or the front are not estimated at all
(bound.py, prune.py). The best `confirm` points by the objective are simulated and re-ranked on
the simulated figures. The Pareto front is throughput against price per
hour over every feasible estimated point (useful throughput under the goodput objective).
Every ranked row says the highest rung it reached (`rung`: estimate, simulate:N or simulate).
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from simdist.errors import Issue, ScenarioError
from simdist.planner.axes import Axis, Point, expand, points_at, values_key
from simdist.planner.bound import ClassBound, compute_bound, no_bound_reason
from simdist.planner.evaluate import PRUNED, Job, parse_constraints
from simdist.planner.executors import LocalRunner, context_order, default_jobs
from simdist.planner.halving import Rung, check_eta, parse_rungs
from simdist.planner.halving_search import estimate_rungs, simulation_rungs
from simdist.planner.objective import (Objective, PlanSpec, SearchMethod, drop_reason, rate, score,  # noqa: F401
                                       time_to_train_s, useful_rate)
from simdist.planner.pareto import pareto_front
from simdist.planner.prune import bounded_run, class_of
from simdist.planner.rows import INPUT_NAMES, RESULT_COLUMNS, STATUS_OK, input_values


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


def _evaluate(runner: LocalRunner, points: Sequence[Point]) -> list[tuple[str, dict | None]]:
    """Outcomes in the order of `points`, run grouped by cluster (the runner returns chunks as they finish)."""
    by_index: dict[int, tuple[str, dict | None]] = {}
    for batch in runner.run(context_order(points)):
        by_index.update((i, (kind, row)) for i, kind, row in batch)
    return [by_index[p.index] for p in points]


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
            key = values_key(point.values)
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
        ck = class_of(point)
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
        return inputs[class_of(point)]

    def estimate(points: list[Point]) -> str:
        """Estimate `points` (skipping, under spec.prune, classes that cannot matter); a note on the skips."""
        nonlocal pruned
        if not spec.prune:
            run(points)
            return ""
        skipped, note = bounded_run(spec, points, run, rows, bound_of, jobs, reasons)
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
            note = estimate(points_at(spec.axes, sample))
            text = f"random sample of {n} of {space}{note and ' (' + note[2:] + ')'}, then local search"
            _local_search(spec, rows, run)
            rung_log.append({"rung": "estimate", "entered": n, "evaluated": len(rows)})
        else:
            text = estimate_rungs(spec, rungs, space, bound_of, inputs_of, job.constraints, estimate, rows, run,
                                    rung_log, _local_search)
    feasible = [r for r in rows.values() if _feasible(r, spec, rejected)]
    feasible.sort(key=lambda r: (score(r, spec), r["point"]))
    estimated = time.perf_counter()
    if method == SearchMethod.HALVING:
        ranked, sim_text = simulation_rungs(feasible, rungs, job, spec, jobs, rung_log, _confirm)
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


def _local_search(spec: PlanSpec, rows: dict, run) -> None:
    """From the best point so far, estimate unvisited neighbours until no neighbour is better."""
    while True:
        ok = [r for r in rows.values() if r and r.get("status") == STATUS_OK and r.get("memory_fits")]
        if not ok:
            return
        best = min(ok, key=lambda r: score(r, spec))
        point = Point(best["point"], tuple((a.key, best[a.key]) for a in spec.axes))
        fresh = [n for n in _neighbours(point, spec.axes) if values_key(n) not in rows]
        if not fresh:
            return
        flat = []
        for n in fresh:
            f = 0
            for a in spec.axes:
                f = f * len(a.values) + a.values.index(n[a.key])
            flat.append(f)
        run(points_at(spec.axes, flat))
        new_best = min((r for r in rows.values() if r and r.get("status") == STATUS_OK), key=lambda r: score(r, spec))
        if score(new_best, spec) >= score(best, spec):
            return


def _feasible(row: dict, spec: PlanSpec, rejected: dict[str, int]) -> bool:
    """A row that ran, fits in memory and meets every constraint; the others are counted by reason."""
    if not row:
        return False
    reason = drop_reason(row, spec)
    if reason:
        rejected[reason] = rejected.get(reason, 0) + 1
    return reason is None


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
