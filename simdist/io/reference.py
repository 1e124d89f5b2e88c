"""A reference of every scenario key (path, kind/unit, default, description) read off the schema.

docs/scenario.md embeds `markdown_table()`, and a test keeps the two equal, so the documentation
cannot drift from what the loader accepts.
"""
from __future__ import annotations

import ast
import enum
import functools
import inspect
import textwrap
import types
import typing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from simdist.io import fields
from simdist.io.schema import ScenarioModel
from simdist.units import format_bandwidth, format_duration, format_size

_QUANTITIES = {  # validator object -> (kind shown, formatter of SI defaults)
    id(typing.get_args(fields.Size)[1]): ("size, e.g. '25 MB'", format_size),
    id(typing.get_args(fields.SizeOrZero)[1]): ("size, e.g. '25 MB'", format_size),
    id(typing.get_args(fields.Bandwidth)[1]): ("bandwidth, e.g. '200 Gb/s'", format_bandwidth),
    id(typing.get_args(fields.Duration)[1]): ("duration, e.g. '2 us'", format_duration),
    id(typing.get_args(fields.PositiveDuration)[1]): ("duration > 0, e.g. '30 min'", format_duration),
}
UNITS = {  # the quantity a kind starts with -> the units its text may carry
    "size": "B (bytes) or b (bits), prefixes k M G T P / Ki Mi Gi Ti Pi",
    "bandwidth": "B/s or b/s, prefixes k M G T P / Ki Mi Gi Ti Pi",
    "duration": "ns, us, ms, s, min, h, d",
}


@dataclass(frozen=True)
class KeyDoc:
    """One documented key: dotted path ('[]' marks list items), kind, default, description."""

    path: str
    kind: str
    default: str
    description: str

    @property
    def unit(self) -> str:
        """The units a quantity's text may carry ('-' for keys that are not quantities)."""
        return UNITS.get(self.kind.split(",")[0].split(" ")[0], "-") if "e.g. '" in self.kind else "-"


def _quantity(tp: Any) -> tuple[str, Any] | None:
    if typing.get_origin(tp) is typing.Annotated:
        for meta in typing.get_args(tp)[1:]:
            if id(meta) in _QUANTITIES:
                return _QUANTITIES[id(meta)]
    return None


def _kind(tp: Any, metadata: list[Any]) -> str:
    q = _quantity(tp)
    if q is not None:
        return q[0]
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _kind(typing.get_args(tp)[0], list(typing.get_args(tp)[1:]) + metadata)
    if origin in (typing.Union, types.UnionType):
        parts = [_kind(a, []) for a in typing.get_args(tp) if a is not type(None)]
        return " or ".join(dict.fromkeys(parts))
    if origin is typing.Literal:
        return " | ".join(str(a) for a in typing.get_args(tp))
    if origin is list:
        return f"list of {_kind(typing.get_args(tp)[0], [])}"
    if origin is dict:
        return "mapping"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return " | ".join(m.value for m in tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "mapping"
    metadata = [x for m in metadata for x in (getattr(m, "metadata", None) or [m])]  # FieldInfo -> constraints
    name = {int: "integer", float: "number", bool: "true | false", str: "text"}.get(tp, getattr(tp, "__name__", str(tp)))
    if tp is int and any(getattr(m, "gt", None) == 0 for m in metadata):
        return "positive integer"
    if tp is int and any(getattr(m, "ge", None) == 0 for m in metadata):
        le = [getattr(m, "le") for m in metadata if getattr(m, "le", None) is not None]
        return f"integer 0..{le[0]}" if le else "integer >= 0"
    if tp is float and any(getattr(m, "le", None) == 1 for m in metadata):
        return "number, 0 < x <= 1"
    if tp is float and any(getattr(m, "gt", None) == 0 for m in metadata):
        return "number > 0"
    return name


def _default(field: Any, tp: Any) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True) if field.default is PydanticUndefined else field.default
    if value is None:
        return "-"
    if isinstance(value, BaseModel):
        return "(see keys)"
    q = _quantity(tp)
    if q is not None and isinstance(value, (int, float)):
        return "'0 s'" if value == 0 else f"'{q[1](value)}'"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, bool):
        return str(value).lower()
    if value == []:
        return "[]"
    return str(value)


