"""`--set dotted.key=value` overrides applied to raw scenario data before validation.

The value is read as YAML (so `false`, `16`, `"25 MB"`, `["1 MB", "1 GB"]`, `{method: topk}`
all work); numeric path parts index lists; missing mappings on the way are created.
"""
from __future__ import annotations

import copy
from typing import Any, Sequence

from simdist.errors import Issue, ScenarioError


def parse_override(text: str) -> tuple[list[str], Any]:
    """'a.b.0=value' -> (['a', 'b', '0'], parsed value)."""
    if not isinstance(text, str) or "=" not in text:
        raise ScenarioError(Issue("--set", f"got {text!r}; expected dotted.key=value"))
    key, _, raw = text.partition("=")
    key = key.strip()
    parts = key.split(".")
    if not key or any(not p.strip() for p in parts):
        raise ScenarioError(Issue("--set", f"got {text!r}; the key must be dotted names like cluster.nodes.0.count"))
    import yaml  # only when there are overrides: a run without --set need not import PyYAML at all

    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err)
        raise ScenarioError(Issue(key, f"--set value {raw!r} is not valid YAML: {problem}")) from None
    return [p.strip() for p in parts], value


def _index(container: list, part: str, path: str) -> int:
    try:
        i = int(part)
    except ValueError:
        raise ScenarioError(Issue(path, f"--set: '{part}' is not a list index (the value here is a list "
                                        f"of {len(container)} item(s))")) from None
    if not 0 <= i < len(container):
        raise ScenarioError(Issue(path, f"--set: index {i} is out of range; the list has "
                                        f"{len(container)} item(s) (0..{len(container) - 1})"))
    return i


def set_path(data: dict, parts: Sequence[str], value: Any) -> None:
    """Set `value` at `parts` inside `data` in place, creating missing mappings."""
    node: Any = data
    for depth, part in enumerate(parts):
        path = ".".join(parts[: depth + 1])
        last = depth == len(parts) - 1
        if isinstance(node, dict):
            if last:
                node[part] = value
                return
            if part not in node or node[part] is None:
                node[part] = {}
            node = node[part]
        elif isinstance(node, list):
            i = _index(node, part, path)
            if last:
                node[i] = value
                return
            if node[i] is None:
                node[i] = {}
            node = node[i]
        else:
            parent = ".".join(parts[:depth]) or "<top level>"
            raise ScenarioError(Issue(path, f"--set: cannot set '{part}' inside '{parent}', which holds "
                                            f"{node!r} ({type(node).__name__}), not a mapping or list"))


def apply_overrides(data: dict, overrides: Sequence[str]) -> dict:
    """A copy of `data` with every `key=value` override applied in order; `data` is not changed."""
    if isinstance(overrides, str):
        overrides = [overrides]
    out = copy.deepcopy(data) if data is not None else {}
    if not isinstance(out, dict):
        raise ScenarioError(Issue("", f"got {type(out).__name__} at the top level; expected a mapping "
                                      "(overrides need one)"))
    issues: list[Issue] = []
    for text in overrides:
        try:
            parts, value = parse_override(text)
            set_path(out, parts, value)
        except ScenarioError as err:
            issues.extend(err.issues)
    if issues:
        raise ScenarioError(issues)
    return out
