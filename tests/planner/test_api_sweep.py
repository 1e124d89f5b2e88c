"""simdist.sweep: the CLI's sweep from Python, with a typed table."""
from __future__ import annotations

from pathlib import Path

import simdist

ROOT = Path(__file__).resolve().parents[2]


def test_api_sweep_equals_the_cli_rows_and_resumes(base, tmp_path):
    out = tmp_path / "s.csv"
    axes = {"communication.strategy": ["ring", "ps"], "cluster.nodes.0.count": "geom(1, 4, 3)"}
    table = simdist.sweep(base, axes, out=out, constraints=["gpus >= 8"], jobs=1)
    assert (table.points, table.pruned, len(table)) == (6, 2, 4)
    assert [r["gpus"] for r in table.rows] == [8, 16, 8, 16] and isinstance(table.rows[0]["iteration_time_s"], float)
    again = simdist.sweep(base, axes, out=out, constraints=["gpus >= 8"], jobs=1)
    assert again.ran == 0 and again.rows == table.rows
    single = simdist.estimate(simdist.load(base, {"communication.strategy": "ps", "cluster.nodes.0.count": 4}))
    assert table.rows[-1]["iteration_time_s"] == single.iteration_time_s
