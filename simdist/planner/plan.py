"""`simdist plan`: search the allowed space with `estimate`, confirm the best with `simulate`.

The space is a set of axes (the same as a sweep's: GPU type and count, node interior, NIC, strategy,
bucket size, compression, ...), zipped groups of axes advancing together. How it is searched (`search`):
`exhaustive` estimates every point; `halving` runs successive halving over the fidelity ladder bound ->
estimate -> simulate:N -> simulate (halving.py for the ladder and its rules, halving_search.py for the
steps); `sample` estimates a seeded random sample of `max_points` points, then a local search that
changes one factor at a time around the best point until nothing improves; `auto` (the default) is
exhaustive up to `max_points` and halving beyond. Under `prune` (the default), compute classes whose
compute-only throughput bound cannot reach the top-k or the front are not estimated at all (bound.py,
prune.py). The best `confirm` points by the objective are simulated and re-ranked on the simulated
figures. The Pareto front is throughput against price per hour over every feasible estimated point
(useful throughput under the goodput objective). Every candidate gets a status with its reason
(candidates.py): ranked, pruned (by memory, compute bound, constraint, ...), infeasible, invalid. A space
whose axes are all layout keys (tp, pp, dp, cp, ep, ZeRO, virtual stages, schedule, micro-batch, recomputation,
sequence parallelism, precision) is pruned in arrays and estimated best bound first (layout_search.py).
The options were checked where the plan was read (io/sweep_load.py); here they are only used.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from simdist.errors import ScenarioError
from simdist.planner.axes import Factor, Point, expand, flat_index, points_at, space_size, values_key
from simdist.planner.bound import ClassBound, compute_bound, no_bound_reason
from simdist.planner.candidates import Examined, candidate_rows
from simdist.planner.evaluate import PRUNED, Job, _conjuncts
from simdist.planner.executors import LocalRunner, context_order, default_jobs
from simdist.planner.halving import Rung, rungs_from_names
from simdist.planner.halving_search import estimate_rungs, simulation_rungs
from simdist.planner import layout_search
from simdist.planner.objective import (Objective, PlanSpec, SearchMethod, drop_reason, rate, score,  # noqa: F401
                                       time_to_train_s, useful_rate)
from simdist.planner.pareto import pareto_front
from simdist.planner.prune import bounded_run, class_of
from simdist.planner.rows import STATUS_OK, input_values
from simdist.progress import Progress

BAR_DELAY_S = 1.0  # a phase quicker than this leaves no progress bar behind


@dataclass
class Plan:
    """The search's outcome: ranked candidates (confirmed first), the Pareto front, every candidate's
    status (`candidates`, candidates.py), and counts."""

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
    candidates: list[dict[str, Any]] = field(default_factory=list)  # every candidate with its status
    unlisted: int = 0  # candidates never examined and not listed (a space too large to list whole)


class Meter:
    """The plan's progress on a terminal, one bar per phase (simdist.progress: silent in a pipe, under
    --json's quiet(), and for a phase shorter than BAR_DELAY_S)."""

    def __init__(self) -> None:
        self.bar: Progress | None = None

    def phase(self, total: int, label: str) -> None:
        self.close()
        if total > 0:
            self.bar = Progress(total, label=label, delay_s=BAR_DELAY_S)

    def advance(self, n: int) -> None:
        if self.bar is not None and n:
            self.bar.advance(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _evaluate(runner: LocalRunner, points: Sequence[Point], meter: Meter | None = None
              ) -> list[tuple[str, dict | None]]:
    """Outcomes in the order of `points`, run grouped by cluster (the runner returns chunks as they finish)."""
    by_index: dict[int, tuple[str, dict | None]] = {}
    for batch in runner.run(context_order(points)):
        by_index.update((i, (kind, row)) for i, kind, row in batch)
        if meter is not None:
            meter.advance(len(batch))
    return [by_index[p.index] for p in points]


def _neighbours(point: Point, fs: Sequence[Factor]) -> list[dict[str, Any]]:
    """The points one step away on one factor (its previous or next step: a zipped group moves together)."""
    values = point.as_dict()
    out = []
    for f in fs:
        i = f.index_of(values)
        for j in (i - 1, i + 1):
            if 0 <= j < len(f.steps):
                out.append({**values, **dict(f.items(j))})
    return out


def search(spec: PlanSpec, base: dict, loader, *, base_dir: str = ".", name: str = "scenario",
           overrides: Sequence[str] = (), jobs: int = 0) -> Plan:
    """Estimate the space, keep what fits and meets the constraints, confirm the best by simulation.

    Draws a progress bar per phase on a terminal (none under simdist.progress.quiet())."""
    jobs = jobs or default_jobs()
    job = Job(base=base, loader=loader, base_dir=base_dir, name=name, overrides=tuple(overrides),
              fidelity="estimate", constraints=tuple(c for c in spec.constraints if "time_to_train_s" not in c))
    fs = spec.factors
    space = space_size(fs)
    rows: dict[tuple, dict] = {}
    seen = Examined()  # what happened to each candidate that never became a row (candidates.py)
    rejected: dict[str, int] = {}
    meter = Meter()

    def run(points: list[Point], label: str = "") -> None:
        if label:
            meter.phase(len(points), label)
        for point, (kind, row) in zip(points, _evaluate(runner, points, meter)):
            key = values_key(point.values)
            if kind == PRUNED:
                rejected["constraints"] = rejected.get("constraints", 0) + 1
                rows[key] = {}
                seen.excluded[key] = (point, row or {})
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

    def failed_constraint(point: Point) -> str:
        """The constraint on inputs a never-estimated candidate fails ('' when none, or its class never loaded)."""
        got = inputs.get(class_of(point))
        if got is None:
            return ""
        known = {**point.as_dict(), **got}
        failed = next((e for e in _conjuncts(job.constraints) if e.names <= set(known) and not e.evaluate(known)),
                      None)
        return f"fails {failed.text!r}" if failed is not None else ""

    seen.constraint_of = failed_constraint

    def estimate(points: list[Point]) -> str:
        """Estimate `points` (skipping, under spec.prune, classes that cannot matter); a note on the skips."""
        nonlocal pruned
        meter.phase(len(points), "candidates estimated")
        if not spec.prune:
            run(points)
            return ""
        skipped, note = bounded_run(spec, points, run, rows, bound_of, jobs, reasons, on_skip=meter.advance)
        pruned += len(skipped)
        seen.bound_skipped += skipped
        return note

    method = SearchMethod(spec.search)
    layouts = method in (SearchMethod.AUTO, SearchMethod.EXHAUSTIVE) and layout_search.applies(spec)
    if method == SearchMethod.AUTO and layouts:
        method = SearchMethod.EXHAUSTIVE
    if method == SearchMethod.AUTO:
        method = SearchMethod.EXHAUSTIVE if space <= spec.max_points else SearchMethod.HALVING
    rungs = rungs_from_names(spec.rungs) if method == SearchMethod.HALVING else ()
    rung_log: list[dict[str, Any]] = []
    layout_bounds: dict[int, ClassBound] = {}  # per candidate of a layout space (layout_search.py)
    started = time.perf_counter()
    try:
        with LocalRunner(job, frozenset(), jobs) as runner:  # one set of workers, warm, for every round
            found = (layout_search.search_layouts(spec, job, lambda p: run(p), rows, jobs, meter) if layouts
                     else None)
            if found is not None:  # a layout space: pruned in arrays, estimated best bound first
                text = "exhaustive over layouts; " + found.text
                pruned = len(found.skipped)
                seen.bound_skipped += found.skipped
                seen.excluded.update(found.excluded)
                layout_bounds = found.bounds
                rung_log.append({"rung": "estimate", "entered": space, "evaluated": len(rows)})
                seen.unexamined = ""
            elif method == SearchMethod.EXHAUSTIVE:
                text = "exhaustive" + estimate(expand(spec.axes, spec.zipped))
                rung_log.append({"rung": "estimate", "entered": space, "evaluated": len(rows)})
                seen.unexamined = ""
            elif method == SearchMethod.SAMPLE:
                n = min(space, spec.max_points)
                sample = sorted(random.Random(spec.seed).sample(range(space), n))
                note = estimate(points_at(fs, sample))
                text = f"random sample of {n} of {space}{note and ' (' + note[2:] + ')'}, then local search"
                _local_search(spec, rows, run)
                rung_log.append({"rung": "estimate", "entered": n, "evaluated": len(rows)})
                seen.unexamined = f"outside the seeded sample of {n} (search sample) and its local search"
            else:
                text = estimate_rungs(spec, rungs, space, bound_of, inputs_of, job.constraints, estimate, rows, run,
                                      rung_log, _local_search)
                seen.unexamined = ("below the bound rung's cut (successive halving)" if rungs[0].kind == "bound"
                                   else f"outside the seeded sample of {rung_log[-1]['entered']} (successive "
                                        "halving without a bound rung)")
            meter.close()
            feasible = [r for r in rows.values() if _feasible(r, spec, rejected)]
            feasible.sort(key=lambda r: (score(r, spec), r["point"]))
            estimated = time.perf_counter()
            if method == SearchMethod.HALVING:
                ranked, sim_text = simulation_rungs(feasible, rungs, job, spec, jobs, rung_log,
                                                    lambda *a: _confirm(*a, meter=meter))
                text += sim_text
            else:
                confirmed = _confirm(feasible[:spec.confirm], job, spec, jobs, meter=meter)
                if confirmed:
                    rung_log.append({"rung": "simulate", "entered": len(confirmed), "evaluated": len(confirmed)})
                ranked = (confirmed + feasible[len(confirmed):spec.top] if spec.top > len(confirmed)
                          else confirmed[:spec.top])
    finally:
        meter.close()
    whole = _whole_ranking(ranked, feasible)
    ranked = ranked[:spec.top]
    seconds = {"estimate": estimated - started, "confirm": time.perf_counter() - estimated}
    front = pareto_front(feasible, [lambda r: -(useful_rate(r, spec) or 0.0), lambda r: r["cost_per_hour_usd"] or 0.0])
    listed, unlisted = candidate_rows(spec, fs, rows, seen, whole, front,
                                      lambda p: layout_bounds.get(p.index) or bounds.get(class_of(p)))
    return Plan(spec.objective, ranked, front, space, len(rows), len(feasible), rejected, text, pruned, seconds,
                rung_log, listed, unlisted)


def _whole_ranking(ranked: list[dict], feasible: list[dict]) -> list[dict]:
    """Every feasible candidate in rank order: the ranked list (simulated first), then the other feasible
    candidates by their estimated score."""
    placed = {r["point"] for r in ranked}
    return list(ranked) + [r for r in feasible if r["point"] not in placed]


def _local_search(spec: PlanSpec, rows: dict, run) -> None:
    """From the best point so far, estimate unvisited neighbours until no neighbour is better."""
    fs = spec.factors
    while True:
        ok = [r for r in rows.values() if r and r.get("status") == STATUS_OK and r.get("memory_fits")]
        if not ok:
            return
        best = min(ok, key=lambda r: score(r, spec))
        point = Point(best["point"], tuple((a.key, best[a.key]) for a in spec.axes))
        fresh = [n for n in _neighbours(point, fs) if values_key(n) not in rows]
        if not fresh:
            return
        run(points_at(fs, [flat_index(fs, n) for n in fresh]), "candidates estimated by the local search")
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
    replica (the simulate:N rung); a run given by duration without failures runs by iterations instead.
    The short run is set as the point's run.* values and loaded again, so the scenario's rules see it (a
    hybrid switch at or beyond the short run is refused as invalid, with the rule's message)."""

    loader: Any
    iterations: int

    def __call__(self, base, overrides, values, base_dir, name):
        s = self.loader(base, overrides, values, base_dir, name)
        short = {"run.iterations": s.run.warmup + self.iterations, "run.replicas": 1}
        if s.failures is None:
            short["run.duration"] = None
        return self.loader(base, overrides, {**values, **short}, base_dir, name)


ESTIMATE_FIGURES = ("iteration_time_s", "samples_per_s", "tokens_per_s")  # kept as estimate_* beside a simulation's


def _confirm(rows: list[dict], job: Job, spec: PlanSpec, jobs: int, rung: Rung | None = None,
             meter: Meter | None = None) -> list[dict]:
    """Simulate the best estimated rows and re-rank them on the simulated figures (`rung`: a short run;
    None or `simulate`: the scenario's own run, which marks the rows confirmed). A simulated row keeps
    the estimate's figures as estimate_iteration_time_s, estimate_samples_per_s, estimate_tokens_per_s."""
    if not rows:
        return []
    rung = rung or Rung("simulate")
    points = [Point(r["point"], tuple((a.key, r[a.key]) for a in spec.axes)) for r in rows]
    sim_job = replace(job, fidelity="simulate", constraints=())
    if rung.iterations is not None:
        sim_job = replace(sim_job, loader=ShortRun(job.loader, rung.iterations))
    out = []
    if meter is not None:
        meter.phase(len(points), f"candidates simulated ({rung.name})")
    with LocalRunner(sim_job, frozenset(), min(jobs, len(points))) as runner:
        outcomes = _evaluate(runner, points, meter)
    if meter is not None:
        meter.close()
    full = rung.iterations is None
    for est, (kind, row) in zip(rows, outcomes):
        if row is None or row["status"] != STATUS_OK:
            out.append({**est, "confirmed": False, "confirm_error": (row or {}).get("reason", kind)})
            continue
        row["time_to_train_s"] = time_to_train_s(row, spec)
        for figure in ESTIMATE_FIGURES:
            row[f"estimate_{figure}"] = est.get(f"estimate_{figure}", est.get(figure))
        row["confirmed"] = full
        row["rung"] = rung.name
        out.append(row)
    out.sort(key=lambda r: (0 if r.get("rung") == rung.name else 1, score(r, spec), r["point"]))
    return out
