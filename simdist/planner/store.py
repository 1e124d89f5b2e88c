"""The sweep's result file: a CSV that grows one whole line per finished point and survives a kill.

Rows are appended as whole lines, one `write` per finished chunk of points on an O_APPEND descriptor
(no fsync per point: the data is in the page cache, which survives the process being killed), so a
killed sweep leaves whole lines plus at most one partial last line, which the next run cuts off before
it resumes. The descriptor is fsynced when the sweep closes the file. Beside the
CSV, `FILE.sweep.json` (written atomically) records what the sweep is (axes, zipped groups,
constraints, base scenario, fidelity); a rerun with a different sweep into the same file is refused
before it starts (io/sweep_load.py check_out_file).
When a sweep completes, the file is rewritten in point order (temporary file + rename), and with
`--format parquet` the Parquet table is written the same way from it.
"""
from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

from simdist.errors import SimdistError
from simdist.planner.rows import cell
from simdist.results.writers import atomic_write_text


def _line(values: Sequence[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([v.replace("\n", " ").replace("\r", " ") for v in values])
    return buf.getvalue()


def signature_path(path: Path) -> Path:
    return path.with_name(path.name + ".sweep.json")


class SweepStore:
    """Append-only CSV of sweep rows with a fixed header; `done` holds the keys already in the file."""

    def __init__(self, path: str | Path, columns: Sequence[str], signature: dict[str, Any]) -> None:
        self.path = Path(path)
        self.columns = tuple(columns)
        self.signature = signature
        self.done: set[str] = set()
        self.resumed = 0

    def open(self) -> "SweepStore":
        """Create the file with its header, or repair an existing one and read its keys (io.sweep_load
        check_out_file has refused a file another sweep wrote)."""
        sig_file = signature_path(self.path)
        if self.path.exists() and self.path.stat().st_size > 0:
            assert read_signature(self.path) == self.signature, f"{self.path}: another sweep's file"
            self._repair_and_read()
        else:
            atomic_write_text(sig_file, json.dumps(self.signature, indent=2, sort_keys=True) + "\n")
            atomic_write_text(self.path, _line(self.columns))
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except OSError as err:
            raise SimdistError(f"cannot append to {self.path}: {err.strerror}") from err
        return self

    def _repair_and_read(self) -> None:
        data = self.path.read_bytes()
        if not data.endswith(b"\n"):  # a kill in the middle of a line: drop the partial line
            cut = data.rfind(b"\n") + 1
            with open(self.path, "r+b") as f:
                f.truncate(cut)
            data = data[:cut]
        rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
        assert rows and tuple(rows[0]) == self.columns, f"{self.path}: another sweep's columns"
        key_col = self.columns.index("key")
        self.done = {r[key_col] for r in rows[1:] if len(r) == len(self.columns)}
        self.resumed = len(self.done)

    def append(self, row: dict[str, Any]) -> None:
        """Write one finished point as one whole line."""
        self.append_many([row])

    def append_many(self, rows: Sequence[dict[str, Any]]) -> None:
        """Write finished points as whole lines with one `write` (one executor chunk at a time, not one
        system call per point); a kill inside it leaves whole lines and at most one partial last line,
        which `open` cuts off on the next run, so every point whose line is whole stays done."""
        if not rows:
            return
        data = "".join(_line([cell(row.get(c)) for c in self.columns]) for row in rows).encode("utf-8")
        view = memoryview(data)
        while view:  # a regular file takes it in one write; loop on a short one
            view = view[os.write(self._fd, view):]
        self.done.update(str(row["key"]) for row in rows)

    def close(self) -> None:
        if getattr(self, "_fd", None) is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None

    def rows(self) -> list[dict[str, str]]:
        """Every row in the file, as text, in point order (one row per key)."""
        with open(self.path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            unique = {r["key"]: r for r in reader}
        return sorted(unique.values(), key=lambda r: int(r["point"]))

    def finish(self) -> list[dict[str, str]]:
        """Rewrite the file in point order, atomically; returns its rows."""
        self.close()
        rows = self.rows()
        atomic_write_text(self.path, _line(self.columns) + "".join(_line([r[c] for c in self.columns]) for r in rows))
        return rows


def read_signature(path: str | Path) -> dict[str, Any] | None:
    """What sweep wrote the result file at `path` (its FILE.sweep.json), or None when that is missing or
    unreadable."""
    try:
        return json.loads(signature_path(Path(path)).read_text())
    except (OSError, ValueError):
        return None


def read_header(path: str | Path) -> tuple[str, ...]:
    """The result file's column names (its first line)."""
    with open(path, newline="", encoding="utf-8") as f:
        return tuple(next(csv.reader(f), []))


def write_parquet(rows: Iterable[dict[str, str]], columns: Sequence[str], path: str | Path) -> None:
    """The sweep table as Parquet (pyarrow), typed per column, written via a temporary file and a rename."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise SimdistError("--format parquet needs pyarrow: pip install 'simdist[parquet]'") from None
    typed = typed_rows(rows, columns)
    table = pa.table({c: [r[c] for r in typed] for c in columns})
    out = Path(path)
    tmp = out.with_name(f".{out.name}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, out)


def typed_rows(rows: Sequence[dict[str, str]], columns: Sequence[str]) -> list[dict[str, Any]]:
    """Rows read back from the CSV with each column typed as write_parquet types it."""
    rows = list(rows)
    cols = {c: _typed([r[c] for r in rows]) for c in columns}
    return [{c: cols[c][i] for c in columns} for i in range(len(rows))]


def _typed(values: list[str]) -> list[Any]:
    """A CSV column back to numbers / booleans where every non-empty cell is one."""
    present = [v for v in values if v != ""]
    if present and all(v in ("true", "false") for v in present):
        return [None if v == "" else v == "true" for v in values]
    try:
        nums = [None if v == "" else float(v) for v in values]
    except ValueError:
        return [None if v == "" else v for v in values]
    if all(v == "" or v.lstrip("-").isdigit() for v in values):
        return [None if n is None else int(n) for n in nums]
    return nums
