"""`simdist compare A.yaml B.yaml ...`: results side by side, with each breakdown term's difference from A."""
from __future__ import annotations

from typing import Any, Sequence

from simdist.results.records import RunResult
from simdist.tables import format_table
from simdist.units import format_duration, format_memory

# (label, how to read it from a result's JSON object)
FIGURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gpus", ("gpus",)),
    ("iteration_time_s", ("iteration_time_s",)),
    ("samples_per_s", ("throughput", "samples_per_s")),
    ("tokens_per_s", ("throughput", "tokens_per_s")),
    ("scaling_efficiency", ("scaling_efficiency",)),
    ("mfu", ("mfu",)),
    ("memory_per_gpu_bytes", ("memory", "per_gpu_bytes")),
    ("cost_per_hour_usd", ("cost", "price_per_hour_usd")),
    ("cost_per_sample_usd", ("cost", "per_sample_usd")),
    ("cost_per_token_usd", ("cost", "per_token_usd")),
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


def _shown(figure: str, value: Any, signed: bool = False) -> str:
    """A figure in its unit: '13.3 GiB', '92.49 ms', '98.8%', '$439.16'; a difference gets its sign."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-" if value is None else str(value)
    sign = ("+" if value > 0 else "-" if value < 0 else "") if signed else ("-" if value < 0 else "")
    size = abs(value)
    if figure.endswith("_bytes"):
        text = format_memory(size)
    elif figure.endswith("_per_s"):
        text = f"{size:,.1f}/s"
    elif figure.endswith("_s") or figure.startswith("breakdown_s."):
        text = format_duration(size)
    elif figure in ("mfu", "scaling_efficiency"):
        text = f"{100 * size:.1f}" + (" pts" if signed else "%")
    elif figure.endswith("_usd"):
        text = f"${size:,.2f}" if size >= 1 else f"${size:.4g}"
    elif figure == "gpus":
        text = f"{size:,.0f}"
    else:
        text = f"{size:,.1f}"
    return sign + text


def format_comparison(table: dict[str, Any]) -> str:
    """The rows in human units (GiB, ms, %, $); --json keeps SI numbers."""
    names = table["scenarios"]
    headers = ["", *names, *(f"{n} - {names[0]}" for n in names[1:])]
    body = [[r["figure"], *(_shown(r["figure"], v) for v in r["values"]),
             *(_shown(r["figure"], v, signed=True) for v in r["minus_first"])] for r in table["rows"]]
    return format_table(headers, body, title="side by side (breakdown per iteration; differences from the first)")
