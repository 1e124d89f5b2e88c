"""Figures for model-parallel (tp x pp x dp) studies: layouts side by side, where each iteration goes.

Each function takes `layouts` = {label: Result or exception}: a layout that cannot run (an
`InfeasibleError`, e.g. it does not fit in GPU memory, exit code 3 on the command line) is given as the
exception and drawn as such (a hatched "does not fit" slot), never dropped. They return a matplotlib Figure
and save it when given `path`, like simdist.figures; `simdist.plots` re-exports them.
"""
from __future__ import annotations

from simdist.figures import _done, _new_figure

GIB = 2.0**30  # GPU memory is sold in binary units: an '80 GB' A100 holds 80 GiB (simdist.units.format_memory)

# The terms that add up to the iteration (breakdown_s of a model-parallel result, docs/model-parallel.md).
_TERMS = (("compute", "compute", "tab:blue"), ("optimizer", "optimizer", "tab:green"),
          ("tp communication", "tp_communication", "tab:red"),
          ("dp communication (exposed)", None, "tab:orange"), ("pipeline bubble", "pipeline_bubble", "tab:gray"))
_MEMORY = (("weights", "tab:blue"), ("gradients", "tab:orange"), ("optimizer_states", "tab:green"),
           ("activations", "tab:red"), ("buffers", "tab:brown"), ("workspace", "tab:gray"))


def _ran(value) -> bool:
    return not isinstance(value, BaseException)


def _no_fit(ax, x: float, top: float, err) -> None:
    """The slot of a layout that could not run: a hatched outline and the first clause of its error
    (e.g. 'does not fit in GPU memory: needs 106 GB per GPU', as the InfeasibleError words it)."""
    ax.bar([x], [top], color="none", edgecolor="black", hatch="//", linewidth=0.8)
    text = str(err).split(" (")[0].replace(": ", ":\n")
    ax.text(x, top * 0.5, text, ha="center", va="center", fontsize=6, rotation=90,
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.5})


def _no_fit_handle():
    from matplotlib.patches import Patch

    return Patch(facecolor="none", edgecolor="black", hatch="//", label="cannot run (does not fit)")


def layout_chart(layouts, path: str | None = None, title: str | None = None):
    """Two panels per layout: training tokens/s (bars labelled with MFU) and memory per GPU by part (GiB, the
    tightest pipeline stage) against the GPU's capacity. Layouts that do not fit are hatched slots."""
    fig, (ax_t, ax_m) = _new_figure(ncols=2, width=min(15.0, max(10.0, 1.2 * len(layouts))), height=5.0)
    labels = list(layouts)
    xs = range(len(labels))
    ran = {k: v for k, v in layouts.items() if _ran(v)}
    top_t = max((r.throughput.tokens_per_s for r in ran.values()), default=1.0) / 1e3
    for x, (label, r) in zip(xs, layouts.items()):
        if not _ran(r):
            _no_fit(ax_t, x, top_t, r)
            continue
        bar = ax_t.bar([x], [r.throughput.tokens_per_s / 1e3], color="tab:blue")
        ax_t.bar_label(bar, labels=[f"MFU\n{r.mfu:.1%}"], fontsize=7)
    ax_t.set_xticks(list(xs), labels, rotation=45, ha="right", fontsize=8)
    ax_t.set(ylabel="training throughput (thousand tokens/s)", xlabel="layout (tp, pp, dp)",
             ylim=(0, top_t * 1.2))
    from matplotlib.patches import Patch

    handles = [Patch(color="tab:blue", label="tokens/s (label: MFU)")]
    if len(ran) < len(layouts):
        handles.append(_no_fit_handle())
    ax_t.set_title("throughput and model FLOPs utilisation", fontsize=10)
    ax_t.legend(handles=handles, fontsize=7, loc="lower right")
    ax_t.grid(True, axis="y", alpha=0.3)

    capacity = max((r.memory.capacity_bytes for r in ran.values()), default=0.0) / GIB
    first = True
    for x, (label, r) in zip(xs, layouts.items()):
        if not _ran(r):
            _no_fit(ax_m, x, capacity or 1.0, r)
            continue
        bottom, parts = 0.0, r.memory.parts_bytes
        for part, color in _MEMORY:
            v = float((parts.get(part) if isinstance(parts, dict) else getattr(parts, part, 0.0)) or 0.0) / GIB
            ax_m.bar([x], [v], bottom=bottom, color=color, label=part.replace("_", " ") if first else None)
            bottom += v
        first = False
    if capacity:
        ax_m.axhline(capacity, color="black", linestyle="--", linewidth=1, label=f"GPU memory {capacity:.3g} GiB")
    ax_m.set_xticks(list(xs), labels, rotation=45, ha="right", fontsize=8)
    ax_m.set(ylabel="memory per GPU (GiB, tightest stage)", xlabel="layout (tp, pp, dp)", ylim=(0, capacity * 1.15 or None))
    ax_m.set_title("memory per GPU by part", fontsize=10)
    handles, _ = ax_m.get_legend_handles_labels()
    ax_m.legend(handles=handles + ([_no_fit_handle()] if len(ran) < len(layouts) else []), fontsize=7,
                loc="upper right")
    ax_m.grid(True, axis="y", alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=11)
    return _done(fig, path)


