"""What a plan ranks by: its objective and options (PlanSpec), and each row's rate, score and feasibility."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from simdist.planner.axes import Axis, Factor, factors
from simdist.planner.expr import Expression
from simdist.planner.halving import DEFAULT_ETA, DEFAULT_RUNGS
from simdist.planner.rows import STATUS_OK


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
    zipped: tuple[tuple[str, ...], ...] = ()  # groups of axes that advance together (a GPU and its interior)

    @property
    def factors(self) -> list[Factor]:
        """The space's independent dimensions: each plain axis, and each zipped group as one."""
        return factors(self.axes, self.zipped)


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


def drop_reason(row: dict, spec: PlanSpec) -> str | None:
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


def _holds(text: str, row: dict) -> bool:
    return _parsed(text).evaluate(row)


@functools.lru_cache(maxsize=64)
def _parsed(text: str):
    return Expression(text)
