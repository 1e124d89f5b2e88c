"""Scenario files parsed by libyaml (when PyYAML has it) give the same data, lines and issues as the
pure-Python parser, and broken YAML is still reported in the pure-Python parser's words."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simdist.errors import ScenarioError
from simdist.io import yaml_source
from simdist.io.yaml_source import parse_text

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p for p in (ROOT / "scenarios").rglob("*.yaml"))
needs_libyaml = pytest.mark.skipif(not hasattr(yaml, "CSafeLoader"), reason="PyYAML without libyaml")


def _pure(text: str, monkeypatch):
    with monkeypatch.context() as m:
        m.delattr(yaml, "CSafeLoader")
        m.setenv("SIMDIST_CACHE_DIR", "")  # parsed here, not read back from io.yaml_cache
        return parse_text(text)


@needs_libyaml
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_same_source_as_the_pure_python_parser(path, monkeypatch):
    text = path.read_text("utf-8")
    assert parse_text(text) == _pure(text, monkeypatch)


@needs_libyaml
def test_duplicates_empty_and_broken_text(monkeypatch):
    dup = "a: 1\nb:\n  c: 2\n  c: 3\nlist: [1, {x: 2}]\nanchor: &k {y: 1}\nalias: *k\n"
    assert parse_text(dup) == _pure(dup, monkeypatch) and parse_text(dup).issues
    assert parse_text("") == _pure("", monkeypatch) and parse_text("").data is None
    broken = "a: [1, 2\nb: 3\n"
    with pytest.raises(ScenarioError) as fast:
        parse_text(broken)
    with pytest.raises(ScenarioError) as slow:
        _pure(broken, monkeypatch)
    assert str(fast.value) == str(slow.value)



@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_same_source_read_back_from_the_cache(path, monkeypatch, tmp_path):
    text = path.read_text("utf-8")
    monkeypatch.setenv("SIMDIST_CACHE_DIR", str(tmp_path))
    parsed = parse_text(text)  # parsed, and written unless marshal cannot hold the data
    monkeypatch.setattr(yaml_source, "_parse", lambda *a, **k: pytest.fail("parsed again"))
    if list(tmp_path.iterdir()):
        assert parse_text(text) == parsed
        assert repr(parse_text(text)) == repr(parsed)
