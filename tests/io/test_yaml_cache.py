"""The catalog YAML cache (io.yaml_cache): the data read back are the parse's, entry by entry text."""
from __future__ import annotations

from importlib import resources

import pytest
import yaml

from simdist.io import catalog
from simdist.io.yaml_cache import cache_dir, cached_parse, entry_name

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse(text: str):
    return yaml.load(text, Loader=LOADER)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMDIST_CACHE_DIR", str(tmp_path / "c"))
    return tmp_path / "c"


@pytest.mark.parametrize("name", ["gpus.yaml", "links.yaml", "intra_node.yaml", "host_cpus.yaml"])
def test_every_shipped_catalog_reads_back_equal(cache, name):
    text = resources.files("simdist.hardware").joinpath("data", name).read_text("utf-8")
    first = cached_parse(text, _parse, "v")  # parsed and written
    assert len(list(cache.iterdir())) == 1
    second = cached_parse(text, lambda t: pytest.fail("parsed again"), "v")  # read back
    assert first == second == _parse(text)
    assert repr(second) == repr(_parse(text))  # same types and key order too


def test_catalog_read_gives_the_same_data_with_and_without_cache(cache, monkeypatch):
    with_cache = [catalog._read(n) for n in ("gpus.yaml", "links.yaml")]
    again = [catalog._read(n) for n in ("gpus.yaml", "links.yaml")]
    monkeypatch.setenv("SIMDIST_CACHE_DIR", "")
    assert cache_dir() is None
    without = [catalog._read(n) for n in ("gpus.yaml", "links.yaml")]
    assert with_cache == again == without


def test_an_edited_text_or_another_parser_is_another_entry(cache):
    a = cached_parse("x: 1\n", _parse, "v1")
    b = cached_parse("x: 2\n", _parse, "v1")
    c = cached_parse("x: 1\n", lambda t: {"x": "other parser"}, "v2")
    assert (a, b, c) == ({"x": 1}, {"x": 2}, {"x": "other parser"})
    assert entry_name("x: 1\n", "v1") != entry_name("x: 2\n", "v1") != entry_name("x: 1\n", "v2")
    assert len(list(cache.iterdir())) == 3


def test_corrupt_entry_is_parsed_again_and_replaced(cache):
    cached_parse("x: 1\n", _parse, "v")
    (entry,) = cache.iterdir()
    entry.write_bytes(b"\x00garbage")
    assert cached_parse("x: 1\n", _parse, "v") == {"x": 1}
    assert cached_parse("x: 1\n", lambda t: pytest.fail("parsed again"), "v") == {"x": 1}


def test_data_marshal_cannot_hold_are_not_cached(cache):
    data = cached_parse("when: 2024-01-02\n", _parse, "v")
    assert str(data["when"]) == "2024-01-02"
    assert not cache.exists() or not list(cache.iterdir())


def test_parse_errors_propagate_and_are_not_cached(cache):
    with pytest.raises(yaml.YAMLError):
        cached_parse("a: [1\n", _parse, "v")
    assert not cache.exists() or not list(cache.iterdir())


def test_unwritable_directory_still_parses(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("SIMDIST_CACHE_DIR", str(blocker / "sub"))
    assert cached_parse("x: 1\n", _parse, "v") == {"x": 1}


def test_default_location(monkeypatch, tmp_path):
    monkeypatch.delenv("SIMDIST_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "simdist"
