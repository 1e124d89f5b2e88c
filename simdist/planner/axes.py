"""Sweep axes as data: a scenario key and its values, expanded into points (a product, with zipped groups).

Zipped axes advance together, so the space is a product of *factors*: a plain axis is a factor of one
key, a zipped group a factor of several keys whose i-th step takes every key's i-th value (a GPU and
its node interior, say). Axes are parsed and checked in io/sweep_axes.py; here they are only expanded.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from typing import Any, Sequence

from simdist.planner.rows import canonical

MAX_POINTS = 10_000_000


@dataclass(frozen=True)
class Axis:
    """One swept scenario key (dotted, as `--set` takes it) and the values it takes, in order."""

    key: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Point:
    """One combination: its index in the sweep, the override per axis, and those values by key."""

    index: int
    values: tuple[tuple[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.values)


@dataclass(frozen=True)
class Factor:
    """One independent dimension of the space: one axis, or a zipped group of axes that step together."""

    keys: tuple[str, ...]
    steps: tuple[tuple[Any, ...], ...]  # per step, one value per key

    def items(self, i: int) -> tuple[tuple[str, Any], ...]:
        return tuple(zip(self.keys, self.steps[i]))

    def index_of(self, values: dict[str, Any]) -> int:
        """The step whose values `values` has at this factor's keys."""
        return self.steps.index(tuple(values[k] for k in self.keys))


def factors(axes: Sequence[Axis], zipped: Sequence[Sequence[str]] = ()) -> list[Factor]:
    """The space's factors in axis order (a zipped group sits where its first axis is); io/sweep_axes.py
    check_space has refused duplicate keys and unequal zipped lengths."""
    by_key = {a.key: a for a in axes}
    assert len(by_key) == len(axes), "duplicate axis keys (io.sweep_axes.check_space refuses them)"
    group_of = {k: g for g, keys in enumerate(zipped) for k in keys}
    out: list[Factor] = []
    placed: set[int] = set()
    for a in axes:
        g = group_of.get(a.key)
        if g is None:
            out.append(Factor((a.key,), tuple((v,) for v in a.values)))
        elif g not in placed:
            placed.add(g)
            keys = tuple(zipped[g])
            n = len(by_key[keys[0]].values)
            assert all(len(by_key[k].values) == n for k in keys), "zipped axes of unequal lengths"
            out.append(Factor(keys, tuple(tuple(by_key[k].values[i] for k in keys) for i in range(n))))
    return out


def space_size(fs: Sequence[Factor]) -> int:
    return math.prod(len(f.steps) for f in fs)


def expand(axes: Sequence[Axis], zipped: Sequence[Sequence[str]] = ()) -> list[Point]:
    """Every point: zipped axes advance together (equal lengths), the rest form a Cartesian product.

    Order: axes in the order given, the last varying fastest; a zipped group sits where its first axis is.
    """
    fs = factors(axes, zipped)
    return [Point(i, tuple(kv for f, s in zip(fs, combo) for kv in f.items(s)))
            for i, combo in enumerate(itertools.product(*(range(len(f.steps)) for f in fs)))]


def values_key(values: Any) -> str:
    """A point's axis values as a stable text (the plan's key for a candidate)."""
    return json.dumps(canonical(dict(values)), sort_keys=True)


def points_at(fs: Sequence[Factor], indices: Sequence[int]) -> list[Point]:
    """Points of the space at flat indices (the last factor varying fastest), without expanding it."""
    out = []
    for flat in indices:
        parts, rest = [], flat
        for f in reversed(fs):
            rest, i = divmod(rest, len(f.steps))
            parts.append(f.items(i))
        out.append(Point(flat, tuple(kv for part in reversed(parts) for kv in part)))
    return out


def flat_index(fs: Sequence[Factor], values: dict[str, Any]) -> int:
    """The flat index of the point with these axis values (the inverse of points_at)."""
    flat = 0
    for f in fs:
        flat = flat * len(f.steps) + f.index_of(values)
    return flat
