"""The CLI's plot files (matplotlib, Agg backend; imported lazily): topology drawings and heatmaps, a run's
timeline and breakdown, break-even, scaling, breakdown bars and Pareto plots. The Figure functions for notebooks
(simdist/figures.py, plots_goodput.py, plots_mp.py) are re-exported here: plots.breakdown, plots.timeline, ...
"""
from __future__ import annotations

from simdist.errors import SimdistError
from simdist.figures import (  # noqa: F401  (re-exported)
    bandwidth_curves, breakdown, breakeven_chart, grouped_bars, lines, link_utilization, node_group_chart,
    pareto_chart, predicted_vs_measured, published_chart, timeline,
)
from simdist.figures import (cell_number as _num, check_plot_path, draw_breakdown, draw_timeline, save_figure,
                             timeline_tracks)
from simdist.plots_goodput import plot_goodput_sweep, plot_goodput_timeline  # noqa: F401  (re-exported)
from simdist.plots_mp import layout_chart, parallel_breakdown  # noqa: F401  (model-parallel layouts)
from simdist.topology.graph import Topology

_LAYER = {"core": 4.0, "spine": 3.0, "agg": 3.0, "leaf": 2.0, "switch": 2.0}
_KIND_STYLE = {"nvlink": ("tab:green", 1.2), "pcie": ("tab:gray", 0.8), "socket": ("tab:purple", 1.0),
               "nic": ("tab:blue", 0.8), "fabric": ("tab:red", 1.0)}
_INNER_Y = {"nic": 1.2, "nvswitch": 0.8, "pcie": 0.8, "cpu": 0.45, "gpu": 0.0}


def _machine(v: str) -> str | None:
    return v.split("/", 1)[0] if "/" in v else None


def _fabric_layer(v: str) -> float:
    for prefix, y in _LAYER.items():
        if v.startswith(prefix):
            return y
    return 2.0


def _layout(graph, collapse: bool) -> tuple[dict, list[tuple[str, str, str]]]:
    """Positions (fabric on top, machines below) and the edges to draw as (u, v, kind)."""
    machines: dict[str, list[str]] = {}
    fabric: dict[float, list[str]] = {}
    for v in graph:
        m = _machine(str(v))
        if m is None:
            fabric.setdefault(_fabric_layer(str(v)), []).append(v)
        else:
            machines.setdefault(m, []).append(v)
    width = max(len(machines), 1)
    pos: dict[str, tuple[float, float]] = {}
    for y, verts in fabric.items():
        for i, v in enumerate(verts):
            pos[v] = ((i + 0.5) * width / len(verts), y)
    for col, (m, verts) in enumerate(machines.items()):
        if collapse:
            pos[m] = (col + 0.5, 0.6)
            continue
        rows: dict[float, list[str]] = {}
        for v in verts:
            name = v.split("/", 1)[1]
            y = next((yy for p, yy in _INNER_Y.items() if name.startswith(p)), 0.6)
            rows.setdefault(y, []).append(v)
        for y, row in rows.items():
            for i, v in enumerate(row):
                pos[v] = (col + 0.1 + 0.8 * (i + 0.5) / len(row), y)
    edges: dict[tuple[str, str], str] = {}
    for u, v, data in graph.edges(data=True):
        if collapse:
            u = _machine(str(u)) or u
            v = _machine(str(v)) or v
            if u == v:
                continue
        edges.setdefault((u, v), data.get("kind", "fabric"))
    return pos, [(u, v, k) for (u, v), k in edges.items()]


