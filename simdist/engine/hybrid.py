"""Runs made of steady phases: `training.sync: hybrid` and `training.batch_split: dynamic`.

- **hybrid**: asynchronous (asp, the parameter-server path) for iterations [0, S), synchronous (bsp,
  the same parameter servers) from S on, with S = `training.hybrid_switch` (an iteration, or a share of
  `run.iterations`).
- **dynamic**: iterations [0, k) run with the split the job starts from (proportional to the predicted
  GPU speeds: equal on identical GPUs); after k = `training.rebalance_every` iterations the job has
  observed every GPU's step time, stragglers included, and re-splits the batch in proportion to the
  observed speeds (strategies/batch_split.py), from then on every k iterations (a steady run keeps it).

Each distinct phase is simulated on its own as an ordinary steady-state run (at the scenario's
fidelity, `run.iterations` and `run.warmup`), and the run's figures are the iteration-weighted
combination: total time = sum over phases of iterations x iteration time, mean iteration time =
total / N, throughput = N x global batch / total. The result keeps the last phase's breakdown and
names every phase in `extra["phases"]` and `extra["sync"]["hybrid"]`.
"""
from __future__ import annotations

import math
from dataclasses import replace

from simdist.errors import ScenarioError
from simdist.results.records import RunResult, Throughput
from simdist.scenario import BatchSplit, Fidelity, Scenario, StrategyKind, SyncMode
from simdist.strategies.stragglers import gpu_slowdowns


def is_phased(scenario: Scenario) -> bool:
    t = scenario.training
    return t.sync is SyncMode.HYBRID or (t.batch_split is BatchSplit.DYNAMIC and t.split_slowdowns is None)


def switch_iteration(scenario: Scenario) -> int:
    """S, the first bsp iteration of a hybrid run (an iteration of `run.iterations`)."""
    t, n = scenario.training, scenario.run.iterations
    if t.hybrid_switch_iteration is not None:
        s = t.hybrid_switch_iteration
    elif t.hybrid_switch_fraction is not None:
        s = round(t.hybrid_switch_fraction * n)
    else:
        raise ScenarioError("sync hybrid needs training.hybrid_switch", "training.hybrid_switch")
    if not 0 < s < n:
        raise ScenarioError.bad_value("training.hybrid_switch", s, f"an iteration strictly between 0 and "
                                      f"run.iterations ({n}) once resolved")
    return s


def phases(scenario: Scenario) -> list[tuple[int, int, Scenario]]:
    """(first iteration, iterations, the steady scenario of that phase) in order, consecutive equal
    phases merged."""
    t, n = scenario.training, scenario.run.iterations
    cuts = {0, n}
    if t.sync is SyncMode.HYBRID:
        if scenario.communication.strategy != StrategyKind.PS:
            raise ScenarioError.bad_value("training.sync", "hybrid", "communication.strategy: ps (the "
                                          "asynchronous phase is the parameter server's asp)")
        cuts.add(switch_iteration(scenario))
    dynamic = t.batch_split is BatchSplit.DYNAMIC
    if dynamic and t.rebalance_every < n:
        cuts.add(t.rebalance_every)
    edges = sorted(cuts)
    observed = gpu_slowdowns(scenario) if dynamic else None
    out: list[tuple[int, int, Scenario]] = []
    for a, b in zip(edges, edges[1:]):
        sync = t.sync
        if sync is SyncMode.HYBRID:
            sync = SyncMode.ASP if a < switch_iteration(scenario) else SyncMode.BSP
        split = t.batch_split
        if dynamic and a < t.rebalance_every:
            split = BatchSplit.PROPORTIONAL  # before the first re-split: the predicted speeds only
        s = replace(scenario, training=replace(t, sync=sync, batch_split=split, hybrid_switch_iteration=None,
                                               hybrid_switch_fraction=None, split_slowdowns=observed
                                               if split is BatchSplit.DYNAMIC else None))
        if out and out[-1][2].training == s.training:
            first, count, _ = out[-1]
            out[-1] = (first, count + b - a, s)
        else:
            out.append((a, b - a, s))
    return out


def _label(s: Scenario) -> str:
    return f"{s.training.sync.value}, split {s.training.batch_split.value}"


def run_phased(scenario: Scenario, fidelity: Fidelity, with_baseline: bool = True) -> RunResult:
    """The iteration-weighted combination of the steady runs of every phase (module docstring)."""
    from simdist.engine.training import run_training

    if scenario.run.duration_s is not None:
        key, value = (("training.sync", "hybrid") if scenario.training.sync is SyncMode.HYBRID
                      else ("training.batch_split", "dynamic"))
        raise ScenarioError.bad_value(key, value, "a steady run of run.iterations (its phases are counted in "
                                      "iterations), or a failure run (failures with run.duration; dynamic only)")
    parts = phases(scenario)
    results = {}
    for _, _, s in parts:
        key = s.training
        if key not in results:
            results[key] = run_training(s, fidelity, with_baseline=with_baseline)
    n = scenario.run.iterations
    total = math.fsum(count * results[s.training].iteration_time_s for _, count, s in parts)
    last = results[parts[-1][2].training]
    iteration_s = total / n
    samples = last.throughput.samples_per_s * last.iteration_time_s / iteration_s
    tokens = (last.throughput.tokens_per_s * last.iteration_time_s / iteration_s
              if last.throughput.tokens_per_s else None)
    rows = []
    for first, count, s in parts:
        r = results[s.training]
        rows.append({"phase": _label(s), "first_iteration": first, "iterations": count,
                     "sync": s.training.sync.value, "batch_split": s.training.batch_split.value,
                     "iteration_time_s": r.iteration_time_s, "samples_per_s": r.throughput.samples_per_s,
                     "time_s": count * r.iteration_time_s})
    t = scenario.training
    summary = {"iterations": n, "time_s": total, "iteration_time_s": iteration_s, "samples_per_s": samples,
               "phases": rows}
    sync = dict(last.extra.get("sync", {}))
    if t.sync is SyncMode.HYBRID:
        s_it = switch_iteration(scenario)
        summary["switch_iteration"] = s_it
        summary["switch_fraction"] = s_it / n
        sync = {**sync, "mode": "hybrid", "hybrid": summary}
    if t.batch_split is BatchSplit.DYNAMIC:
        summary["rebalance_every"] = t.rebalance_every
    extra = {**last.extra, "sync": sync, "phases": summary,
             "simulated_iterations": sum(r.extra.get("simulated_iterations", 0) for r in results.values())}
    strategy = dict(extra.get("strategy", {}))
    if strategy:
        strategy["batch_split"] = t.batch_split.value
        extra["strategy"] = strategy
    times = tuple(x for _, count, s in parts for x in (results[s.training].iteration_time_s,) * count)
    return replace(last, iteration_time_s=iteration_s, throughput=Throughput(samples_per_s=samples, tokens_per_s=tokens),
                   scaling_efficiency=last.scaling_efficiency * last.iteration_time_s / iteration_s,
                   extra=extra, iterations=times)
