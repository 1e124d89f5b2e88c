"""Break-even analysis: at which NIC bandwidth does a gradient codec stop paying for itself?

For one model and cluster, `breakeven` times every codec at every NIC bandwidth (the scenario's NIC
links replaced with dataclasses.replace; the fabric's switch links are left as they are) and finds
for each codec the bandwidth below which it beats no compression. `format_breakeven` prints it;
plots.plot_breakeven draws it. Convergence is not part of this: a codec's extra iterations
(`training.convergence_factor`) multiply its time-to-target, not its iteration time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

from simdist.engine.composite import run_training
from simdist.errors import InfeasibleError
from simdist.scenario import CompressionMethod, CompressionSpec, Fidelity, Scenario
from simdist.tables import format_table

BASELINE = "none"


@dataclass(frozen=True)
class BreakevenTable:
    """Iteration time of each codec (labels, `none` first) at each NIC bandwidth, and the crossovers.

    `iteration_time_s[label][k]` is None where the run was infeasible. `breakeven_Bps[label]`: the
    bandwidth (interpolated on log bandwidth) below which the codec is faster than `none`;
    `status[label]`: 'crossover', 'always' (faster over the whole range), 'never', or 'mixed'
    (wins and losses interleave; breakeven is then the highest bandwidth at which it still wins).
    """

    scenario: str
    fidelity: str
    bandwidths_Bps: tuple[float, ...]
    methods: tuple[str, ...]
    iteration_time_s: dict[str, tuple[float | None, ...]]
    breakeven_Bps: dict[str, float | None]
    status: dict[str, str]

    def speedup(self, label: str) -> tuple[float | None, ...]:
        """Iteration time without compression divided by the codec's, per bandwidth."""
        base = self.iteration_time_s[BASELINE]
        return tuple(None if b is None or t is None else b / t for b, t in zip(base, self.iteration_time_s[label]))

    def to_dict(self) -> dict:
        return {"scenario": self.scenario, "fidelity": self.fidelity, "bandwidths_Bps": list(self.bandwidths_Bps),
                "methods": [{"method": m, "iteration_time_s": list(self.iteration_time_s[m]),
                             "speedup": list(self.speedup(m)), "breakeven_Bps": self.breakeven_Bps.get(m),
                             "status": self.status.get(m, "baseline")} for m in self.methods]}


def method_label(spec: CompressionSpec) -> str:
    """The spelling parse_methods reads back: 'fp16', 'topk:0.01', 'powersgd:4'."""
    if spec.ratio is not None:
        return f"{spec.method.value}:{spec.ratio:g}"
    if spec.rank is not None:
        return f"{spec.method.value}:{spec.rank}"
    return spec.method.value


def with_nic_bandwidth(scenario: Scenario, bandwidth_Bps: float) -> Scenario:
    """The scenario with every node group's NIC line rate set to `bandwidth_Bps` (efficiency kept)."""
    groups = tuple(replace(g, nic=replace(g.nic, link=g.nic.link.with_(bandwidth_Bps=bandwidth_Bps)))
                   for g in scenario.cluster.node_groups)
    return replace(scenario, cluster=replace(scenario.cluster, node_groups=groups))


def _time(scenario: Scenario, fidelity: Fidelity) -> float | None:
    try:
        return run_training(scenario, fidelity, with_baseline=False).iteration_time_s
    except InfeasibleError:
        return None  # infeasible (e.g. the codec's state does not fit)


def breakeven(scenario: Scenario, bandwidths_Bps: Sequence[float], methods: Sequence[CompressionSpec],
              fidelity: str = "estimate") -> BreakevenTable:
    """Iteration time of no compression and of each codec at each NIC bandwidth, and each codec's crossover
    (io.compare_input.check_breakeven has refused what cannot run: a benchmark, bad bandwidths, a refused codec)."""
    assert scenario.workload.model is not None, "io.compare_input: a training workload"
    bws = tuple(sorted(float(b) for b in bandwidths_Bps))
    assert bws and all(0 < b < math.inf for b in bws), "io.compare_input: positive finite bandwidths"
    fid = Fidelity(fidelity)
    specs = [CompressionSpec()] + [m for m in methods if m.method != CompressionMethod.NONE]
    labels = [method_label(s) for s in specs]
    times: dict[str, tuple[float | None, ...]] = {}
    for label, spec in zip(labels, specs):
        base = replace(scenario, communication=replace(scenario.communication, compression=spec))
        times[label] = tuple(_time(with_nic_bandwidth(base, bw), fid) for bw in bws)
    crossings = {label: _crossover(bws, times[BASELINE], times[label]) for label in labels[1:]}
    return BreakevenTable(scenario.name, fid.value, bws, tuple(dict.fromkeys(labels)), times,
                          {k: v[0] for k, v in crossings.items()}, {k: v[1] for k, v in crossings.items()})


def _crossover(bws, base, mine) -> tuple[float | None, str]:
    """Highest bandwidth below which `mine` beats `base` (log-interpolated gap), and how it wins."""
    gaps = [None if b is None or m is None else (b - m) / b for b, m in zip(base, mine)]
    wins = [g is not None and g > 0 for g in gaps]
    if all(wins):
        return None, "always"
    if not any(wins):
        return None, "never"
    last = max(k for k, w in enumerate(wins) if w)
    status = "crossover" if all(wins[: last + 1]) else "mixed"
    if last == len(bws) - 1:  # it loses somewhere below but wins at the top: no crossing above, "mixed"
        return None, status
    g0, g1 = gaps[last], gaps[last + 1]
    if g1 is None:
        return bws[last], status
    x0, x1 = math.log(bws[last]), math.log(bws[last + 1])
    return math.exp(x0 + (x1 - x0) * g0 / (g0 - g1)), status


def _gbps(bps: float | None) -> str:
    return "-" if bps is None else f"{bps * 8 / 1e9:.4g} Gb/s"


def format_breakeven(table: BreakevenTable) -> str:
    """Iteration time (ms) per bandwidth and codec, then each codec's break-even bandwidth."""
    rows = []
    for k, bw in enumerate(table.bandwidths_Bps):
        row: list[object] = [_gbps(bw)]
        for m in table.methods:
            t = table.iteration_time_s[m][k]
            s = table.speedup(m)[k]
            row.append("infeasible" if t is None else
                       f"{t * 1e3:.4g}" + ("" if m == BASELINE else f" (x{s:.2f})"))
        rows.append(row)
    out = format_table(["NIC bandwidth"] + [f"{m} ms" for m in table.methods], rows,
                       title=f"{table.scenario}: iteration time ({table.fidelity}), speedup over none")
    verdict = {"always": "faster at every bandwidth tried", "never": "never faster",
               "crossover": "faster below", "mixed": "faster (not everywhere) up to"}
    pairs = [[m, verdict[table.status[m]], _gbps(table.breakeven_Bps[m]) if table.breakeven_Bps[m] else ""]
             for m in table.methods if m != BASELINE]
    return out + "\n\n" + format_table(["codec", "verdict", "break-even"], pairs)
