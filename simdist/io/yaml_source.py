"""Read a scenario file: text -> plain data, plus the line of every YAML path for ordering issues.

PyYAML quietly keeps the last of duplicated keys; here duplicates are reported as issues, and
every read or parse failure is a ScenarioError that names the file and the line.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simdist.errors import Issue, ScenarioError
from simdist.io.yaml_cache import cached_parse, pyyaml_version

if TYPE_CHECKING:
    import yaml


@dataclass(frozen=True)
class Source:
    """Parsed YAML data, the line (1-based) of each dotted path, and structural issues found."""

    data: Any
    lines: dict[str, tuple[int, int]] = field(default_factory=dict)
    issues: tuple[Issue, ...] = ()

    def line_of(self, path: str) -> tuple[int, int]:
        """(line, column) of `path` or of its deepest ancestor in the file; after everything when absent."""
        parts = path.split(".") if path else []
        while parts:
            key = ".".join(parts)
            if key in self.lines:
                return self.lines[key]
            parts.pop()
        return (10**9, 0)


def _walk(node: yaml.Node, prefix: str, lines: dict[str, tuple[int, int]], issues: list[Issue], depth: int = 0) -> None:
    import yaml  # imported already by _parse, the only caller

    if depth > 64:
        return
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            path = f"{prefix}.{key}" if prefix else key
            if key in seen:
                issues.append(Issue(path, f"duplicate key (line {key_node.start_mark.line + 1}); "
                                          "each key may appear once"))
            seen.add(key)
            lines.setdefault(path, (key_node.start_mark.line + 1, key_node.start_mark.column))
            _walk(value_node, path, lines, issues, depth + 1)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            path = f"{prefix}.{i}" if prefix else str(i)
            lines.setdefault(path, (item.start_mark.line + 1, item.start_mark.column))
            _walk(item, path, lines, issues, depth + 1)


def _yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}"


def _load(text: str) -> tuple[Any, "yaml.Node | None"]:
    """(data, node tree) from one parse: libyaml's parser when PyYAML has it (~10x faster than the pure
    Python one; the constructor and resolver are PyYAML's own either way, so the data are the same).
    Text libyaml rejects is parsed again by the pure-Python loader, whose error is the one reported."""
    import yaml

    loader_class = getattr(yaml, "CSafeLoader", None)
    if loader_class is not None:
        try:
            loader = loader_class(text)
            try:
                root = loader.get_single_node()
                return (loader.construct_document(root) if root is not None else None), root
            finally:
                loader.dispose()
        except (yaml.YAMLError, ValueError, TypeError, RecursionError):
            pass
    return yaml.safe_load(text), yaml.compose(text, Loader=yaml.SafeLoader)


def _parse(text: str, where: str) -> tuple[Any, dict[str, tuple[int, int]], tuple[tuple[str, str], ...]]:
    """A Source as plain data (data, lines, issues as (path, message) pairs): what io.yaml_cache keeps.
    Broken YAML raises ScenarioError with the line and column (and is never cached)."""
    import yaml  # only when the text is not in io.yaml_cache

    try:
        data, root = _load(text)
    except yaml.YAMLError as err:
        raise ScenarioError(Issue("", f"{where}: not valid YAML: {_yaml_problem(err)}")) from None
    except (ValueError, TypeError, RecursionError) as err:  # e.g. timestamps out of range
        raise ScenarioError(Issue("", f"{where}: not valid YAML: {err}")) from None
    lines: dict[str, tuple[int, int]] = {}
    issues: list[Issue] = []
    if root is not None:
        _walk(root, "", lines, issues)
    return data, lines, tuple((i.path, i.message) for i in issues)


def parse_text(text: str, where: str = "<text>") -> Source:
    """Parse YAML text (or read its parse back from io.yaml_cache: the same text gives the same Source);
    broken YAML raises ScenarioError with the line and column."""
    data, lines, issues = cached_parse(text, functools.partial(_parse, where=where), pyyaml_version())
    return Source(data, lines, tuple(Issue(path, message) for path, message in issues))


def read_file(path: Path) -> Source:
    """Read and parse a scenario file; a missing, unreadable or non-UTF-8 file is a ScenarioError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(Issue("", f"scenario file '{path}' does not exist")) from None
    except IsADirectoryError:
        raise ScenarioError(Issue("", f"'{path}' is a folder, not a scenario file")) from None
    except UnicodeDecodeError as err:
        raise ScenarioError(Issue("", f"'{path}' is not UTF-8 text ({err.reason} at byte {err.start})")) from None
    except OSError as err:
        raise ScenarioError(Issue("", f"cannot read scenario file '{path}': {err.strerror or err}")) from None
    return parse_text(text, str(path))
