"""The goodput block of the text report (presentation only): where the wall time went, and the model; and
the phases of a hybrid-sync or dynamic-split run."""
from __future__ import annotations

from simdist.results.records import Goodput, PhasesSummary
from simdist.tables import format_pairs, format_table
from simdist.units import format_duration

_PARTS = (("useful training", "useful_s"), ("slower iterations", "degraded_s"), ("lost work (rolled back)", "lost_work_s"),
          ("checkpoints (blocking)", "checkpoint_s"), ("detection + restart", "restart_s"), ("downtime", "downtime_s"))


def _ci(g: Goodput, name: str, fmt) -> str:
    value = getattr(g, name)
    if value is None:
        return "-"
    ci = g.ci95.get(name)
    return fmt(value) + (f"  [{fmt(ci[0])} .. {fmt(ci[1])}]" if ci else "")


def format_goodput(g: Goodput) -> str:
    """Two tables: the time budget (mean and 95 % interval over replicas) and the failure model's figures."""
    wall, m = g.wall_s, g.model
    rows = [[label, _ci(g, key, format_duration), f"{getattr(g, key) / wall:.2%}"] for label, key in _PARTS]
    title = (f"== goodput over {format_duration(wall)} ({m.policy}, {g.replicas} replica"
             f"{'s' if g.replicas != 1 else ''}, 95 % intervals) ==")
    out = format_table(["wall time", "seconds", "share"], rows, title=title)
    kinds = ", ".join(f"{k} {v:.3g}" for k, v in g.failures_by_kind.items()) or "none"
    money = g.cost_per_token_usd
    pairs = [
        ("goodput ratio", _ci(g, "ratio", lambda x: f"{x:.2%}")),
        ("effective throughput", _ci(g, "samples_per_s", lambda x: f"{x:,.1f} samples/s")
         + (f", {g.tokens_per_s:,.0f} tokens/s" if g.tokens_per_s else "")),
        ("cost per useful " + ("token" if money else "sample"),
         f"${money * 1e6:.4g} per M tokens" if money else (f"${g.cost_per_sample_usd:.4g}"
                                                           if g.cost_per_sample_usd else "-")),
        ("failures", f"{_ci(g, 'failures', lambda x: f'{x:.3g}')} ({kinds})"),
        ("restarts / rejoins", f"{g.restarts:.3g} / {g.rejoins:.3g}"),
        ("job interruption rate", f"{m.job_failures_per_day:.3g} per day"
         + (f" (MTBF {format_duration(m.job_mtbf_s)})" if m.job_mtbf_s else "")
         + (" from the documented default rates" if m.default_rates else "")),
        ("fabric faults that only reroute", f"{m.job_reroutes_per_day:.3g} per day (not in the MTBF)"),
        ("checkpoint interval", f"{format_duration(m.checkpoint_interval_s)}, blocking "
                                f"{format_duration(m.checkpoint_blocking_s)}"),
        ("Young/Daly interval", format_duration(m.young_daly_interval_s) if m.young_daly_interval_s else "-"),
        ("closed form 1-C/T-(T/2+R)/M", f"{m.closed_form_ratio:.2%}" if m.closed_form_ratio is not None else "-"),
    ]
    return out + "\n\n" + format_pairs(pairs, title="== failure model ==")


def format_phases(p: PhasesSummary) -> str:
    """One row per steady phase (engine/composite.py) and the iteration-weighted total."""
    rows = [[f"{r.first_iteration}-{r.first_iteration + r.iterations - 1}", r.sync, r.batch_split,
             format_duration(r.iteration_time_s), f"{r.samples_per_s:,.1f}", format_duration(r.time_s)]
            for r in p.phases]
    rows.append([f"all {p.iterations}", "", "", format_duration(p.iteration_time_s), f"{p.samples_per_s:,.1f}",
                 format_duration(p.time_s)])
    notes = []
    if p.switch_iteration is not None:
        notes.append(f"bsp from iteration {p.switch_iteration} ({p.switch_fraction:.0%} of the run asynchronous)")
    if p.rebalance_every is not None:
        notes.append(f"re-split every {p.rebalance_every} iterations")
    return format_table(["iterations", "sync", "batch split", "iteration time", "samples/s", "time"], rows,
                        title=f"== phases ({'; '.join(notes)}) ==")