def draw_topology(topology: Topology, path: str, max_vertices: int = 300, utilization=None) -> None:
    """A layered drawing (fabric on top, machines below) written to `path` (PNG, SVG or PDF).

    With more than `max_vertices` vertices each machine is collapsed into one box; with more machines
    than that only the fabric switches are drawn, each labelled with the number of machines below it.
    `utilization` ({"u->v": fraction} or a result's links) turns it into a heatmap: each drawn edge is
    coloured by its busier direction (a collapsed edge by its busiest member), the rest grey.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    graph = topology.graph
    collapse = graph.number_of_nodes() > max_vertices
    n_machines = len({_machine(str(v)) for v in graph} - {None})
    fabric_only = collapse and n_machines > max_vertices
    if fabric_only:
        graph = graph.subgraph([v for v in graph if _machine(str(v)) is None])
    pos, edges = _layout(graph, collapse and not fabric_only)
    fig, ax = plt.subplots(figsize=(min(24, 4 + 0.35 * max(n_machines, 8)), 6))
    from matplotlib.collections import LineCollection

    by_kind: dict[str, list] = {}
    heat = _edge_heat(graph, utilization, collapse and not fabric_only) if utilization is not None else None
    hot: list = []
    for u, v, kind in edges:
        if heat is not None and (u, v) in heat:
            hot.append(((pos[u], pos[v]), heat[(u, v)]))
        else:
            by_kind.setdefault(kind, []).append((pos[u], pos[v]))
    for i, (kind, segments) in enumerate(by_kind.items()):
        color, lw = _KIND_STYLE.get(kind, ("black", 0.8)) if heat is None else ("lightgray", 0.6)
        ax.add_collection(LineCollection(segments, colors=color, linewidths=lw, alpha=0.6, zorder=1,
                                         label=("not among the reported links" if i == 0 else None)
                                         if heat is not None else f"{kind} links"))
    if heat is not None:
        from matplotlib.colors import ListedColormap

        import numpy as np

        # inferno_r without its near-white end, so an idle link (0 %) still shows against the background
        cmap = ListedColormap(plt.get_cmap("inferno_r")(np.linspace(0.12, 1.0, 256)))
        lines = LineCollection([seg for seg, _ in hot], array=[100 * u for _, u in hot], cmap=cmap,
                               linewidths=[1.0 + 2.0 * u for _, u in hot], zorder=1.5)
        lines.set_clim(0, 100)
        ax.add_collection(lines)
        fig.colorbar(lines, ax=ax, label="link utilisation (% of capacity, busier direction)", shrink=0.8)
        if by_kind:
            ax.legend(loc="lower right", fontsize=7)
    groups: dict[str, list[tuple[float, float]]] = {"fabric": [], "box": [], "inner": []}
    for v, xy in pos.items():
        inner = _machine(str(v)) is not None
        groups["inner" if inner else ("box" if str(v).startswith(("node", "server")) else "fabric")].append(xy)
    styles = {"fabric": ("s", 40, "tab:red"), "box": ("s", 160, "tab:orange"), "inner": ("o", 40, "tab:green")}
    for name, xy in groups.items():
        if xy:
            marker, size, color = styles[name]
            ax.scatter([p[0] for p in xy], [p[1] for p in xy], s=size, marker=marker, color=color, zorder=2)
    if len(pos) <= 80:
        _label_vertices(ax, pos, fig.get_figwidth())
    if fabric_only:
        counts: dict[str, int] = {}
        for u, v, data in topology.graph.edges(data=True):
            if data.get("kind") == "nic":
                sw = u if _machine(str(u)) is None else v
                counts[sw] = counts.get(sw, 0) + 1
        for sw, c in counts.items():
            if sw in pos:
                ax.annotate(f"{c} NICs", pos[sw], fontsize=5, ha="center", xytext=(0, -9), textcoords="offset points")
    if heat is None and by_kind:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    ax.autoscale()
    ax.margins(x=0.02, y=0.14)  # room above the top row for its (possibly upright) labels
    title = topology.description or "topology"
    ax.set_title(f"link utilisation on {title}" if heat is not None else title, fontsize=9)
    ax.set_axis_off()
    fig.tight_layout()
    _write(plt, fig, path, dpi=150)


def _label_vertices(ax, pos: dict, fig_width_in: float) -> None:
    """Name each vertex; a row too crowded for horizontal labels (32 spines) gets them rotated upright."""
    rows: dict[float, list] = {}
    for v, (x, y) in pos.items():
        rows.setdefault(round(y, 6), []).append((v, x, y))
    for row in rows.values():
        labels = [str(v).split("/")[-1] if _machine(str(v)) is not None else str(v) for v, _, _ in row]
        text_in = sum(len(t) for t in labels) * 6 * 0.6 / 72 + 0.1 * len(labels)  # 6 pt glyphs ~0.6 em wide
        upright = text_in > 0.8 * fig_width_in
        for label, (_, x, y) in zip(labels, row):
            ax.annotate(label, (x, y), fontsize=6, ha="center", va="bottom", xytext=(0, 6),
                        textcoords="offset points", rotation=90 if upright else 0)


def _edge_heat(graph, utilization, collapse: bool) -> dict[tuple[str, str], float]:
    """{(u, v) as drawn: utilisation}, both directions merged, from {"u->v": fraction} of the whole network
    (a link it leaves out carried nothing: 0) or a result's LinkUtilization rows (only those links)."""
    missing = -1.0
    if not isinstance(utilization, dict):
        utilization = {lk.link: lk.utilization for lk in utilization}
    else:
        missing = 0.0
    out: dict[tuple[str, str], float] = {}
    for u, v in graph.edges():
        value = max(utilization.get(f"{u}->{v}", missing), utilization.get(f"{v}->{u}", missing))
        if value < 0:
            continue
        a, b = ((_machine(str(u)) or u), (_machine(str(v)) or v)) if collapse else (u, v)
        if a != b:
            out[(a, b)] = max(out.get((a, b), 0.0), value)
            out[(b, a)] = out[(a, b)]
    return out


