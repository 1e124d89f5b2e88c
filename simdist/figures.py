"""Figures for notebooks and scripts (docs/api.md): each function returns a matplotlib Figure and saves it when
given `path`. They build Figures directly (no pyplot state, no backend switch), so Jupyter shows them
inline, and every axes gets a title, labelled axes with units and a legend. `simdist.plots` re-exports them.
"""
from __future__ import annotations

from pathlib import Path

from simdist.errors import SimdistError

_PHASE_COLORS = {"forward": "tab:blue", "backward": "tab:orange", "optimizer": "tab:green"}
_STRATEGY_COLORS = {"ring": "tab:blue", "tree": "tab:orange", "hierarchical": "tab:green", "ps": "tab:red",
                    "halving_doubling": "tab:purple", "torus2d": "tab:brown"}


def _new_figure(ncols: int = 1, width: float = 7.0, height: float = 4.2, nrows: int = 1):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, [ax for row in axes for ax in row]


def _done(fig, path: str | None):
    """Save `fig` to `path` when given (unwritable path or unknown format: SimdistError); return it."""
    if path is not None:
        save_figure(fig, path)
    return fig


def save_figure(fig, path: str, dpi: int = 110) -> None:
    """Write the figure (creating its folder); an unwritable path or unknown image format is a SimdistError."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi)
    except OSError as err:
        raise SimdistError(f"cannot write plot {path}: {err.strerror or err} ({err.filename or path})") from err
    except ValueError as err:  # matplotlib: unknown format from the file extension
        raise SimdistError(f"cannot write plot {path}: {err}") from err


def check_plot_path(path: str) -> str:
    """The format of a --plot path: 'png' or 'svg' by its extension; anything else is a one-line error."""
    ext = Path(path).suffix.lower().lstrip(".")
    if ext not in ("png", "svg"):
        raise SimdistError(f"cannot write plot {path}: expected a .png or .svg file name (got {ext or 'no extension'!r})")
    return ext


def cell_number(value) -> float | None:
    """A row cell as a float (rows from a CSV hold text; '' is no figure)."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def breakdown(result, path: str | None = None):
    """Where one iteration's time goes (ms): compute, communication and the part of it left exposed, codecs."""
    fig, (ax,) = _new_figure(width=7.0, height=4.0)
    draw_breakdown(ax, result)
    return _done(fig, path)


def draw_breakdown(ax, result) -> None:
    """The breakdown bars of `result` on `ax` (shared by `breakdown` and the CLI's --plot)."""
    b = result.breakdown_s
    if b is None:
        raise ValueError("this result has no breakdown (a benchmark workload): use bandwidth_curves")
    parts = [("compute", b.compute, "tab:blue"), ("optimizer", b.optimizer, "tab:green"),
             ("communication\n(total)", b.communication, "tab:red"),
             ("exposed\ncommunication", b.exposed_communication, "darkred"),
             ("compression", b.compression, "tab:purple")]
    extra = b.to_dict()  # a model-parallel run's own terms
    parts += [(label, extra[key], color) for key, label, color in (
        ("pipeline_bubble", "pipeline\nbubble", "tab:gray"), ("tp_communication", "tensor-parallel\ncommunication",
                                                                "tab:orange")) if key in extra]
    bars = ax.bar([p[0] for p in parts], [p[1] * 1e3 for p in parts], color=[p[2] for p in parts])
    iteration_ms = result.iteration_time_s * 1e3
    # a bar reaching the iteration's dashed line carries its label inside, where the line cannot cross it
    tall = [p[1] * 1e3 > 0.8 * iteration_ms for p in parts]
    text = [f"{p[1] * 1e3:.3g} ms" for p in parts]
    ax.bar_label(bars, labels=[t if not up else "" for t, up in zip(text, tall)], fontsize=8)
    ax.bar_label(bars, labels=[t if up else "" for t, up in zip(text, tall)], fontsize=8, label_type="center",
                 color="white")
    ax.axhline(iteration_ms, color="black", linestyle="--", label=f"iteration {iteration_ms:.4g} ms")
    ax.set_ylabel("time per iteration (ms)")
    ax.set_ylim(0, 1.2 * max(result.iteration_time_s, *(p[1] for p in parts)) * 1e3)
    ax.set_title(f"{result.scenario}: {result.gpus} GPUs, {result.fidelity}\n"
                 f"{result.throughput.samples_per_s:,.0f} samples/s, scaling efficiency "
                 f"{result.scaling_efficiency:.1%}", fontsize=10)
    ax.legend(loc="upper right", fontsize=8)


