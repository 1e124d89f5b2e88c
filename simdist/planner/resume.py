"""Resuming a sweep without resolving its finished points again: a key from the point's inputs.

A row's `key` hashes the point's *resolved* scenario (rows.point_key), so checking it means resolving the
point (~0.3-1 ms: schema, catalogs, the model's layers). A resumed sweep of many finished points paid that
for every one. Here each point also gets an *input key*: a hash of its axis values under a fingerprint of
everything else its resolved scenario depends on:

* the base scenario data, the --set overrides, the fidelity, the loader and the scenario's folder;
* the contents of every file the scenario data or an axis value names (a calibration profile, a GraphML
  fabric; any string naming an existing file relative to the folder);
* simdist's own code and data files (the schema, the catalogs, the model builders): a changed simdist
  changes the fingerprint, whatever its version string says.

A string of the form `package.module:factory` (a model imported from Python code outside simdist) turns
input keys off: that code is not fingerprinted, so every point is resolved, as before.

Beside the result file, `FILE.index` holds the fingerprint on its first line and then one
`input-key,key` line per finished point, appended after the point's row. A rerun with the same fingerprint
skips a point without resolving it when its input key maps to a key that is in the result file; with
another fingerprint the index is started afresh and every point is resolved (and still skipped by its
resolved key when that is done). Equal input keys under equal fingerprints mean equal inputs to a
deterministic resolver, so a point whose resolved scenario differs is never skipped.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Iterable

from simdist.planner.rows import canonical

_FACTORY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 over the path and bytes of every file of the simdist package (its code, schema and catalogs)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                       and p.suffix not in (".pyc", ".pyo")):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def _strings(obj: Any) -> Iterable[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for v in obj:
            yield from _strings(v)


def fingerprint(base: dict, overrides: Iterable[str], fidelity: str, loader: Any, base_dir: str,
                axis_values: Iterable[Any] = ()) -> str | None:
    """What a point's resolved scenario depends on besides its axis values (None: cannot be fingerprinted)."""
    data = [base, list(overrides), list(axis_values)]
    h = hashlib.sha256()
    folder = Path(base_dir).resolve()
    files = set()
    for s in _strings(data):
        if _FACTORY.match(s.strip()):
            return None
        if 0 < len(s) < 1024 and "\n" not in s and "\0" not in s:
            try:
                p = (folder / s).resolve()
                if p.is_file():
                    files.add(p)
            except (OSError, ValueError):
                continue
    h.update(json.dumps([canonical(base), list(overrides), fidelity, f"{getattr(loader, '__module__', '')}."
                         f"{getattr(loader, '__qualname__', repr(loader))}", str(folder), code_fingerprint()],
                        sort_keys=True).encode())
    for p in sorted(files):
        h.update(str(p).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:32]


def input_key(prefix: str, values: dict[str, Any]) -> str:
    """16 hex digits over the fingerprint and the point's axis values (types kept: 1 and 1.0 differ)."""
    text = json.dumps([[k, canonical(v), type(v).__name__] for k, v in values.items()], sort_keys=True)
    return hashlib.sha256((prefix + "\0" + text).encode()).hexdigest()[:16]


def index_path(path: Path) -> Path:
    return path.with_name(path.name + ".index")


class ResumeIndex:
    """The `input-key,key` lines of one result file under one fingerprint; appended as rows finish."""

    def __init__(self, path: Path, prefix: str) -> None:
        self.path, self.prefix = path, prefix
        self.keys: dict[str, str] = {}
        self._fd: int | None = None

    def open(self, fresh: bool) -> "ResumeIndex":
        """Read the index when it has this fingerprint (and the result file is not new), else start it."""
        head = f"fingerprint {self.prefix}\n"
        data = b""
        if not fresh and self.path.exists():
            data = self.path.read_bytes()
        if data.startswith(head.encode()):
            cut = data.rfind(b"\n") + 1  # a kill in the middle of a line: drop the partial line
            if cut < len(data):
                with open(self.path, "r+b") as f:
                    f.truncate(cut)
            for line in data[len(head):cut].decode("utf-8", "replace").splitlines():
                a, _, b = line.partition(",")
                if len(a) == 16 and b:
                    self.keys[a] = b
        else:
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            tmp.write_text(head)
            os.replace(tmp, self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        return self

    def done_inputs(self, done: set[str]) -> frozenset[str]:
        """Input keys whose point's row is in the result file."""
        return frozenset(a for a, b in self.keys.items() if b in done)

    def append(self, pairs: Iterable[tuple[str, str]]) -> None:
        new = [(a, b) for a, b in pairs if a and self.keys.get(a) != b]
        text = "".join(f"{a},{b}\n" for a, b in new)
        if not text or self._fd is None:
            return
        self.keys.update(new)
        view = memoryview(text.encode())
        while view:
            view = view[os.write(self._fd, view):]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
