"""The rules of a sweep's and a plan's options, checked before anything runs: constraints (they parse and
name known variables), the plan's objective and budget, counts, successive halving's eta and rungs,
(io/sweep_load.py check_goodput: the goodput objective has failures to count under). The planner only uses
what passed here.
"""
from __future__ import annotations

from typing import Any, Sequence

from simdist.errors import Issue, ScenarioError
from simdist.planner.expr import Expression, ExpressionError
from simdist.planner.halving import Rung
from simdist.planner.objective import Objective, PlanSpec


def check_constraints(texts: Sequence[str], known: Sequence[str], key: str = "--constraint") -> list[Expression]:
    """Parse every constraint and check its variables against `known`."""
    exprs = []
    for t in texts:
        try:
            exprs.append(Expression(t, key))
        except ExpressionError as err:
            raise ScenarioError(Issue(err.key, err.message)) from None
    for e in exprs:
        unknown = sorted(e.names - set(known))
        if unknown:
            raise ScenarioError.bad_value(key, e.text, f"variables among {', '.join(sorted(known))} "
                                                       f"(unknown: {', '.join(unknown)})")
    return exprs


_KINDS = ("bound", "estimate", "simulate")


def parse_rungs(texts: Sequence[str] | str, key: str = "--rungs") -> tuple[Rung, ...]:
    """Rungs from their names (`bound,estimate,simulate:1,simulate`), checked: known names, strictly up the
    ladder, an estimate rung (the Pareto front is drawn from estimates), a bound rung only first."""
    if isinstance(texts, str):
        texts = [t for t in texts.split(",")]
    rungs = []
    for text in texts:
        t = str(text).strip()
        kind, _, n = t.partition(":")
        if kind not in _KINDS or (n and kind != "simulate"):
            raise ScenarioError.bad_value(key, t, "a rung among bound, estimate, simulate:N (N measured "
                                                  "iterations) and simulate")
        iterations = None
        if n:
            try:
                iterations = int(n)
            except ValueError:
                iterations = 0
            if iterations < 1:
                raise ScenarioError.bad_value(key, t, "simulate:N with N >= 1 measured iterations")
        rungs.append(Rung(kind, iterations))
    if not any(r.kind == "estimate" for r in rungs):
        raise ScenarioError.bad_value(key, ",".join(texts), "rungs that include estimate (the Pareto front and "
                                                            "the compute-bound skipping use the estimates)")
    for a, b in zip(rungs, rungs[1:]):
        if b.order <= a.order:
            raise ScenarioError.bad_value(key, ",".join(texts), "rungs in increasing fidelity, each once: bound, "
                                                                "estimate, simulate:N (N increasing), simulate")
    return tuple(rungs)


def check_eta(eta: Any, key: str = "--eta") -> None:
    if isinstance(eta, bool) or not isinstance(eta, int) or eta < 2:
        raise ScenarioError.bad_value(key, eta, "an integer >= 2 (each rung keeps the best 1/eta)")


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
