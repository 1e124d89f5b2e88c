"""The sweep's text table for the terminal: inputs and the headline figures of each point."""
from __future__ import annotations

from typing import Sequence

from simdist.tables import format_table

SHOWN = ("status", "gpus", "iteration_time_s", "samples_per_s", "scaling_efficiency", "cost_per_hour_usd",
         "cost_per_sample_usd")
OPTIONAL = ("tokens_per_s", "goodput_ratio")  # shown when some point has them (LLM workloads, failure runs)
MAX_ROWS = 40


def _value(text: str) -> object:
    if text == "":
        return None
    try:
        return int(text) if text.lstrip("-").isdigit() else float(text)
    except ValueError:
        return text


def format_sweep(rows: Sequence[dict[str, str]], axis_keys: Sequence[str], path: str) -> str:
    """Up to MAX_ROWS rows with their axis values and headline figures; failed points show their reason."""
    shown = [*SHOWN, *(c for c in OPTIONAL if any(r.get(c, "") != "" for r in rows))]
    headers = ["point", *axis_keys, *shown, "reason"]
    body = [[_value(r["point"]), *(_value(r[k]) for k in axis_keys), *(_value(r[c]) for c in shown),
             (r["reason"][:60] + "...") if len(r["reason"]) > 63 else r["reason"]] for r in rows[:MAX_ROWS]]
    text = format_table(headers, body)
    scored = [r for r in rows if r.get("goodput_ratio", "") != ""]
    if len(scored) > 1:  # a failure sweep: say where goodput peaks (e.g. at the Young/Daly interval)
        best = max(scored, key=lambda r: float(r["goodput_ratio"]))
        where = ", ".join(f"{k} = {best[k]}" for k in axis_keys)
        text += f"\nhighest goodput: point {best['point']} ({where}), {float(best['goodput_ratio']):.2%}"
    if len(rows) > MAX_ROWS:
        text += f"\n... {len(rows) - MAX_ROWS} more rows in {path}"
    return text
