"""Pareto fronts: the points no other point beats on every objective at once."""
from __future__ import annotations

from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


def pareto_front(items: Sequence[T], objectives: Sequence[Callable[[T], float]]) -> list[T]:
    """Items not dominated by any other (every objective is minimised; negate one to maximise it).

    a dominates b when a is no worse on every objective and better on at least one. Ties (equal on
    every objective) are all kept. Sorted by the first objective, then the others.
    """
    scored = [(tuple(f(x) for f in objectives), i, x) for i, x in enumerate(items)]
    scored.sort(key=lambda s: (s[0], s[1]))
    front: list[tuple[tuple[float, ...], int, T]] = []
    for s in scored:
        if not any(_dominates(f[0], s[0]) for f in front):
            front.append(s)
    return [x for _, _, x in front]


def _dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))
