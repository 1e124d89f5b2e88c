"""Predicted vs measured scatter for `simdist validate --out` (matplotlib, Agg backend, imported lazily)."""
from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_report(report: dict[str, Any], path: str | Path) -> Path | None:
    """Log-log scatter of measured against predicted seconds with the y = x line and a +-10 % band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [c for c in report["cases"] if c["predicted"] is not None]
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(6, 5))
    for bound, marker, label in ((True, "o", "network-bound"), (False, "s", "DDP step")):
        sel = [c for c in pts if c["network_bound"] is bound]
        if sel:
            ax.scatter([c["predicted"] for c in sel], [c["measured"] for c in sel], marker=marker, label=label)
    lo = min(min(c["predicted"], c["measured"]) for c in pts) * 0.8
    hi = max(max(c["predicted"], c["measured"]) for c in pts) * 1.25
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="grey", alpha=0.2, label="+-10 %")
    ax.set(xscale="log", yscale="log", xlabel="predicted s", ylabel="measured s",
           title=f"simdist validate ({'calibrated' if report.get('calibration') else 'uncalibrated'})")
    ax.legend()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(out)
    return out
