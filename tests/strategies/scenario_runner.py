"""Run a scenario dict with dotted-key changes (values may be mappings), as the strategy tests need."""
from __future__ import annotations

import copy

from simdist.engine.simulation import simulate
from simdist.io.load import load_data
from simdist.io.overrides import set_path


def run_with(base: dict, changes: dict | None = None, fidelity: str = ""):
    """`simulate(base with each dotted key of `changes` set to its value)`; `base` is left untouched."""
    data = copy.deepcopy(base)
    for dotted, value in (changes or {}).items():
        set_path(data, dotted.split("."), value)
    return simulate(load_data(data), fidelity=fidelity)
