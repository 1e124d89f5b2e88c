"""The steady phases of a run whose mode changes during it: `training.sync: hybrid` (asp until
`training.hybrid_switch`, bsp after) and `training.batch_split: dynamic` (the predicted split until the job has
observed every GPU for `training.rebalance_every` iterations, the observed one after). engine/composite.py
runs each phase and combines them."""
from __future__ import annotations

from dataclasses import replace

from simdist.scenario import BatchSplit, Scenario, StrategyKind, SyncMode
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
        raise AssertionError("io.rules_training: sync hybrid has a switch point")
    assert 0 < s < n, f"io.rules_training: the switch {s} is strictly inside run.iterations ({n})"
    return s


def phases(scenario: Scenario) -> list[tuple[int, int, Scenario]]:
    """(first iteration, iterations, the steady scenario of that phase) in order, consecutive equal
    phases merged."""
    t, n = scenario.training, scenario.run.iterations
    cuts = {0, n}
    if t.sync is SyncMode.HYBRID:
        assert scenario.communication.strategy == StrategyKind.PS, "io.rules_training: hybrid runs on ps"
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