def _figure(ncols: int, width: float = 12.0, height: float = 4.2):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(width, height))
    return plt, fig, (axes if ncols > 1 else [axes])


def _save(plt, fig, path: str) -> None:
    fig.tight_layout()
    _write(plt, fig, path, dpi=110)


def _write(plt, fig, path: str, dpi: int) -> None:
    """Save the figure (figures.save_figure) and release pyplot's hold on it."""
    try:
        save_figure(fig, path, dpi=dpi)
    finally:
        plt.close(fig)


def plot_result(scenario, result, path: str) -> None:
    """A benchmark as busbw and time per size; a training run as one iteration's timeline and its breakdown."""
    if result.collectives is not None:
        _plot_collectives(scenario, result, path)
    else:
        _plot_training(scenario, result, path)


def _plot_collectives(scenario, result, path: str) -> None:
    plt, fig, (ax_bw, ax_t) = _figure(2)
    sizes = [r.size_bytes for r in result.collectives]
    ax_bw.plot(sizes, [r.busbw_GBps for r in result.collectives], "o-", label="busbw")
    ax_bw.plot(sizes, [r.algbw_GBps for r in result.collectives], "s--", label="algbw")
    ax_bw.set(xscale="log", xlabel="size (bytes)", ylabel="GB/s", title=f"{result.collectives[0].op} bandwidth")
    ax_bw.legend()
    ax_bw.grid(alpha=0.3)
    ax_t.plot(sizes, [r.time_s for r in result.collectives], "o-")
    ax_t.set(xscale="log", yscale="log", xlabel="size (bytes)", ylabel="time (s)", title="time per call")
    ax_t.grid(alpha=0.3)
    fig.suptitle(f"{scenario.name} ({result.gpus} GPUs, {result.fidelity})")
    _save(plt, fig, path)


def _plot_training(scenario, result, path: str) -> None:
    """The CLI's --plot: the timeline (first GPUs, legend, how many shown) beside the breakdown, as in notebooks."""
    tracks = timeline_tracks(result) if result.records else []
    plt, fig, (ax_tl, ax_bd) = _figure(2, width=14.0, height=max(4.2, 1.6 + 0.4 * len(tracks)))
    if tracks:
        draw_timeline(ax_tl, result, tracks=tracks)
    else:
        ax_tl.set_axis_off()
        ax_tl.set_title("no timeline: estimate fidelity simulates no events")
    if result.breakdown_s is not None:
        draw_breakdown(ax_bd, result)
    fig.suptitle(f"{scenario.name} ({result.gpus} GPUs, {result.fidelity})")
    _save(plt, fig, path)


