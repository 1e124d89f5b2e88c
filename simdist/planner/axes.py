"""Sweep axes as data: a scenario key and its values, expanded into points (a product, with zipped groups).

Values come from lists or from `range(start, stop, step)` (stop excluded, as in Python) and
`geom(start, stop, n)` (n values from start to stop inclusive, geometric; integers when start and stop
are). An axis given on the command line is `key=v1,v2,...` or `key=range(...)` / `key=geom(...)`;
each value is read by the caller's scalar parser (YAML in the CLI), so `25 MB`, `true` and `16` work.
"""
from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from simdist.errors import Issue, ScenarioError
from simdist.planner.rows import canonical

_GENERATOR = re.compile(r"^\s*(range|geom)\s*\((.*)\)\s*$")
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


def generator_values(text: str, key: str) -> tuple[Any, ...] | None:
    """The values of `range(...)` or `geom(...)`, or None when `text` is neither."""
    m = _GENERATOR.match(text) if isinstance(text, str) else None
    if m is None:
        return None
    kind, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
    try:
        nums = [_number(a) for a in args]
    except ValueError:
        raise ScenarioError(Issue(key, f"got {text!r}; {kind}() takes plain numbers, e.g. "
                                       f"{'range(2, 34, 2)' if kind == 'range' else 'geom(2, 32, 5)'}")) from None
    if len(nums) != 3:
        raise ScenarioError(Issue(key, f"got {text!r}; {kind}() takes three numbers: "
                                       f"{'start, stop, step' if kind == 'range' else 'start, stop, n'}"))
    return _range(nums, text, key) if kind == "range" else _geom(nums, text, key)


def _number(text: str) -> int | float:
    return int(text) if re.fullmatch(r"[+-]?\d+", text) else float(text)


def _range(nums: list, text: str, key: str) -> tuple:
    start, stop, step = nums
    if step == 0 or (stop - start) * step < 0:
        raise ScenarioError(Issue(key, f"got {text!r}; the step must be non-zero and lead from start towards stop"))
    count = math.ceil((stop - start) / step - 1e-12)
    if count > MAX_POINTS:
        raise ScenarioError(Issue(key, f"got {text!r}: {count} values; at most {MAX_POINTS} per axis"))
    ints = all(isinstance(x, int) for x in nums)
    return tuple(start + i * step if ints else round(start + i * step, 12) for i in range(count))


def _geom(nums: list, text: str, key: str) -> tuple:
    start, stop, n = nums
    if not isinstance(n, int) or n < 1 or start <= 0 or stop <= 0:
        raise ScenarioError(Issue(key, f"got {text!r}; geom(start, stop, n) needs start, stop > 0 and an integer n >= 1"))
    if n == 1:
        return (start,)
    ratio = (stop / start) ** (1 / (n - 1))
    raw = [start * ratio ** i for i in range(n)]
    raw[-1] = stop
    if isinstance(start, int) and isinstance(stop, int):
        return tuple(dict.fromkeys(int(round(x)) for x in raw))
    return tuple(round(x, 12) for x in raw)


def split_values(text: str) -> list[str]:
    """'a,b,[1, 2],{x: 1}' -> ['a', 'b', '[1, 2]', '{x: 1}']: commas inside brackets or quotes do not split."""
    out, depth, quote, cur = [], 0, "", []
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur).strip())
    return out


def parse_axis(text: str, parse_scalar: Callable[[str], Any]) -> Axis:
    """`key=v1,v2` or `key=range(...)`/`key=geom(...)` from the command line."""
    key, eq, raw = text.partition("=")
    key = key.strip()
    if not eq or not key or not raw.strip():
        raise ScenarioError(Issue("--axis", f"got {text!r}; expected KEY=V1,V2,... or KEY=range(start, stop, step) "
                                            "or KEY=geom(start, stop, n)"))
    generated = generator_values(raw, key)
    if generated is not None:
        return make_axis(key, generated)
    return make_axis(key, [parse_scalar(v) for v in split_values(raw)])


def make_axis(key: str, values: Sequence[Any] | str) -> Axis:
    """An Axis from a sweep block's entry: a list of values or a range()/geom() string."""
    if isinstance(values, str):
        generated = generator_values(values, key)
        values = generated if generated is not None else (values,)
    if not isinstance(values, (list, tuple)) or not values:
        raise ScenarioError(Issue(key, f"got {values!r}; expected a non-empty list of values or range()/geom()"))
    if any(not part or part.startswith("_") for part in key.split(".")):
        raise ScenarioError(Issue(key, "an axis key is a dotted scenario key like communication.strategy"))
    return Axis(key, tuple(values))


def expand(axes: Sequence[Axis], zipped: Sequence[Sequence[str]] = ()) -> list[Point]:
    """Every point: zipped axes advance together (equal lengths), the rest form a Cartesian product.

    Order: axes in the order given, the last varying fastest; a zipped group sits where its first axis is.
    """
    by_key = {a.key: a for a in axes}
    if len(by_key) != len(axes):
        dup = sorted({a.key for a in axes if sum(b.key == a.key for b in axes) > 1})
        raise ScenarioError(Issue("--axis", f"axis {', '.join(dup)} is given twice; give each key once"))
    group_of: dict[str, int] = {}
    for g, keys in enumerate(zipped):
        for k in keys:
            if k not in by_key:
                raise ScenarioError(Issue("--zip", f"{k!r} is not an axis; axes are {', '.join(by_key)}"))
            if k in group_of:
                raise ScenarioError(Issue("--zip", f"{k!r} is in two zipped groups"))
            group_of[k] = g
        lengths = {len(by_key[k].values) for k in keys}
        if len(lengths) > 1:
            raise ScenarioError(Issue("--zip", f"zipped axes {', '.join(keys)} have different lengths "
                                               f"({', '.join(str(len(by_key[k].values)) for k in keys)})"))
    factors: list[list[tuple[tuple[str, Any], ...]]] = []
    placed: set[int] = set()
    for a in axes:
        g = group_of.get(a.key)
        if g is None:
            factors.append([((a.key, v),) for v in a.values])
        elif g not in placed:
            placed.add(g)
            keys = zipped[g]
            factors.append([tuple((k, by_key[k].values[i]) for k in keys) for i in range(len(a.values))])
    total = math.prod(len(f) for f in factors)
    if total > MAX_POINTS:
        raise ScenarioError(Issue("--axis", f"the sweep has {total} points; at most {MAX_POINTS}"))
    return [Point(i, tuple(kv for part in combo for kv in part))
            for i, combo in enumerate(itertools.product(*factors))]


def values_key(values: Any) -> str:
    """A point's axis values as a stable text (the plan's key for a candidate)."""
    return json.dumps(canonical(dict(values)), sort_keys=True)


def points_at(axes: Sequence[Axis], indices: Sequence[int]) -> list[Point]:
    """Points of the Cartesian product at flat indices (the last axis varying fastest), without expanding it."""
    out = []
    for flat in indices:
        values, rest = [], flat
        for a in reversed(axes):
            rest, i = divmod(rest, len(a.values))
            values.append((a.key, a.values[i]))
        out.append(Point(flat, tuple(reversed(values))))
    return out
