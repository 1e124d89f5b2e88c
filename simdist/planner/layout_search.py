"""A plan over model-parallel layouts: prune the whole space in numpy, estimate best bound first, stop when exact.

1. Every candidate's validity (layout_rules.py), memory per GPU and compute bound (layout_costs.py) come from
   arrays, without a Scenario per candidate; candidates the arrays do not cover (context parallelism,
   tp_comm_overlap, data parallelism alone, a memory total within 1e-9 of the capacity) are loaded and checked
   one by one with the run's own functions (rank_memory.check_memory via io/feasibility, bound.compute_bound).
2. Invalid candidates, those that do not fit (the run's memory check, the same figures) and those failing a
   constraint on their inputs are pruned; nothing about them is estimated.
3. The rest are estimated in order of their bound's score, in rounds on the plan's worker processes, until the
   k-th best feasible estimate (k = max(top, confirm)) is strictly better than the next candidate's bound and an
   estimated candidate is faster than it at no higher price. The bound (compute, the pipeline's fill and
   drain, and the blocking tp calls at their floor: bound.pipeline_bound_s) never exceeds a candidate's
   estimated rate (the rest of the communication, bubbles and waits only add time), so every candidate left is
   worse than the k-th: the top k and the Pareto front are those of estimating every candidate. Each estimate
   is checked against its bound; one above it (which would be a bug) stops the pruning and every candidate is
   estimated.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from simdist.errors import InfeasibleError, ScenarioError
from simdist.planner.axes import Point, space_size, values_key
from simdist.planner.bound import ClassBound, compute_bound, layout_tp_floors
from simdist.planner.candidates import MEMORY_TEXT
from simdist.planner.evaluate import _conjuncts
from simdist.planner.layout_costs import PARTS, LayoutCosts, layout_costs
from simdist.planner.layout_space import (MAX_LAYOUTS, build_grid, is_layout_space, reference_scenario,
                                          step_indices, typed_ok)
from simdist.planner.objective import Objective, PlanSpec, drop_reason, rate, score, useful_rate
from simdist.planner.prune import bound_score
from simdist.planner.rows import STATUS_INFEASIBLE, STATUS_INVALID, STATUS_OK, failed_values, input_values
from simdist.strategies.rank_memory import check_memory
from simdist.units import format_memory

EDGE = 1e-9  # a memory total this close to the capacity is checked by the run's own function


@dataclass
class LayoutOutcome:
    """What the layout search did: rows (estimated, invalid, out of memory), candidates skipped by their bound
    and those a constraint on inputs excludes, each candidate's bound, and the plan's note."""

    text: str
    skipped: list[Point] = field(default_factory=list)
    excluded: dict[str, tuple[Point, dict]] = field(default_factory=dict)
    bounds: dict[int, ClassBound] = field(default_factory=dict)


def applies(spec: PlanSpec) -> bool:
    """The layout search runs for a plan whose axes are all layout keys, pruned, not under goodput, with a
    loader that knows the layout rules (io/sweep_load.py's)."""
    return spec.prune and is_layout_space(spec) and spec.objective != Objective.GOODPUT \
        and space_size(spec.factors) <= MAX_LAYOUTS and typed_ok(spec.factors) is None


def search_layouts(spec: PlanSpec, job, run: Callable, rows: dict, jobs: int, meter) -> LayoutOutcome | None:
    """Prune and estimate the layout space (module docstring); None when the space cannot be laid out in
    arrays (no candidate loads, or the reference scenario is not a training run), for the ordinary search."""
    fs = spec.factors
    ref = reference_scenario(job.base, job.overrides, fs, job.loader, job.base_dir, job.name)
    if ref is None or ref.workload.model is None or ref.failures is not None or len(ref.cluster.node_groups) != 1:
        return None
    rules = getattr(job.loader, "invalid_layouts", None)
    if rules is None:
        return None
    grid = build_grid(fs, ref, job.base, job.overrides)
    reasons = rules(grid)
    valid = reasons == ""
    costs = layout_costs(grid, valid, layout_tp_floors(ref))
    n = grid.n
    steps = step_indices(fs, n)

    def point(i: int) -> Point:
        return Point(i, tuple(kv for f, s in zip(fs, steps) for kv in f.items(int(s[i]))))

    out = LayoutOutcome("")
    known_inputs = input_values(ref)
    for i in np.flatnonzero(~valid):
        p = point(int(i))
        rows[_key(p)] = {"point": p.index, **p.as_dict(), **failed_values(STATUS_INVALID, str(reasons[i]), "estimate",
                                                                           ref)}
    edge = costs.covered & (np.abs(costs.memory_bytes - costs.capacity_bytes) <= EDGE * costs.capacity_bytes)
    scalar = np.flatnonzero(valid & (~costs.covered | edge))
    meter.phase(len(scalar), "layouts checked one by one")
    rate_b, fits = _scalar_costs(costs, scalar, point, job, rows, ref, meter)
    meter.close()
    rate_b = np.where(np.isnan(rate_b), costs.bound_samples_per_s, rate_b)
    fits = np.where(np.isin(np.arange(n), scalar), fits, costs.fits)
    for i in np.flatnonzero(valid & ~fits & costs.covered & ~np.isin(np.arange(n), scalar)):
        p = point(int(i))
        rows[_key(p)] = _memory_row(p, costs, int(i), ref)
    inputs_ok = _input_constraints(spec, job, valid & fits, point, known_inputs, out)
    candidates = np.flatnonzero(valid & fits & inputs_ok)
    tokens = costs.tokens_per_sample
    for i in candidates:
        if math.isfinite(rate_b[i]):
            out.bounds[int(i)] = ClassBound(float(rate_b[i]), tokens, costs.price_per_hour)
    order = sorted(candidates.tolist(), key=lambda i: (_bound_score(out.bounds.get(i), spec), i))
    estimated, broken = _best_first(spec, order, out.bounds, point, run, rows, jobs, meter)
    out.skipped = [point(i) for i in order[estimated:]]
    pruned_memory = int((valid & ~fits).sum())
    out.text = (f"layouts: {int((~valid).sum())} invalid, {pruned_memory} out of memory, {len(out.excluded)} "
                f"excluded by constraints, {len(order)} left: {estimated} estimated best bound first, "
                f"{len(order) - estimated} skipped by the compute bound"
                + (f"; the compute bound was exceeded by point {broken}, so every candidate was estimated"
                   if broken is not None else "")
                + (f"; {len(scalar)} checked one by one" if len(scalar) else ""))
    return out


def _key(p: Point) -> str:
    return values_key(p.values)


def _scalar_costs(costs: LayoutCosts, scalar: np.ndarray, point, job, rows: dict, ref, meter) -> tuple[
        np.ndarray, np.ndarray]:
    """Bound rate and fit of the candidates checked one by one with the run's functions (NaN / True elsewhere);
    `meter` hears of each."""
    n = costs.bound_s.size
    rate_b = np.full(n, np.nan)
    fits = np.ones(n, dtype=bool)
    for i in scalar:
        meter.advance(1)
        p = point(int(i))
        try:
            s = job.loader(job.base, job.overrides, p.as_dict(), job.base_dir, job.name)
        except ScenarioError as err:
            rows[_key(p)] = {"point": p.index, **p.as_dict(),
                             **failed_values(STATUS_INVALID, "; ".join(map(str, err.issues)), "estimate", ref)}
            fits[i] = False
            continue
        try:
            check_memory(s)
        except InfeasibleError as err:
            fits[i] = False
            rows[_key(p)] = {"point": p.index, **p.as_dict(), **failed_values(STATUS_INFEASIBLE, str(err), "estimate",
                                                                               s)}
            continue
        b = compute_bound(s)
        rate_b[i] = b.samples_per_s if b is not None else math.inf
    return rate_b, fits


def _memory_row(p: Point, costs: LayoutCosts, i: int, ref) -> dict:
    """The row of a candidate that does not fit, worded as the run's memory check words it."""
    stage = int(costs.failing_stage[i])
    parts = dict(zip(PARTS, costs.parts[i].tolist()))
    total = math.fsum(parts.values())
    text = ", ".join(f"{k.replace('_', ' ')} {format_memory(v)}" for k, v in parts.items() if v > 0)
    where = f" (pipeline stage {stage})" if ref.training.parallelism.pp > 1 or p.as_dict().get(
        "training.parallelism.pp", 1) > 1 else ""
    reason = (f"{MEMORY_TEXT}: needs {format_memory(total)} per GPU ({text}), the {costs.gpu}{where} has "
              f"{format_memory(costs.capacity_bytes)}")
    row = {"point": p.index, **p.as_dict(), **failed_values(STATUS_INFEASIBLE, reason, "estimate", ref)}
    row.update(memory_per_gpu_bytes=float(costs.memory_bytes[i]), memory_fits=False)
    return row


def _input_constraints(spec: PlanSpec, job, mask: np.ndarray, point, known: dict, out: LayoutOutcome) -> np.ndarray:
    """Candidates meeting every constraint on their inputs (axis values, gpus, nodes, cost_per_hour); those
    failing one are recorded as excluded, with the constraint."""
    ok = np.ones(mask.size, dtype=bool)
    exprs = _conjuncts(job.constraints)
    if not exprs:
        return ok
    for i in np.flatnonzero(mask):
        p = point(int(i))
        values = {**p.as_dict(), **known}
        failed = next((e for e in exprs if e.names <= set(values) and not e.evaluate(values)), None)
        if failed is not None:
            ok[i] = False
            out.excluded[_key(p)] = (p, {"reason": f"fails {failed.text!r}", "gpus": known["gpus"],
                                         "cost_per_hour_usd": known["cost_per_hour"]})
    return ok


def _bound_score(b: ClassBound | None, spec: PlanSpec) -> float:
    """The best score a candidate with bound `b` can reach (-inf: no bound, estimated first)."""
    if b is None:
        return -math.inf
    got = bound_score(b, spec)
    return got[0] if got is not None else -math.inf


def _best_first(spec: PlanSpec, order: list[int], bounds: dict, point, run, rows: dict, jobs: int, meter
                ) -> tuple[int, int | None]:
    """Estimate `order` in batches until the stopping rule holds; (how many were estimated, the point whose
    estimate broke its bound or None)."""
    k = max(spec.top, spec.confirm, 1)
    batch = max(2, 8 * jobs)  # a round: enough to keep the workers busy and pair candidates on one built layout
    meter.phase(len(order), "layouts estimated, best bound first")
    done = 0
    broken = None
    while done < len(order):
        if broken is None and _can_stop(spec, rows, k, bounds.get(order[done])):
            break
        chunk = order[done:] if broken is not None else order[done:done + batch]
        points = [point(i) for i in chunk]
        run(sorted(points, key=_layout_of))  # those of one (tp, pp, dp, cp) share a worker's built cluster
        done += len(chunk)
        for p in points:
            b = bounds.get(p.index)
            row = rows.get(_key(p))
            if broken is None and b is not None and row and row.get("status") == STATUS_OK:
                r = rate(row, spec)
                bound_rate = b.samples_per_s * (b.tokens_per_sample or 1) if r == row.get("tokens_per_s") \
                    else b.samples_per_s
                if r is not None and r > bound_rate * (1 + 1e-9):
                    broken = p.index
    meter.close()
    return done, broken


def _layout_of(p: Point) -> str:
    """The candidate's placement axes (the estimate builds one cluster per layout and keeps it)."""
    d = p.as_dict()
    return repr([d.get(f"training.parallelism.{k}") for k in ("tp", "pp", "dp", "cp", "ep")])


def _can_stop(spec: PlanSpec, rows: dict, k: int, b: ClassBound | None) -> bool:
    """The k-th best feasible estimate beats the next candidate's bound, and an estimated feasible candidate is
    faster than it could be at no higher price (so it is on neither the top k nor the Pareto front)."""
    if b is None:
        return False
    feasible = [r for r in rows.values() if r and r.get("status") == STATUS_OK and drop_reason(r, spec) is None]
    if len(feasible) < k:
        return False
    kth = sorted(score(r, spec) for r in feasible)[k - 1]
    got = bound_score(b, spec)
    if got is None:
        return False
    best, r_bound, price = got
    if not kth < best - 1e-9 * abs(best):
        return False
    return any((useful_rate(f, spec) or 0.0) > r_bound and (f["cost_per_hour_usd"] or 0.0) <= price
               for f in feasible)