def plot_breakeven(table, path: str, metric: str = "speedup") -> None:
    """A compare.BreakevenTable: speedup over no compression (or iteration time) vs NIC bandwidth, log x."""
    plt, fig, (ax,) = _figure(1, width=7.0, height=4.5)
    gbps = [b * 8 / 1e9 for b in table.bandwidths_Bps]
    drawn: list[float] = []
    for m in table.methods:
        if metric == "speedup" and m == "none":
            continue
        ys = table.speedup(m) if metric == "speedup" else tuple(None if t is None else t * 1e3
                                                              for t in table.iteration_time_s[m])
        pts = [(x, y) for x, y in zip(gbps, ys) if y is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=m)
            drawn += [p[1] for p in pts if p[1] > 0]
    if metric == "speedup":
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--", label="none")
    if drawn and max(drawn) / min(drawn) > 4:  # a x26 PowerSGD would flatten every other codec on a linear axis
        ax.set_yscale("log")
    ax.set_xscale("log")
    ax.set_xlabel("NIC bandwidth (Gb/s)")
    ax.set_ylabel("speedup over no compression" if metric == "speedup" else "iteration time (ms)")
    ax.set_title(f"{table.scenario}: compression break-even ({table.fidelity})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    _save(plt, fig, path)


# ---- the planner's figures: scaling curves, breakdown bars, the Pareto front, a link heatmap ----------------

_TERMS = (("compute_s", "compute", "tab:blue"), ("exposed_communication_s", "exposed communication", "tab:red"),
          ("compression_s", "compression", "tab:purple"), ("optimizer_s", "optimizer", "tab:green"))


def _rate(row) -> tuple[float | None, str]:
    tokens = _num(row.get("tokens_per_s"))
    return (tokens, "tokens/s") if tokens else (_num(row.get("samples_per_s")), "samples/s")


def is_gpu_count_axis(key: str) -> bool:
    """Axes that change the GPU count: a node group's count or GPUs per node."""
    parts = key.split(".")
    return len(parts) == 4 and parts[:2] == ["cluster", "nodes"] and parts[3] in ("count", "gpus_per_node")


def plot_scaling(rows, axis_keys, path: str, title: str | None = None) -> None:
    """Throughput and scaling efficiency against GPU count from sweep rows, one line per strategy.

    Rows that share every other axis value form one line (labelled by them, the strategy first);
    rows that did not run are left out.
    """
    check_plot_path(path)
    others = [k for k in axis_keys if not is_gpu_count_axis(k)]
    others.sort(key=lambda k: k != "communication.strategy")
    lines: dict[str, list[tuple[float, float, float | None]]] = {}
    unit = "samples/s"
    for r in rows:
        gpus, (rate, unit_r) = _num(r.get("gpus")), _rate(r)
        if r.get("status") != "ok" or not gpus or rate is None:
            continue
        unit = unit_r
        label = ", ".join(str(r.get(k)) for k in others) or "all points"
        eff = _num(r.get("scaling_efficiency"))
        lines.setdefault(label, []).append((gpus, rate, None if eff is None else 100 * eff))
    if not lines:
        raise SimdistError(f"cannot write plot {path}: no point of the sweep ran, so there is nothing to plot")
    plt, fig, (ax_t, ax_e) = _figure(2, width=12.0, height=4.6)
    for label, pts in lines.items():
        pts.sort()
        ax_t.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        eff = [(p[0], p[2]) for p in pts if p[2] is not None]
        ax_e.plot([p[0] for p in eff], [p[1] for p in eff], marker="o", label=label)
    ax_t.set(yscale="log", xlabel="GPUs", ylabel=f"throughput ({unit})", title="throughput")
    ax_e.set(xlabel="GPUs", ylabel="scaling efficiency (%)", title="scaling efficiency", ylim=(0, 105))
    ticks = sorted({p[0] for pts in lines.values() for p in pts})
    for ax in (ax_t, ax_e):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_locator(__import__("matplotlib").ticker.NullLocator())
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, title=", ".join(others) or None, title_fontsize=7)
    fig.suptitle(title or "scaling against GPU count")
    _save(plt, fig, path)


