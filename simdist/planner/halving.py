"""Successive halving over simdist's fidelity ladder, for plans whose space is too large to estimate whole.

The ladder, cheapest first (each rung is also a better predictor of the simulated result than the one
below it):

    bound        the compute-only throughput bound of the candidate's compute class (bound.py): one
                 iteration plan per class, no collective, ~1 ms a class; an upper bound, blind to
                 communication (candidates of one class tie)
    estimate     the closed-form model (`simulate(..., fidelity="estimate")`), ~3-10 ms a point
    simulate:N   the discrete-event simulation over N measured iterations after the scenario's warmup,
                 one failure replica (`run.replicas = 1`)
    simulate     the discrete-event simulation with the scenario's own `run` (iterations, replicas:
                 the goodput objective's Monte Carlo over failure seeds)

Successive halving (Jamieson & Talwalkar 2016; Li et al. 2017, Hyperband's inner loop) evaluates every
candidate entering a rung at that rung's fidelity and promotes the best 1/eta of them, by the plan's
objective, to the next rung. Sizes here: the first rung takes the whole space (a bound rung) or a seeded
random sample of `max_points` (any other first rung); each later rung takes ceil(n / eta) of the n before
it, at most `max_points` at an estimate rung, and at most `confirm` x eta^j at a simulation rung that has j
simulation rungs after it, so the last rung simulates `confirm` candidates, as the exhaustive plan does.
Ties (every candidate of one compute class at the bound rung) are broken by a seeded random order, so
where the bound cannot tell candidates apart the rung is a seeded random sample. Candidates without a
bound (bound.py names which) are promoted from the bound rung before any bounded one: nothing says they
are worse. Only feasible candidates (ran, fit in memory, meet the constraints) are promoted past an
estimate or simulation rung.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Sequence


DEFAULT_ETA = 3
DEFAULT_RUNGS = ("bound", "estimate", "simulate")  # add simulate:N where a full run costs far more than N
# iterations (many failure replicas, long runs): at 1,024 GPUs a simulation's fixed cost (building its flow
# network) dominates, 3 iterations cost the same as 10 (docs/performance.md), so the default has no short rung
_KINDS = ("bound", "estimate", "simulate")


@dataclass(frozen=True)
class Rung:
    """One fidelity of the ladder: `kind` bound | estimate | simulate, and for a short simulation its
    measured iterations (None: the scenario's own run)."""

    kind: str
    iterations: int | None = None

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.iterations}" if self.iterations is not None else self.kind

    @property
    def order(self) -> tuple[int, float]:
        """Position on the ladder (a short simulation sits below the full one, shorter below longer)."""
        return (_KINDS.index(self.kind), self.iterations if self.iterations is not None else math.inf)


def rungs_from_names(names: Sequence[str]) -> tuple[Rung, ...]:
    """Rungs from names io/sweep_load.py has checked (parse_rungs there refuses bad ones)."""
    out = []
    for name in names:
        kind, _, n = str(name).strip().partition(":")
        assert kind in _KINDS, f"unchecked rung {name!r}"
        out.append(Rung(kind, int(n) if n else None))
    return tuple(out)


def rung_caps(rungs: Sequence[Rung], max_points: int, confirm: int, eta: int) -> list[int | None]:
    """The most candidates each rung may take (None: no cap but the halving's own): `max_points` at an
    estimate rung, confirm x eta^j at a simulation rung with j simulation rungs after it."""
    caps: list[int | None] = []
    for i, r in enumerate(rungs):
        if r.kind == "estimate":
            caps.append(max_points)
        elif r.kind == "simulate":
            caps.append(confirm * eta ** sum(1 for x in rungs[i + 1:] if x.kind == "simulate"))
        else:
            caps.append(None)
    return caps


def entering(n_before: int, eta: int, cap: int | None) -> int:
    """How many of `n_before` candidates the next rung takes: ceil(n / eta), at most `cap`."""
    n = -(-n_before // eta)
    return n if cap is None else min(n, cap)


def tie_order(indices: Sequence[int], seed: int) -> dict[int, float]:
    """A seeded random rank per point index, to break ties between equal scores deterministically."""
    rng = random.Random(seed)
    return {i: rng.random() for i in sorted(indices)}


def best(scored: Sequence[tuple[float, int]], n: int, ties: dict[int, float]) -> list[int]:
    """The point indices of the `n` best (lowest) scores, ties broken by `ties`."""
    return [i for _, i in sorted(scored, key=lambda si: (si[0], ties.get(si[1], 0.0), si[1]))[:n]]
