"""The one writer for result folders: result.json, iterations.csv, trace.json, each written atomically."""
from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from simdist.errors import SimdistError
from simdist.results.records import RunResult


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` via a temporary file in the same folder and a rename, so readers never see half a file.

    A folder that cannot be created or written (a file in the way, no permission) raises SimdistError.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise SimdistError(f"cannot write {path}: {err.strerror or err} ({err.filename or path})") from err
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; results are ordinary files, as open() would make them
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    """The process umask (reading it means setting it, so it is set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def result_json(result: RunResult) -> str:
    """The deterministic JSON text of a result (same scenario and seed -> byte-identical)."""
    return json.dumps(result.to_dict(), indent=2, allow_nan=False, default=_jsonable) + "\n"


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def iterations_csv(result: RunResult) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["iteration", "time_s"])
    for i, t in enumerate(result.iterations):
        w.writerow([i, repr(float(t))])
    return buf.getvalue()


def chrome_trace(result: RunResult) -> str:
    """Chrome trace format (Perfetto, chrome://tracing): one thread per track, complete ('X') events in us."""
    tracks = sorted({r.track for r in result.records}, key=_track_order)
    tid = {t: i for i, t in enumerate(tracks)}
    events: list[dict[str, Any]] = [
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": tid[t], "args": {"name": t}} for t in tracks
    ]
    events += [
        {"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": tid[t], "args": {"sort_index": tid[t]}} for t in tracks
    ]
    for r in result.records:
        ev = {"name": r.name, "ph": "X", "pid": 0, "tid": tid[r.track],
              "ts": round(r.start_s * 1e6, 3), "dur": round((r.end_s - r.start_s) * 1e6, 3)}
        if r.iteration >= 0:
            ev["args"] = {"iteration": r.iteration}
        events.append(ev)
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms",
                       "otherData": {"scenario": result.scenario}}, indent=None) + "\n"


def _track_order(track: str) -> tuple[int, str, int]:
    kind, _, rest = track.partition(":")
    order = {"gpu": 0, "comm": 1, "link": 2}.get(kind, 3)
    return (order, kind, int(rest) if rest.isdigit() else 0) if rest.isdigit() else (order, track, 0)


def write_result_dir(result: RunResult, out_dir: str | Path, trace: bool = True) -> list[Path]:
    """Write result.json, iterations.csv and (when there are records) trace.json into `out_dir`."""
    out = Path(out_dir)
    written = [out / "result.json"]
    atomic_write_text(written[0], result_json(result))
    if result.iterations:
        written.append(out / "iterations.csv")
        atomic_write_text(written[-1], iterations_csv(result))
    if trace and result.records:
        written.append(out / "trace.json")
        atomic_write_text(written[-1], chrome_trace(result))
    return written
