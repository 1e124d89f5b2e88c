"""A small real scenario (4 DGX-A100 nodes, ResNet-50) as data, for the bug-hunt regression tests."""
from __future__ import annotations

import copy
from typing import Any

from simdist.engine.simulation import simulate
from simdist.io.load import load_data
from simdist.io.overrides import apply_overrides

BASE: dict[str, Any] = {
    "name": "review-base",
    "cluster": {
        "nodes": [{"count": 4, "gpu": "a100-sxm4-80gb", "intra_node": "nvswitch-a100",
                   "nic": {"bandwidth": "100 Gb/s", "count": 1}}],
        "fabric": {"topology": "fat_tree", "nodes_per_leaf": 2},
    },
    "workload": {"model": "resnet50", "batch_per_gpu": 32, "precision": "fp16"},
    "communication": {"strategy": "ring", "bucket_size": "25 MB", "overlap": True},
    "run": {"iterations": 4, "warmup": 1},
}


def scenario(*overrides: str, data: dict | None = None):
    """The base scenario (or `data`) with --set style overrides, resolved."""
    return load_data(apply_overrides(copy.deepcopy(data or BASE), list(overrides)))


def result(*overrides: str, fidelity: str = "simulate"):
    return simulate(scenario(*overrides), fidelity=fidelity)
