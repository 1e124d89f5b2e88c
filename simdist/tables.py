"""Plain-text presentation: aligned tables for the terminal (no logic, no third-party deps)."""
from __future__ import annotations

from typing import Sequence


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str = "") -> str:
    """Columns aligned; numbers right-aligned, text left-aligned."""
    cells = [[str(c) for c in headers]] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(_is_number(row[i]) for row in rows) and rows for i in range(len(headers))]

    def line(r: list[str]) -> str:
        return "  ".join(c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    out = [title] if title else []
    out.append(line(cells[0]))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(r) for r in cells[1:])
    return "\n".join(out)


def format_pairs(pairs: Sequence[tuple[str, object]], title: str = "") -> str:
    """A two-column key/value block."""
    width = max((len(k) for k, _ in pairs), default=0)
    out = [title] if title else []
    out.extend(f"{k.ljust(width)}  {_cell(v)}" for k, v in pairs)
    return "\n".join(out)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