def timeline(result, gpus: int = 4, path: str | None = None):
    """The last simulated iteration as a Gantt chart: compute per GPU, gradient buckets per comm stream.

    Ranks of one class run identical timelines, so `gpus` tracks suffice; the title says how many of
    the run's GPUs are shown.
    """
    tracks = timeline_tracks(result, gpus)
    fig, (ax,) = _new_figure(width=11.0, height=1.2 + 0.45 * len(tracks))
    draw_timeline(ax, result, gpus, tracks)
    return _done(fig, path)


def _last_iteration(result) -> tuple[int, list]:
    records = result.run.records if hasattr(result, "run") else result.records
    if not records:
        raise ValueError("this result has no timeline (estimate fidelity or a benchmark): simulate it")
    last = max(r.iteration for r in records)
    return last, [r for r in records if r.iteration == last]


def _track_order(track: str) -> tuple[str, int]:
    kind, _, idx = track.partition(":")
    return (kind, int(idx) if idx.isdigit() else 0)


def timeline_tracks(result, gpus: int = 4) -> list[str]:
    """The tracks the timeline shows: the first `gpus` GPUs and the streams that belong to them."""
    _, recs = _last_iteration(result)
    gpu_tracks = sorted({r.track for r in recs if r.track.startswith("gpu:")}, key=_track_order)[:gpus]
    shown = {t.split(":")[1] for t in gpu_tracks}
    other = sorted({r.track for r in recs if not r.track.startswith("gpu:")
                    and (r.track.partition(":")[2] in shown or not r.track.partition(":")[2].isdigit())},
                   key=_track_order)
    return gpu_tracks + other


def _phase_color(name: str) -> str:
    """'backward fc (bucket0 ready)' is a backward segment: colour by the first word; communication is red."""
    return _PHASE_COLORS.get(name.split(" ", 1)[0], "tab:red")


def draw_timeline(ax, result, gpus: int = 4, tracks: list[str] | None = None) -> None:
    """The timeline of `result`'s last iteration on `ax`, with its legend and a title naming how many GPUs show
    (`tracks`: timeline_tracks(result, gpus), when the caller already has them)."""
    from matplotlib.patches import Patch

    last, recs = _last_iteration(result)
    t0 = min(r.start_s for r in recs)
    tracks = timeline_tracks(result, gpus) if tracks is None else tracks
    for y, track in enumerate(tracks):
        spans = [(r.start_s - t0, r.end_s - r.start_s, r.name) for r in recs if r.track == track]
        ax.broken_barh([(s * 1e3, d * 1e3) for s, d, _ in spans], (y - 0.3, 0.6),
                       facecolors=[_phase_color(n) for _, _, n in spans],
                       edgecolor="white", linewidth=0.3)
    ax.set_yticks(range(len(tracks)), tracks)
    ax.invert_yaxis()
    ax.set_xlabel("time since the iteration started (ms)")
    records = result.run.records if hasattr(result, "run") else result.records
    n_gpu = len({r.track for r in records if r.track.startswith("gpu:")})
    n_shown = sum(t.startswith("gpu:") for t in tracks)
    ax.set_title(f"{result.scenario}: iteration {last}, {n_shown} of {result.gpus} GPUs shown"
                 + ("" if n_gpu == result.gpus else f"\n({n_gpu} simulated: identical ranks run once)"), fontsize=10)
    ax.legend(handles=[Patch(color=c, label=n) for n, c in _PHASE_COLORS.items()]
              + [Patch(color="tab:red", label="gradient bucket (communication)")],
              loc="upper center", bbox_to_anchor=(0.5, -0.25 if len(tracks) < 6 else -0.12), ncol=4, fontsize=8)