def plot_breakdown_bars(items, path: str, title: str | None = None, max_bars: int = 40) -> None:
    """Stacked bars of each point's iteration: compute, exposed communication, compression, optimizer.

    `items` is {label: row or RunResult}; the iteration time is marked on each bar (the terms overlap,
    so their stack need not reach it exactly).
    """
    check_plot_path(path)
    bars = []
    for label, item in list(items.items())[:max_bars]:
        if hasattr(item, "breakdown_s"):
            b = item.breakdown_s
            if b is None:
                continue
            values = [b.compute, b.exposed_communication, b.compression, b.optimizer]
            total = item.iteration_time_s
        else:
            if item.get("status", "ok") != "ok":
                continue
            values = [_num(item.get(k)) or 0.0 for k, _, _ in _TERMS]
            total = _num(item.get("iteration_time_s"))
        bars.append((str(label), [v * 1e3 for v in values], None if total is None else total * 1e3))
    if not bars:
        raise SimdistError(f"cannot write plot {path}: no result with a breakdown to plot")
    plt, fig, (ax,) = _figure(1, width=max(6.0, 1.0 + 0.45 * len(bars)), height=5.0)
    xs = range(len(bars))
    bottom = [0.0] * len(bars)
    for i, (_, name, color) in enumerate(_TERMS):
        heights = [b[1][i] for b in bars]
        ax.bar(xs, heights, bottom=bottom, color=color, label=name)
        bottom = [a + h for a, h in zip(bottom, heights)]
    ax.scatter([x for x, b in zip(xs, bars) if b[2] is not None], [b[2] for b in bars if b[2] is not None],
               marker="_", s=300, color="black", zorder=3, label="iteration time")
    ax.set_xticks(list(xs), [b[0] for b in bars], rotation=60, ha="right", fontsize=7)
    ax.set(xlabel="point", ylabel="time per iteration (ms)", title=title or "where each iteration's time goes")
    ax.margins(y=0.08)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    _save(plt, fig, path)


def plot_pareto(candidates, front, winner, path: str, unit: str = "samples/s", title: str | None = None,
                rate=None, group=None, label=None) -> None:
    """Throughput against price per hour: the candidates, the Pareto front as a step line, the winner starred.

    `rate(row)` gives a row's throughput (default tokens/s when it has them, else samples/s). `group(row)`
    names a candidate's kind (its GPU and layout, say): each kind gets its own colour and marker and a legend
    entry, so A100 and H100 points can be told apart. `label(row)` is written beside each front point.
    """
    check_plot_path(path)
    rate = rate or (lambda r: _rate(r)[0])
    plt, fig, (ax,) = _figure(1, width=8.5 if group else 7.5, height=5.0)
    kinds: dict[str, list[tuple[float, float]]] = {}
    for r in candidates:
        x, y = _num(r.get("cost_per_hour_usd")), rate(r)
        if x is not None and y:
            kinds.setdefault(group(r) if group else "candidates", []).append((x, y))
    markers = "os^DvP<>Xh"
    for i, (kind, pts) in enumerate(sorted(kinds.items())):
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=22, alpha=0.7, label=kind,
                   color="tab:gray" if not group else f"C{i % 10}", marker=markers[i % len(markers)] if group else "o")
    fr = sorted(((_num(r.get("cost_per_hour_usd")), rate(r), r) for r in front), key=lambda p: (p[0] or 0, p[1] or 0))
    fr = [p for p in fr if p[0] is not None and p[1]]
    if fr:
        ax.plot([p[0] for p in fr], [p[1] for p in fr], "-", drawstyle="steps-post", color="tab:blue",
                label=f"Pareto front ({len(fr)} points)")
        if label:
            for x, y, r in fr:
                ax.annotate(label(r), (x, y), xytext=(4, -10), textcoords="offset points", fontsize=7)
    if winner is not None and _num(winner.get("cost_per_hour_usd")) is not None and rate(winner):
        ax.scatter([_num(winner["cost_per_hour_usd"])], [rate(winner)], marker="*", s=260, color="tab:red",
                   zorder=3, label="chosen plan")
    ax.set(xlabel="cluster price (USD per hour)", ylabel=f"throughput ({unit})",
           title=title or "throughput against price: the Pareto front")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    _save(plt, fig, path)


def link_heatmap(topology: Topology, utilization, path: str, max_vertices: int = 300) -> None:
    """The topology drawing with each link coloured by its utilisation (a result's links or {"u->v": fraction})."""
    check_plot_path(path)
    draw_topology(topology, path, max_vertices=max_vertices, utilization=utilization)
