"""Goodput figures (matplotlib Figures without pyplot, written by simdist.figures' helpers):

- `plot_goodput_timeline`: a failure run's effective throughput over the wall time (replica 0's job
  track: training at its rate, zero while checkpointing, restarting, in maintenance or waiting for a
  repair), with every failure marked;
- `plot_goodput_sweep`: goodput ratio against the checkpoint interval of a sweep, the Young/Daly
  interval sqrt(2 C M) marked.
"""
from __future__ import annotations

import math
import re

from simdist.figures import _done, _new_figure, cell_number, check_plot_path
from simdist.units import parse_duration

JOB_TRACK = "job (replica 0)"
_RATE = re.compile(r"train at (\d+(?:\.\d+)?)\s*%")


def segment_rate(what: str, interval_s: float = 0.0, blocking_s: float = 0.0) -> float:
    """The effective rate (fraction of the healthy throughput) of one job-track segment; a merged
    "train ... + checkpoints" stretch averages the training rate over its compute-and-write cycles (checkpoint
    interval and blocking write: the run's goodput.model)."""
    if not what.startswith("train"):
        return 0.0
    m = _RATE.match(what)
    rate = float(m.group(1)) / 100.0 if m else 1.0
    if what.endswith("+ checkpoints"):
        t, c = interval_s or 0.0, blocking_s or 0.0
        rate *= t / (t + c) if t + c > 0 else 1.0
    return rate


def throughput_series(result) -> tuple[list[float], list[float], list[float]]:
    """(times, samples/s from each time on, failure times) of replica 0, in seconds from the start."""
    m, healthy = result.goodput.model, result.throughput.samples_per_s
    times, rates, failures = [], [], []
    for r in sorted((r for r in result.records if r.track == JOB_TRACK), key=lambda r: (r.start_s, r.end_s)):
        if r.name.startswith("failure"):
            failures.append(r.start_s)
            continue
        times.append(r.start_s)
        rates.append(segment_rate(r.name, m.checkpoint_interval_s, m.checkpoint_blocking_s) * healthy)
        times.append(r.end_s)
        rates.append(segment_rate(r.name, m.checkpoint_interval_s, m.checkpoint_blocking_s) * healthy)
    return times, rates, failures


def plot_goodput_timeline(scenario, result, path: str) -> None:
    """Throughput over time with failures marked (the run's goodput ratio and mean effective rate in the title)."""
    check_plot_path(path)
    g = result.goodput
    times, rates, failures = throughput_series(result)
    day = 86400.0
    fig, (ax,) = _new_figure(width=13.0, height=4.5)
    if times:
        ax.plot([t / day for t in times], rates, color="tab:blue", linewidth=0.8, label="effective samples/s")
    healthy = result.throughput.samples_per_s
    ax.axhline(healthy, color="tab:green", linestyle=":", linewidth=1.0, label="healthy cluster")
    ax.axhline(g.samples_per_s, color="black", linestyle="--", linewidth=1.0,
               label=f"mean over the run ({g.ratio:.1%} goodput)")
    if failures:
        ax.vlines([t / day for t in failures], 0, healthy * 1.05, color="tab:red", linewidth=0.5, alpha=0.6)
        ax.plot([t / day for t in failures], [healthy * 1.05] * len(failures), "v", color="tab:red", markersize=5,
                label=f"failures ({len(failures)})")
    ax.set(xlabel="wall time (days)", ylabel="samples/s", ylim=(0, healthy * 1.1),
           title=f"{scenario.name}: throughput over time, replica 0 ({g.model.policy})")
    ax.legend(loc="lower left", fontsize=8)
    ax.grid(alpha=0.3)
    _done(fig, path)


def plot_goodput_sweep(rows, key: str, path: str, optimum_s: float | None, title: str) -> None:
    """goodput_ratio against the swept checkpoint interval (minutes, log axis), Young/Daly marked."""
    check_plot_path(path)
    points = []
    for r in rows:
        ratio, value = cell_number(r.get("goodput_ratio")), r.get(key)
        if ratio is None or value in (None, ""):
            continue
        seconds = parse_duration(value) if isinstance(value, str) else float(value)
        points.append((seconds, ratio))
    points.sort()
    fig, (ax,) = _new_figure(width=8.0, height=4.8)
    if points:
        ax.plot([p[0] / 60 for p in points], [p[1] for p in points], "o-", color="tab:blue", label="simulated goodput")
        best = max(points, key=lambda p: p[1])
        ax.plot([best[0] / 60], [best[1]], "*", markersize=14, color="tab:orange",
                label=f"best point ({best[0] / 60:.3g} min, {best[1]:.2%})")
    if optimum_s is not None and math.isfinite(optimum_s):
        ax.axvline(optimum_s / 60, color="tab:red", linestyle="--", label=f"Young/Daly sqrt(2CM) = {optimum_s / 60:.3g} min")
    ax.set(xscale="log", xlabel="checkpoint interval (min)", ylabel="goodput ratio (useful / wall time)", title=title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    _done(fig, path)
