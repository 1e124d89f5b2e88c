"""Turn pydantic validation errors into simdist Issues: dotted YAML paths and plain messages.

Each message names the value given and what was expected; unknown keys get a difflib "did you
mean" drawn from the schema model that rejected them.
"""
from __future__ import annotations

import types
import typing
from typing import Any, Iterable

from pydantic import BaseModel, ValidationError

from simdist.errors import Issue
from simdist.io.fields import SIMDIST_ERROR
from simdist.io.schema import TAG_PREFIX, ScenarioModel


def dotted(loc: Iterable[Any]) -> str:
    """('cluster', 'nodes', 0, '~inline', 'nic') -> 'cluster.nodes.0.nic' (union tags and the '[key]' pydantic
    appends to a mapping's bad key dropped)."""
    return ".".join(str(p) for p in loc if not (isinstance(p, str) and (p.startswith(TAG_PREFIX) or p == "[key]")))


def _strip(tp: Any) -> Any:
    """Drop Annotated wrappers and a None member of an Optional."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(members) != 1:
                return tp
            tp = members[0]
        else:
            return tp


def _tag_of(member: Any) -> str | None:
    if typing.get_origin(member) is typing.Annotated:
        for meta in member.__metadata__:
            tag = getattr(meta, "tag", None)
            if isinstance(tag, str):
                return tag
    return None


def _step(tp: Any, part: Any) -> Any:
    """The type found one level down `tp` at location part `part`, or None."""
    tp = _strip(tp)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for member in typing.get_args(tp):
            if _tag_of(member) == part:
                return member
        return None
    if isinstance(part, str) and part.startswith(TAG_PREFIX):
        return tp
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        field = tp.model_fields.get(str(part))
        return field.annotation if field is not None else None
    if origin in (list, tuple):
        return typing.get_args(tp)[0]
    if origin is dict:
        return typing.get_args(tp)[1]
    return None


def _type_at(loc: Iterable[Any], root: type[BaseModel] = ScenarioModel) -> Any:
    """The schema's type at location `loc` (wrappers stripped), or None where the walk cannot follow it."""
    tp: Any = root
    for part in loc:
        tp = _step(tp, part)
        if tp is None:
            return None
    return _strip(tp)


def allowed_keys(loc: tuple[Any, ...], root: type[BaseModel] = ScenarioModel) -> list[str]:
    """The keys the schema accepts at the mapping that contains location `loc`."""
    tp = _type_at(loc[:-1], root)
    if tp is None:
        return []
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        keys: list[str] = []
        for member in typing.get_args(tp):
            m = _strip(member)
            if isinstance(m, type) and issubclass(m, BaseModel):
                keys.extend(m.model_fields)
        return keys
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return list(tp.model_fields)
    return []


def unknown_key(dotted_key: str, root: type[BaseModel] = ScenarioModel) -> Issue | None:
    """An Issue when a dotted scenario key (`cluster.nodes.0.count`) names a key the schema does not have, with
    the keys it has there; None when it exists or cannot be told (below a union, e.g. a catalog key or inline)."""
    tp: Any = root
    for part in dotted_key.split("."):
        stripped = _strip(tp)
        if isinstance(stripped, type) and issubclass(stripped, BaseModel) and part not in stripped.model_fields:
            return Issue(dotted_key, _unknown_key_text(part, list(stripped.model_fields)))
        tp = _step(tp, int(part) if part.isdigit() else part)
        if tp is None:
            return None
    return None


def _accepted_types(loc: tuple[Any, ...], root: type[BaseModel] = ScenarioModel) -> set[Any]:
    """The schema's types (wrappers stripped, a union's members apart) at location `loc`; empty where unknown."""
    tp = _type_at(loc, root)
    if tp is None:
        return set()
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return {_strip(member) for member in typing.get_args(tp)}
    return {tp}


def _unknown_key_text(key: str, allowed: list[str]) -> str:
    """"unknown key 'k' (did you mean 'x'?); expected one of: ..." for a key not among `allowed`."""
    import difflib  # only when a key is unknown: lazily, not at start-up

    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.5)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    known = f"; expected one of: {', '.join(allowed)}" if allowed else ""
    return f"unknown key '{key}'{hint}{known}"


def _got(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


_EXPECT = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number", "bool_type": "true or false",
    "bool_parsing": "true or false", "string_type": "a string", "list_type": "a list",
    "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
    "finite_number": "a finite number", "invalid_key": "a text key",
}


def _message(err: dict[str, Any], root: type[BaseModel] = ScenarioModel) -> str:
    import difflib  # only when a scenario has errors: lazily, not at start-up

    kind, loc, value, ctx = err["type"], err["loc"], err.get("input"), err.get("ctx") or {}
    if kind == SIMDIST_ERROR:
        msg = str(err["msg"])
        return msg if msg.startswith("got ") else f"got {_got(value)}; {msg}"
    if kind == "extra_forbidden":
        return _unknown_key_text(str(loc[-1]) if loc else "", allowed_keys(tuple(loc), root))
    if kind == "missing":
        return "required key is missing"
    if kind in ("enum", "literal_error"):
        expected = str(ctx.get("expected", ""))
        options = [o.strip().strip("'") for o in expected.replace(" or ", ", ").split(",")]
        close = difflib.get_close_matches(str(value), options, n=1, cutoff=0.5) if isinstance(value, str) else []
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return f"got {_got(value)}; expected one of {expected}{hint}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bound = {"greater_than": "> {gt}", "greater_than_equal": ">= {ge}", "less_than": "< {lt}",
                 "less_than_equal": "<= {le}"}[kind].format(**{k: ctx.get(k) for k in ("gt", "ge", "lt", "le")})
        # An integer given for a key that takes numbers (a ratio, a size) must not be told "expected an integer".
        integral = isinstance(value, int) and float not in _accepted_types(tuple(loc), root)
        what = "an integer" if integral else "a number"
        if kind == "greater_than" and ctx.get("gt") == 0:
            return f"got {_got(value)}; expected a positive {'integer' if integral else 'number'}"
        return f"got {_got(value)}; expected {what} {bound}"
    if kind == "too_short":
        return f"got {_got(value)}; expected at least {ctx.get('min_length')} item(s)"
    if kind == "too_long":
        return f"got {_got(value)}; expected at most {ctx.get('max_length')} item(s)"
    if kind == "string_too_short":
        return f"got {_got(value)}; expected a non-empty string"
    if kind == "string_pattern_mismatch":
        return f"got {_got(value)}; expected text matching {ctx.get('pattern')}"
    if kind in _EXPECT:
        return f"got {_got(value)}; expected {_EXPECT[kind]}"
    return f"got {_got(value)}; {err['msg']}"


def from_validation_error(error: ValidationError, root: type[BaseModel] = ScenarioModel, prefix: str = "") -> list[Issue]:
    """One Issue per pydantic error, deduplicated, in pydantic's order; `root` is the model validated (the
    scenario's, or a catalog entry's), `prefix` goes in front of every path (a catalog file and entry)."""
    out: list[Issue] = []
    seen: set[Issue] = set()
    for err in error.errors(include_url=False):
        issue = Issue(prefix + dotted(err["loc"]), _message(err, root))
        if issue not in seen:
            seen.add(issue)
            out.append(issue)
    return out