def _models_in(tp: Any) -> list[tuple[str, type[BaseModel]]]:
    """(suffix, model) for every schema model reachable one level down `tp` ('[]' for list items)."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(tp) for m in _models_in(a)]
    if origin is list:
        return [(f"[]{s}", m) for s, m in _models_in(typing.get_args(tp)[0])]
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [("", tp)]
    return []


@functools.cache
def _own_docstrings(cls: type) -> dict[str, str]:
    """{field: docstring} of the string literals that follow the annotated assignments in `cls`'s own
    body (PEP 257 attribute docstrings), read from its source."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = next((n.body for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.__name__), [])
    out: dict[str, str] = {}
    for stmt, nxt in zip(body, body[1:]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
            out[stmt.target.id] = inspect.cleandoc(nxt.value.value)
    return out


def field_description(model: type[BaseModel], name: str) -> str:
    """A field's description: its Field(description=...), else the attribute docstring under it in the
    nearest class of `model`'s MRO that declares it. The schema does not ask pydantic to read the
    docstrings (use_attribute_docstrings parses every model's source at import, ~30-40 ms of each
    start-up); only this reference needs them."""
    field = model.model_fields[name]
    if field.description:
        return field.description
    for cls in model.__mro__:
        if name in getattr(cls, "__annotations__", {}):
            return _own_docstrings(cls).get(name, "")
    return ""


def keys(model: type[BaseModel] = ScenarioModel, prefix: str = "") -> list[KeyDoc]:
    """Every key under `model`, depth first, in schema order (inline forms of a union each listed)."""
    out: list[KeyDoc] = []
    seen: set[str] = set()
    for name, field in model.model_fields.items():
        tp = field.rebuild_annotation() if hasattr(field, "rebuild_annotation") else field.annotation
        path = f"{prefix}{name}"
        if path not in seen:
            seen.add(path)
            out.append(KeyDoc(path, _kind(tp, list(field.metadata)), _default(field, tp),
                              " ".join(field_description(model, name).split())))
        for suffix, sub in _models_in(tp):
            for doc in keys(sub, f"{path}{suffix}."):
                if doc.path not in seen:
                    seen.add(doc.path)
                    out.append(doc)
    return out


def markdown_table() -> str:
    """The key reference as a Markdown table."""
    rows = ["| key | type | unit | default | meaning |", "|---|---|---|---|---|"]
    for k in keys():
        rows.append(f"| `{k.path}` | {k.kind.replace('|', '&#124;')} | {k.unit} | {k.default.replace('|', '&#124;')} | "
                    f"{k.description.replace('|', '&#124;')} |")
    return "\n".join(rows) + "\n"


BEGIN, END = "<!-- keys:begin -->\n", "<!-- keys:end -->"


def render(doc_text: str) -> str:
    """`doc_text` with the part between the keys:begin and keys:end markers replaced by `markdown_table()`."""
    if BEGIN not in doc_text or END not in doc_text:
        raise ValueError(f"the document has no '{BEGIN.strip()}' ... '{END}' markers")
    head, _, rest = doc_text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}{markdown_table()}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    """`python -m simdist.io.reference [--check] [DOC]`: regenerate docs/scenario.md's key table (or check it)."""
    import argparse
    from pathlib import Path

    ap = argparse.ArgumentParser(description="Regenerate the scenario key table of docs/scenario.md from the schema.")
    ap.add_argument("doc", nargs="?", default=str(Path(__file__).resolve().parents[2] / "docs" / "scenario.md"))
    ap.add_argument("--check", action="store_true", help="exit 1 if the table differs from the schema; write nothing")
    args = ap.parse_args(argv)
    path = Path(args.doc)
    old = path.read_text(encoding="utf-8")
    new = render(old)
    if args.check:
        if new != old:
            print(f"{path}: the key table is out of date; run python -m simdist.io.reference")
            return 1
        print(f"{path}: up to date ({len(keys())} keys)")
        return 0
    if new != old:
        path.write_text(new, encoding="utf-8")
    print(f"{path}: {'rewrote' if new != old else 'unchanged'} ({len(keys())} keys)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
