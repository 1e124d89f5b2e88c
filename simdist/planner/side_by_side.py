"""`simdist compare A.yaml B.yaml ...`: results side by side, with each breakdown term's difference from A."""
from __future__ import annotations

from typing import Any, Sequence

from simdist.results.records import RunResult
from simdist.tables import format_table

# (label, how to read it from a result's JSON object)
FIGURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gpus", ("gpus",)),
    ("iteration_time_s", ("iteration_time_s",)),
    ("samples_per_s", ("throughput", "samples_per_s")),
    ("tokens_per_s", ("throughput", "tokens_per_s")),
    ("scaling_efficiency", ("scaling_efficiency",)),
    ("memory_per_gpu_bytes", ("memory", "per_gpu_bytes")),
)


def _get(obj: dict[str, Any], path: Sequence[str]) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def comparison(results: Sequence[tuple[str, RunResult]]) -> dict[str, Any]:
    """Rows of figures and breakdown terms per scenario, and each one's difference from the first."""
    dicts = [(name, r.to_dict()) for name, r in results]
    terms: list[str] = []
    for _, d in dicts:
        terms += [t for t in (d.get("breakdown_s") or {}) if t not in terms]
    rows = [(label, [_get(d, path) for _, d in dicts]) for label, path in FIGURES]
    rows += [(f"breakdown_s.{t}", [(d.get("breakdown_s") or {}).get(t) for _, d in dicts]) for t in terms]
    out = []
    for label, values in rows:
        if all(v is None for v in values):
            continue
        base = values[0]
        diffs = [v - base if isinstance(v, (int, float)) and isinstance(base, (int, float)) else None
                 for v in values[1:]]
        out.append({"figure": label, "values": values, "minus_first": diffs})
    return {"scenarios": [name for name, _ in dicts], "rows": out}


def format_comparison(table: dict[str, Any]) -> str:
    names = table["scenarios"]
    headers = ["", *names, *(f"{n} - {names[0]}" for n in names[1:])]
    body = [[r["figure"], *r["values"], *r["minus_first"]] for r in table["rows"]]
    return format_table(headers, body, title="side by side (breakdown in seconds per iteration)")
