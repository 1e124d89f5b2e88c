"""The convergence reference of a run: the same cluster, model and strategy under BSP without compression."""
from __future__ import annotations

from dataclasses import replace

from simdist.scenario import CompressionMethod, CompressionSpec, Scenario, SyncMode


def is_baseline(scenario: Scenario) -> bool:
    """Whether the run is its own reference (BSP, no compression)."""
    return scenario.training.sync == SyncMode.BSP and scenario.communication.compression.method == CompressionMethod.NONE


def baseline_scenario(scenario: Scenario) -> Scenario:
    """The same cluster, model and strategy under BSP without compression (its convergence factor 1)."""
    return replace(scenario,
                   training=replace(scenario.training, sync=SyncMode.BSP, convergence_factor=1.0),
                   communication=replace(scenario.communication, compression=CompressionSpec()))
