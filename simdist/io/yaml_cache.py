"""Parsed YAML (the catalogs and scenario files), cached on disk by the hash of its text.

Every process reads the same shipped catalogs (gpus.yaml, links.yaml, intra_node.yaml), mostly the
same scenario files, and PyYAML builds a Python object per node even with libyaml's parser: ~50 M
instructions for the catalogs, and importing PyYAML at all is ~90 M more, of a ~1.7 G start-up
(docs/performance.md, "Start-up and the 1,024-GPU point"). The plain data a parse gives (dicts, lists,
strings, numbers, booleans, None) are stored with `marshal` under a name that is the SHA-256 of the
text, of the parser's identity (the installed PyYAML's version) and of the marshal format, so an
edited file, another PyYAML or another Python never reads a stale entry: a changed text is another
file name. Reading an entry back is one small file read and one `marshal.loads` (~1 M instructions),
and a run whose YAML is all cached never imports PyYAML.

Where: `$SIMDIST_CACHE_DIR` if set (set it empty to switch the cache off), else
`$XDG_CACHE_HOME/simdist`, else `~/.cache/simdist`. One entry per distinct text (a few KB each;
nothing is pruned: delete the directory at any time). The cache is only ever an optimisation: a
directory that cannot be made or written, an unreadable or corrupt entry, or data that marshal cannot
hold (a YAML timestamp) mean the text is parsed as without it, with the same result.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import marshal
import os
from pathlib import Path
from typing import Any, Callable


@functools.cache
def pyyaml_version() -> str:
    """The installed PyYAML's version, from its metadata: the cache key of its parses, known without
    importing PyYAML (~90 M instructions, which a run whose YAML is all cached then never pays)."""
    try:
        return "PyYAML " + importlib.metadata.version("PyYAML")
    except importlib.metadata.PackageNotFoundError:  # not installed as a distribution: ask the module
        import yaml

        return "PyYAML " + yaml.__version__


def cache_dir() -> Path | None:
    """The directory entries live in, or None when the user switched the cache off."""
    chosen = os.environ.get("SIMDIST_CACHE_DIR")
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "simdist"


def entry_name(text: str, parser_version: str) -> str:
    """The file name of `text`'s entry: a hash of everything the cached data depend on."""
    digest = hashlib.sha256(f"{parser_version}\0marshal {marshal.version}\0".encode() + text.encode("utf-8"))
    return f"yaml-{digest.hexdigest()}.marshal"


def cached_parse(text: str, parse: Callable[[str], Any], parser_version: str) -> Any:
    """`parse(text)`, from the cache when an entry for this exact text (and parser) exists; errors of
    `parse` propagate unchanged and are never cached."""
    directory = cache_dir()
    if directory is None:
        return parse(text)
    path = directory / entry_name(text, parser_version)
    try:
        return marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        pass  # no entry yet (or an unreadable one): parse and write it
    data = parse(text)
    try:
        blob = marshal.dumps(data)
    except ValueError:  # e.g. a datetime from a YAML timestamp: marshal holds only plain data
        return data
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(blob)
        os.replace(tmp, path)  # atomic: a concurrent reader sees the whole entry or none
    except OSError:
        pass
    return data
