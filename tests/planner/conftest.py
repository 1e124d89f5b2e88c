"""A small training scenario for sweeps: fast under estimate, a few hundred ms under simulate."""
from __future__ import annotations

import pytest

BASE = {
    "name": "sweep-base",
    "cluster": {
        "nodes": [{"count": 2, "gpu": "v100-sxm2-32gb", "gpus_per_node": 4, "intra_node": "pcie-gen3",
                   "nic": {"bandwidth": "25 Gb/s", "latency": "5 us", "transport": "tcp"}}],
        "fabric": {"topology": "single_switch"},
    },
    "workload": {"model": "resnet50", "batch_per_gpu": 32, "precision": "fp16"},
    "communication": {"strategy": "ring", "bucket_size": "25 MB"},
    "run": {"iterations": 3, "warmup": 1, "fidelity": "estimate"},
}


@pytest.fixture
def base() -> dict:
    import copy

    return copy.deepcopy(BASE)