def parallel_breakdown(layouts, path: str | None = None, title: str | None = None, marks=None):
    """Stacked seconds per iteration of each layout: compute, optimizer, tp collectives, the exposed dp
    all_reduce and the pipeline bubble (they add up to the iteration), with the time pipeline transfers are in
    flight beside them as a marker (they overlap the rest). `marks` = {label: seconds} draws horizontal lines
    (e.g. the iteration a published figure implies)."""
    fig, (ax,) = _new_figure(width=min(14.0, max(7.0, 0.9 * len(layouts) + 3)), height=5.0)
    labels = list(layouts)
    ran = [r for r in layouts.values() if _ran(r)]
    top = max([r.iteration_time_s for r in ran] + list((marks or {}).values()) + [1e-9])
    first = True
    for x, (label, r) in enumerate(layouts.items()):
        if not _ran(r):
            _no_fit(ax, x, top, r)
            continue
        b, bottom = r.breakdown_s, 0.0
        for name, key, color in _TERMS:
            v = float(getattr(b, key) or 0.0) if key else max(0.0, b.exposed_communication - (b.tp_communication or 0.0))
            ax.bar([x], [v], bottom=bottom, color=color, label=name if first else None, width=0.6)
            bottom += v
        ax.scatter([x + 0.36], [b.pp_communication or 0.0], marker="_", s=120, color="tab:purple", zorder=3,
                   label="pp transfers in flight (overlapped)" if first else None)
        ax.text(x, bottom, f"{r.iteration_time_s:.3g} s", ha="center", va="bottom", fontsize=7)
        first = False
    for i, (label, y) in enumerate((marks or {}).items()):
        ax.axhline(y, color=("black", "tab:red", "tab:green")[i % 3], linestyle="--", linewidth=1, label=label)
    tilt = len(labels) > 4
    ax.set_xticks(range(len(labels)), labels, rotation=30 if tilt else 0, ha="right" if tilt else "center", fontsize=8)
    ax.set(ylabel="time per iteration (s)", xlabel="layout (tp, pp, dp)", ylim=(0, top * 1.45),
           xlim=(-0.7, len(labels) - 0.2))
    ax.set_title(title or "where each iteration goes", fontsize=10)
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(handles=handles + ([_no_fit_handle()] if len(ran) < len(layouts) else []), fontsize=7,
              loc="upper left", ncol=3 if len(labels) > 3 else 2)
    ax.grid(True, axis="y", alpha=0.3)
    return _done(fig, path)
