"""Run one sweep point: resolve its scenario, apply the constraints, simulate or estimate, make its row.

What a worker needs travels in a `Job` (picklable: plain data and a module-level loader function),
so the same code runs in this process, in local worker processes and on Ray workers.
A point that cannot run is a row with its reason (infeasible, invalid, error), never a crash.
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from simdist.engine.simulation import simulate
from simdist.errors import InfeasibleError, ScenarioError
from simdist.planner.axes import Point
from simdist.planner.expr import Expression, ExpressionError
from simdist.planner.resume import input_key
from simdist.planner.rows import (STATUS_ERROR, STATUS_INFEASIBLE, STATUS_INVALID, canonical, failed_values,
                                  input_values, point_key, result_values)
from simdist.progress import quiet

# loader(base_data, overrides, point_values, base_dir, name) -> Scenario; raises ScenarioError
Loader = Callable[[dict, Sequence[str], dict, str, str], Any]
SKIPPED = "skipped"  # already in the file
INPUT_DONE = "in:"  # prefix, in the done set, of the input keys (resume.py) of points already in the file
PRUNED = "pruned"  # excluded by a constraint on its inputs


@dataclass(frozen=True)
class Job:
    """Everything shared by the points of one sweep."""

    base: dict  # the scenario data, without its sweep block
    loader: Loader
    base_dir: str = "."
    name: str = "scenario"
    overrides: tuple[str, ...] = ()  # --set, applied before the axes
    fidelity: str = ""  # "" = each point's run.fidelity
    constraints: tuple[str, ...] = ()
    input_names: frozenset[str] = field(default_factory=frozenset)  # variables known before a point runs
    input_prefix: str = ""  # resume.fingerprint of the sweep: rows carry input keys ("" = none, plans)


@functools.lru_cache(maxsize=64)
def _conjuncts(texts: tuple[str, ...]) -> tuple[Expression, ...]:
    """The top-level `and` terms of every constraint, parsed once per process (not once per point)."""
    return tuple(c for t in texts for c in Expression(t).conjuncts())


def evaluate_point(job: Job, point: Point, done: frozenset[str] | set[str] = frozenset()) -> tuple[str, dict | None]:
    """('row', row) for a point that ran or failed, (PRUNED, {reason, gpus, cost_per_hour_usd}) for one a
    constraint on its inputs excludes, (SKIPPED,
    None) for one already done, or (SKIPPED, {key, input_key}) for one found done only once resolved."""
    values = point.as_dict()
    head = {"point": point.index, **values}
    extra = {}
    if job.input_prefix:  # a resumed point whose inputs are unchanged is skipped before it is resolved

        extra["input_key"] = input_key(job.input_prefix, values)
        if INPUT_DONE + extra["input_key"] in done:
            return SKIPPED, None
    try:
        scenario = job.loader(job.base, job.overrides, values, job.base_dir, job.name)
    except ScenarioError as err:
        key = "invalid-" + hashlib.sha256(json.dumps(canonical(values), sort_keys=True).encode()).hexdigest()[:8]
        if key in done:
            return SKIPPED, ({"key": key, **extra} if extra else None)
        return "row", {**head, "key": key, **failed_values(STATUS_INVALID, "; ".join(map(str, err.issues)),
                                                           job.fidelity), **extra}
    fidelity = job.fidelity or scenario.run.fidelity.value
    known = {**values, **input_values(scenario)}
    exprs = _conjuncts(job.constraints)
    try:
        failed = next((e for e in exprs if e.names <= set(known) and not e.evaluate(known)), None)
    except ExpressionError as err:  # e.g. a text compared with a number: this point's values make it invalid
        return "row", {**head, "key": point_key(scenario, fidelity), **failed_values(STATUS_INVALID, str(err),
                                                                                      fidelity, scenario), **extra}
    if failed is not None:  # the constraint it fails, and what is known of it, for the plan's candidate list
        return PRUNED, {"reason": f"fails {failed.text!r}", "gpus": known["gpus"],
                        "cost_per_hour_usd": known["cost_per_hour"]}
    key = point_key(scenario, fidelity)
    if key in done:  # done, but not known by its inputs: the sweep indexes it (resume.py)
        return SKIPPED, ({"key": key, **extra} if extra else None)
    head["key"] = key
    head.update(extra)
    try:
        with quiet():  # the sweep draws the one bar; a worker's runs (inheriting the terminal) draw none
            result = simulate(scenario, fidelity=fidelity, baseline=False)  # rows carry no relative_time_to_target
    except InfeasibleError as err:
        return "row", {**head, **failed_values(STATUS_INFEASIBLE, str(err), fidelity, scenario)}
    except ScenarioError as err:
        return "row", {**head, **failed_values(STATUS_INVALID, "; ".join(map(str, err.issues)), fidelity, scenario)}
    except Exception as err:  # noqa: BLE001 - one broken point must not end the sweep
        return "row", {**head, **failed_values(STATUS_ERROR, f"internal error: {type(err).__name__}: {err}",
                                               fidelity, scenario)}
    row = {**head, **result_values(scenario, result)}
    post = [e for e in exprs if not e.names <= set(known)]
    if post:
        try:
            failed = next((e for e in post if not e.evaluate({**known, **row})), None)
        except ExpressionError as err:
            return "row", {**head, **failed_values(STATUS_INVALID, str(err), fidelity, scenario)}
        row["meets_constraints"] = failed is None
        if failed is not None:
            row["failed_constraint"] = failed.text
    return "row", row


def evaluate_chunk(job: Job, points: Sequence[Point], done: frozenset[str]) -> list[tuple[int, str, dict | None]]:
    """Several points in order (one task for an executor, so a worker reuses the clusters it built):
    (point index, outcome kind, row) each."""
    return [(p.index, *evaluate_point(job, p, done)) for p in points]
