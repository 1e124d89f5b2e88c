"""The Ray executor on a real local Ray instance gives the same rows as the local executor."""
from __future__ import annotations

import pytest

from simdist.io.sweep_load import load_point, sweep_spec
from simdist.planner.sweep import run_sweep

pytestmark = pytest.mark.slow

AXES = ["communication.strategy=ring,ps", "cluster.nodes.0.count=1,2,4", "communication.compression.method=none,fp16"]


def test_ray_rows_equal_local_rows(base, tmp_path):
    pytest.importorskip("ray")
    spec = sweep_spec({}, AXES)
    local = run_sweep(spec, base, load_point, str(tmp_path / "local.csv"), jobs=2)
    remote = run_sweep(spec, base, load_point, str(tmp_path / "ray.csv"), jobs=2, executor="ray")
    assert remote.ran == 12 and remote.rows == local.rows