def bandwidth_curves(panels, metric: str = "busbw_GBps", path: str | None = None, title: str | None = None):
    """nccl-tests-style curves: `panels` = {panel title: {line label: benchmark result}}; x = message size.

    `metric` is a collectives column: busbw_GBps, algbw_GBps or time_s (log y for time).
    """
    fig, axes = _new_figure(ncols=len(panels), width=4.6 * len(panels), height=4.0)
    for ax, (name, lines) in zip(axes, panels.items()):
        for label, res in lines.items():
            rows = res.collectives or ()
            ys = [getattr(r, metric) * (1e3 if metric == "time_s" else 1.0) for r in rows]
            ax.plot([r.size_bytes for r in rows], ys, marker="o", markersize=3, label=label,
                    color=_STRATEGY_COLORS.get(str(label)))
        ax.set_xscale("log")
        if metric == "time_s":
            ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel({"busbw_GBps": "bus bandwidth (GB/s)", "algbw_GBps": "algorithm bandwidth (GB/s)",
                       "time_s": "time per call (ms)"}.get(metric, metric))
        ax.set_title(name, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return _done(fig, path)


def breakeven_chart(tables, path: str | None = None):
    """Speedup of each codec over no compression vs NIC bandwidth, one panel per compare.BreakevenTable.

    Log-log, so a x26 codec and a x1.05 one are both readable; each break-even bandwidth is marked.
    """
    fig, axes = _new_figure(ncols=len(tables), width=4.8 * len(tables), height=4.2)
    for ax, table in zip(axes, tables):
        gbps = [b * 8 / 1e9 for b in table.bandwidths_Bps]
        for m in table.methods:
            if m == "none":
                continue
            pts = [(x, y) for x, y in zip(gbps, table.speedup(m)) if y is not None]
            (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=m)
            be = table.breakeven_Bps.get(m)
            if be is not None:
                ax.axvline(be * 8 / 1e9, color=line.get_color(), linestyle=":", linewidth=1)
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--", label="none (x1)")
        ax.set(xscale="log", yscale="log", xlabel="NIC bandwidth (Gb/s)", ylabel="speedup over no compression")
        _times_axis(ax)
        ax.set_title(f"{table.scenario} ({table.fidelity})\ndotted: break-even bandwidth", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return _done(fig, path)


def _times_axis(ax) -> None:
    """Label a log y axis of ratios as x0.8, x2, x50 (not 8 x 10^-1)."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    fmt = FuncFormatter(lambda v, _: f"x{v:g}")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(fmt)
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def grouped_bars(groups, metric: str = "iteration_time_s", path: str | None = None, title: str | None = None,
                 ylabel: str | None = None, xlabel: str | None = None):
    """Bars of one result field: `groups` = {group label: {bar label: result}} (e.g. fabric -> strategy).

    `metric` is a result attribute (iteration_time_s, in ms) or 'breakdown_s.<part>' (ms).
    """
    def value(res) -> float:
        obj = res
        for part in metric.split("."):
            obj = getattr(obj, part)
        return float(obj) * 1e3

    labels = list(dict.fromkeys(k for bars in groups.values() for k in bars))
    fig, (ax,) = _new_figure(width=max(6.0, 1.6 * len(groups) * max(1, len(labels)) / 2), height=4.2)
    width = 0.8 / max(1, len(labels))
    for j, label in enumerate(labels):
        xs = [i + (j - (len(labels) - 1) / 2) * width for i, bars in enumerate(groups.values()) if label in bars]
        ys = [value(bars[label]) for bars in groups.values() if label in bars]
        rects = ax.bar(xs, ys, width=width, label=label, color=_STRATEGY_COLORS.get(str(label)))
        ax.bar_label(rects, fmt=lambda v: f"{v:.3g}" if v < 100 else f"{v:,.0f}", fontsize=7)
    ax.set_xticks(range(len(groups)), list(groups))
    if xlabel:
        ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel or f"{metric} (ms)")
    ax.set_title(title or metric, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return _done(fig, path)


def link_utilization(results, path: str | None = None, title: str | None = None):
    """The busiest links of each result (result.links), one panel per {label: result}, bars by link kind.

    NIC links (to or from a node) and switch-to-switch links (uplinks) get different colours, so an
    oversubscribed uplink that saturates first stands out.
    """
    from matplotlib.patches import Patch

    fig, axes = _new_figure(ncols=len(results), width=3.6 * len(results), height=4.2)
    for ax, (label, res) in zip(axes, results.items()):
        links = list(res.links)
        colors = ["tab:blue" if "/" in lk.link else "tab:red" for lk in links]
        ax.barh(range(len(links)), [lk.utilization * 100 for lk in links], color=colors)
        ax.set_yticks(range(len(links)), [lk.link for lk in links], fontsize=6)
        ax.invert_yaxis()
        ax.set_xlim(0, 105)
        ax.set_xlabel("utilisation during the run (% of capacity)")
        ax.set_title(label, fontsize=9)
    fig.legend(handles=[Patch(color="tab:blue", label="NIC link (host to leaf)"),
                        Patch(color="tab:red", label="switch link (leaf to spine)")],
               loc="outside lower center", ncol=2, fontsize=8)
    fig.suptitle(title or "the busiest links (top 10 per run)")
    return _done(fig, path)


def predicted_vs_measured(report: dict, path: str | None = None, band: float = 0.10, title: str | None = None):
    """A `simdist validate` report: predicted against measured per case, log-log, y = x and a ±band.

    Cases are grouped by algorithm (ring, ps, ...; the metric where a case has none).
    """
    cases = [c for c in report.get("cases", []) if c.get("predicted") and c.get("measured")]
    fig, (ax,) = _new_figure(width=6.0, height=5.0)
    by_metric: dict[str, list[dict]] = {}
    for c in cases:
        by_metric.setdefault(str(c.get("algorithm") or c.get("metric", "")), []).append(c)
    for metric, cs in by_metric.items():
        ax.scatter([c["measured"] * 1e3 for c in cs], [c["predicted"] * 1e3 for c in cs], label=metric, zorder=3)
    if cases:
        lo = min(min(c["measured"], c["predicted"]) for c in cases) * 1e3 / 1.5
        hi = max(max(c["measured"], c["predicted"]) for c in cases) * 1e3 * 1.5
        ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8, label="predicted = measured")
        ax.fill_between([lo, hi], [lo * (1 - band), hi * (1 - band)], [lo * (1 + band), hi * (1 + band)],
                        color="gray", alpha=0.2, label=f"±{band:.0%}")
    ax.set(xscale="log", yscale="log", xlabel="measured (ms)", ylabel="predicted (ms)")
    mape = report.get("mape")
    ax.set_title(f"{title or 'predicted vs measured'}: {len(cases)} cases"
                 + (f", MAPE {mape:.1%}" if isinstance(mape, (int, float)) else ""), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _done(fig, path)


def node_group_chart(results, path: str | None = None, title: str | None = None):
    """Per node group of each result (result.node_groups): compute step time and idle time per iteration (ms),
    stacked, one panel per {label: result}; each bar is labelled with the group's micro-batch per GPU."""
    fig, axes = _new_figure(ncols=len(results), width=4.2 * len(results), height=4.2)
    top = max((g["step_s"] + g["idle_s"]) * 1e3 for res in results.values() for g in res.node_groups)
    for ax, (label, res) in zip(axes, results.items()):
        groups = list(res.node_groups)
        names = [f"{g['gpu']}\n({g['gpus']} GPUs)" for g in groups]
        step = [g["step_s"] * 1e3 for g in groups]
        idle = [g["idle_s"] * 1e3 for g in groups]
        ax.bar(names, step, color="tab:blue", label="compute step")
        bars = ax.bar(names, idle, bottom=step, color="tab:gray", alpha=0.6, label="idle (waiting for the slowest)")
        ax.bar_label(bars, labels=[f"batch {g['batch_per_gpu']}/GPU" for g in groups], fontsize=8)
        ax.axhline(res.iteration_time_s * 1e3, color="black", linestyle="--", linewidth=0.8,
                   label=f"iteration {res.iteration_time_s * 1e3:.3g} ms")
        ax.set_ylim(0, 1.25 * max(top, res.iteration_time_s * 1e3))
        ax.set_ylabel("time per iteration (ms)")
        ax.set_xlabel("node group (GPU model)")
        ax.set_title(f"{label}: {res.throughput.samples_per_s:,.0f} samples/s", fontsize=10)
        ax.legend(fontsize=7, loc="upper right")
    if title:
        fig.suptitle(title)
    return _done(fig, path)


def lines(series, xlabel: str, ylabel: str, path: str | None = None, title: str | None = None,
          xscale: str = "linear", marks=None, percent: bool = False):
    """Line chart: `series` = {label: (xs, ys)}; `marks` = {label: x} draws labelled vertical lines (an optimum,
    a closed form). `percent` formats the y axis as percentages of 1."""
    fig, (ax,) = _new_figure(width=7.0, height=4.2)
    for label, (xs, ys) in series.items():
        ax.plot(list(xs), list(ys), marker="o", markersize=4, label=label, color=_STRATEGY_COLORS.get(str(label)))
    for i, (label, x) in enumerate((marks or {}).items()):
        ax.axvline(x, color=("black", "tab:red", "tab:green", "tab:purple")[i % 4], linestyle=(":", "--")[i % 2],
                   linewidth=1.2, label=label)
    if percent:
        from matplotlib.ticker import PercentFormatter

        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set(xscale=xscale, xlabel=xlabel, ylabel=ylabel)
    ticks = sorted({float(x) for xs, _ in series.values() for x in xs})
    if xscale == "log" and len(ticks) <= 16:  # label the points themselves, not only the decades
        from matplotlib.ticker import NullFormatter

        ax.set_xticks(ticks, [f"{t:g}" for t in ticks], fontsize=8)
        ax.xaxis.set_minor_formatter(NullFormatter())
    if all(t.is_integer() for t in ticks) and xscale == "linear":
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title or ylabel, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _done(fig, path)


def pareto_chart(frame, x: str, y: str, front, chosen=None, hue: str | None = None, path: str | None = None,
                 title: str | None = None, xlabel: str | None = None, ylabel: str | None = None,
                 limits=None, xscale: str = "linear", yscale: str = "log", label: str | None = None, chosen_label: str = "chosen plan"):
    """Every plan of a sweep table (pandas DataFrame) as a point (x, y), the Pareto front (a DataFrame of the
    non-dominated rows, both axes to minimise) as a step line and the chosen plan circled; points are
    coloured by the `hue` column and the front's points named by the `label` column. `limits` = {label: ("x" or
    "y", value)} draws a budget or a deadline."""
    from matplotlib.ticker import FuncFormatter

    fig, (ax,) = _new_figure(width=7.5, height=4.8)
    for key, part in (frame.groupby(hue, sort=True) if hue else [("plans", frame)]):
        ax.scatter(part[x], part[y], s=22, alpha=0.8, label=str(key), color=_STRATEGY_COLORS.get(str(key)))
    f = front.sort_values(x)
    ax.step(f[x], f[y], where="post", color="black", linewidth=1.2, label="Pareto front")
    for name, (axis, value) in (limits or {}).items():
        (ax.axhline if axis == "y" else ax.axvline)(value, color="tab:red", linestyle="--", linewidth=1, label=name)
    if chosen is not None:
        ax.scatter([chosen[x]], [chosen[y]], s=160, facecolors="none", edgecolors="tab:red", linewidths=2,
                   label=chosen_label, zorder=4)
    if label:
        for _, row in f.iterrows():
            ax.annotate(str(row[label]), (row[x], row[y]), textcoords="offset points", xytext=(6, 4), fontsize=7)
    ax.set(xscale=xscale, yscale=yscale, xlabel=xlabel or x, ylabel=ylabel or y)
    for axis, scale in ((ax.xaxis, xscale), (ax.yaxis, yscale)):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if abs(v) >= 1e4 else f"{v:,.4g}"))
        if scale == "log":
            axis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:,.3g}"))
    ax.set_title(title or f"{y} against {x}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return _done(fig, path)


_METRIC_AXES = {  # published-suite metric -> (axis label with its unit, scale)
    "busbw_GBps": ("bus bandwidth (GB/s)", "log"),
    "scaling_efficiency": ("scaling efficiency (fraction of linear)", "linear"),
    "throughput_ratio": ("throughput ratio (x the baseline)", "log"),
}


def published_chart(report, path: str | None = None, band: float = 0.25, title: str | None = None):
    """The published-benchmark suite (`simdist.validate_published()` or its `to_dict()`): predicted against
    measured, one panel per metric in its own unit, points coloured by category, y = x and a ±band."""
    data = report.to_dict() if hasattr(report, "to_dict") else report
    cases = [c for c in data.get("cases", []) if c.get("predicted") and c.get("measured")]
    metrics = sorted({c["metric"] for c in cases}) or ["busbw_GBps"]
    fig, axes = _new_figure(ncols=len(metrics), width=4.6 * len(metrics), height=4.6)
    categories = sorted({c["category"] for c in cases})
    colors = {cat: f"C{i % 10}" for i, cat in enumerate(categories)}
    for ax, metric in zip(axes, metrics):
        mine = [c for c in cases if c["metric"] == metric]
        label, scale = _METRIC_AXES.get(metric, (metric, "linear"))
        for cat in categories:
            cs = [c for c in mine if c["category"] == cat]
            if cs:
                ax.scatter([c["measured"] for c in cs], [c["predicted"] for c in cs], color=colors[cat],
                           label=cat, zorder=3, s=24)
        if mine:
            lo = min(min(c["measured"], c["predicted"]) for c in mine) / (1.3 if scale == "log" else 1.05)
            hi = max(max(c["measured"], c["predicted"]) for c in mine) * (1.3 if scale == "log" else 1.05)
            ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8, label="predicted = measured")
            ax.fill_between([lo, hi], [lo * (1 - band), hi * (1 - band)], [lo * (1 + band), hi * (1 + band)],
                            color="gray", alpha=0.2, label=f"±{band:.0%}")
        errs = [c["error"] for c in mine if c.get("error") is not None]
        ax.set(xscale=scale, yscale=scale, xlabel=f"measured {label}", ylabel=f"predicted {label}")
        ax.set_title(f"{metric}: {len(mine)} cases" + (f", MAPE {sum(errs) / len(errs):.1%}" if errs else ""),
                     fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    mape, oos = data.get("mape"), data.get("out_of_sample_mape")
    fig.suptitle((title or "published benchmarks, predicted vs measured (uncalibrated)")
                 + (f": MAPE {mape:.1%}" if isinstance(mape, (int, float)) else "")
                 + (f", out of sample {oos:.1%}" if isinstance(oos, (int, float)) else ""))
    return _done(fig, path)
