"""Sweep and plan axes from their texts, checked: value lists, `range(...)`, `geom(...)`, zipped groups.

Values come from lists or from `range(start, stop, step)` (stop excluded, as in Python) and
`geom(start, stop, n)` (n values from start to stop inclusive, geometric; integers when start and stop
are). An axis given on the command line is `key=v1,v2,...` or `key=range(...)` / `key=geom(...)`;
each value is read by the caller's scalar parser (YAML in the CLI), so `25 MB`, `true` and `16` work.
`check_space` refuses what `planner.axes.expand` cannot expand (a key given twice, a zipped group
naming a non-axis or of unequal lengths, too many points), so every refusal is made here, up front.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence

from simdist.errors import Issue, ScenarioError
from simdist.planner.axes import MAX_POINTS, Axis

_GENERATOR = re.compile(r"^\s*(range|geom)\s*\((.*)\)\s*$")


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


def check_space(axes: Sequence[Axis], zipped: Sequence[Sequence[str]] = (), what: str = "sweep") -> None:
    """Refuse a space `expand` cannot make: a key given twice, a zipped group naming a key that is not an
    axis or sharing one with another group, zipped axes of unequal lengths, more than MAX_POINTS points."""
    by_key = {a.key: a for a in axes}
    if len(by_key) != len(axes):
        dup = sorted({a.key for a in axes if sum(b.key == a.key for b in axes) > 1})
        raise ScenarioError(Issue("--axis", f"axis {', '.join(dup)} is given twice; give each key once"))
    seen: set[str] = set()
    for keys in zipped:
        for k in keys:
            if k not in by_key:
                raise ScenarioError(Issue("--zip", f"{k!r} is not an axis; axes are {', '.join(by_key)}"))
            if k in seen:
                raise ScenarioError(Issue("--zip", f"{k!r} is in two zipped groups"))
            seen.add(k)
        lengths = {len(by_key[k].values) for k in keys}
        if len(lengths) > 1:
            raise ScenarioError(Issue("--zip", f"zipped axes {', '.join(keys)} have different lengths "
                                               f"({', '.join(str(len(by_key[k].values)) for k in keys)})"))
    total = math.prod(len(by_key[k].values) for k in by_key if k not in seen)
    total *= math.prod(len(by_key[z[0]].values) for z in zipped if z)
    if total > MAX_POINTS:
        raise ScenarioError(Issue("--axis", f"the {what} has {total} points; at most {MAX_POINTS}"))
