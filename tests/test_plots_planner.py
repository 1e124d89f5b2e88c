"""The planner's figures (simdist.plots): scaling curves, breakdown bars, the Pareto front, a link heatmap.

Each has a title, axis labels with units and a legend, and is written as PNG or SVG by its extension.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest
import yaml

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from simdist import plots  # noqa: E402
from simdist.engine.simulation import simulate  # noqa: E402
from simdist.errors import SimdistError  # noqa: E402
from simdist.io.load import load_scenario  # noqa: E402
from simdist.topology.build import build_topology  # noqa: E402
from tests.planner.conftest import BASE  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _row(strategy, gpus, rate, eff, point=0):
    return {"point": point, "status": "ok", "communication.strategy": strategy, "cluster.nodes.0.count": gpus // 4,
            "gpus": gpus, "samples_per_s": rate, "tokens_per_s": None, "scaling_efficiency": eff,
            "iteration_time_s": 0.1, "compute_s": 0.05, "exposed_communication_s": 0.04, "compression_s": 0.0,
            "optimizer_s": 0.01, "cost_per_hour_usd": gpus * 2.0}


ROWS = [_row(s, g, g * 100 * e, e, i) for i, (s, e) in enumerate([("ring", 0.9), ("ps", 0.5)]) for g in (4, 8, 16)]


def _figures_saved(monkeypatch) -> list:
    """Capture every figure at savefig (the plot functions close them afterwards)."""
    seen = []
    real = matplotlib.figure.Figure.savefig

    def spy(fig, path, *a, **k):
        seen.append(fig)
        return real(fig, path, *a, **k)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    return seen


def _complete(fig):
    axes = [ax for ax in fig.axes if ax.has_data() and ax.get_label() != "<colorbar>"]
    assert axes
    for ax in axes:
        assert ax.get_title() or fig._suptitle is not None
        assert "(" in ax.get_xlabel() or ax.get_xlabel() == "GPUs" or ax.get_xlabel() == "point"
        assert "(" in ax.get_ylabel(), f"y axis unit: {ax.get_ylabel()!r}"
        assert ax.get_legend() is not None


@pytest.mark.parametrize("ext", ["png", "svg"])
def test_scaling_curves_one_line_per_strategy(tmp_path, monkeypatch, ext):
    seen = _figures_saved(monkeypatch)
    path = tmp_path / f"scaling.{ext}"
    plots.plot_scaling(ROWS, ["communication.strategy", "cluster.nodes.0.count"], str(path))
    assert path.stat().st_size > 1000
    (fig,) = seen
    _complete(fig)
    thr, eff = fig.axes
    assert [t.get_text() for t in thr.get_legend().get_texts()] == ["ring", "ps"]
    assert len(thr.get_lines()) == 2 and list(thr.get_lines()[0].get_xdata()) == [4, 8, 16]
    assert list(eff.get_lines()[1].get_ydata()) == pytest.approx([50, 50, 50])


def test_breakdown_bars_from_rows_and_results(tmp_path, monkeypatch):
    seen = _figures_saved(monkeypatch)
    plots.plot_breakdown_bars({f"p{r['point']}": r for r in ROWS}, str(tmp_path / "rows.png"))
    result = simulate(load_scenario(ROOT / "scenarios" / "default.yaml"), fidelity="estimate")
    plots.plot_breakdown_bars({"default": result}, str(tmp_path / "result.svg"))
    assert (tmp_path / "rows.png").exists() and (tmp_path / "result.svg").read_text().startswith("<?xml")
    for fig in seen:
        _complete(fig)
    labels = [t.get_text() for t in seen[0].axes[0].get_legend().get_texts()]
    assert sorted(labels) == sorted(["compute", "exposed communication", "compression", "optimizer", "iteration time"])


def test_pareto_front_marks_the_chosen_plan(tmp_path, monkeypatch):
    seen = _figures_saved(monkeypatch)
    front = [ROWS[0], ROWS[2]]
    plots.plot_pareto(ROWS, front, ROWS[0], str(tmp_path / "front.svg"))
    (fig,) = seen
    _complete(fig)
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert texts == ["candidates", "Pareto front (2 points)", "chosen plan"]


def test_pareto_points_tell_gpu_and_layout_apart(tmp_path, monkeypatch):
    """A plan over GPUs (zipped with their node interiors) and strategies: one legend entry per GPU and strategy,
    each with its own colour, and each front point labelled with the rest of its axes."""
    from simdist.io.sweep_load import load_point, plan_spec
    from simdist.planner.plan import search
    from simdist.planner.plan_report import pareto_labels

    seen = _figures_saved(monkeypatch)
    spec = plan_spec({"axes": {"cluster.nodes.0.gpu": ["v100-sxm2-32gb", "a100-sxm4-80gb"],
                               "cluster.nodes.0.intra_node": ["pcie-gen3", "pcie-gen4"],
                               "communication.strategy": ["ring", "ps"], "cluster.nodes.0.count": [1, 2]},
                      "zip": [["cluster.nodes.0.gpu", "cluster.nodes.0.intra_node"]], "confirm": 0})
    plan = search(spec, copy.deepcopy(BASE), load_point, jobs=1)
    group, label = pareto_labels(spec)
    ranked = [c for c in plan.candidates if c["status"] == "ranked"]
    plots.plot_pareto(ranked, plan.front, plan.ranked[0], str(tmp_path / "front.png"), group=group, label=label)
    (fig,) = seen
    _complete(fig)
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    kinds = [f"gpu {g}, strategy {s}" for g in ("a100-sxm4-80gb", "v100-sxm2-32gb") for s in ("ps", "ring")]
    assert legend == kinds + [f"Pareto front ({len(plan.front)} points)", "chosen plan"]
    scatters = [c for c in ax.collections if c.get_label() in kinds]
    assert len({tuple(c.get_facecolor()[0]) for c in scatters}) == 4  # one colour per kind
    assert sum(len(c.get_offsets()) for c in scatters) == len(ranked) == 8
    notes = sorted(t.get_text() for t in ax.texts)
    assert len(notes) == len(plan.front) and set(notes) <= {"count 1", "count 2"}


def test_link_heatmap_on_the_topology(tmp_path, monkeypatch):
    seen = _figures_saved(monkeypatch)
    s = load_scenario(ROOT / "scenarios" / "examples" / "fattree-64node-oversub.yaml")
    result = simulate(s, fidelity="estimate")
    for ext in ("png", "svg"):
        plots.link_heatmap(build_topology(s.cluster), result.links, str(tmp_path / f"heat.{ext}"))
        assert (tmp_path / f"heat.{ext}").stat().st_size > 1000
    fig = seen[0]
    ax = fig.axes[0]
    assert ax.get_title().startswith("link utilisation on")
    assert ax.get_legend() is not None
    bar = [a for a in fig.axes if a is not ax]
    assert bar and "utilisation (%" in bar[0].get_ylabel()
    hot = [c for c in ax.collections if c.get_array() is not None and len(c.get_array())]
    assert max(hot[0].get_array()) == pytest.approx(100 * max(lk.utilization for lk in result.links))


@pytest.mark.parametrize("name", ["x.pdf", "x.jpg", "x"])
def test_other_extensions_are_a_one_line_error(tmp_path, name):
    with pytest.raises(SimdistError, match="expected a .png or .svg") as err:
        plots.plot_scaling(ROWS, ["communication.strategy"], str(tmp_path / name))
    assert "\n" not in str(err.value) and not (tmp_path / name).exists()


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "simdist.cli", *args], capture_output=True, text=True, env=env)


def test_sweep_and_plan_write_their_plots(tmp_path):
    path = tmp_path / "base.yaml"
    path.write_text(yaml.safe_dump(copy.deepcopy(BASE), sort_keys=False))
    p = _cli("sweep", str(path), "--axis", "communication.strategy=ring,ps", "--axis", "cluster.nodes.0.count=1,2",
             "--out", str(tmp_path / "s.csv"), "--jobs", "1", "--plot", str(tmp_path / "scaling.png"))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "scaling.png").read_bytes()[:4] == b"\x89PNG"
    p = _cli("sweep", str(path), "--axis", "communication.strategy=ring,ps", "--out", str(tmp_path / "b.csv"),
             "--jobs", "1", "--plot", str(tmp_path / "bars.svg"))
    assert p.returncode == 0, p.stderr
    assert "exposed communication" in (tmp_path / "bars.svg").read_text()
    p = _cli("plan", str(path), "--axis", "communication.strategy=ring,ps", "--axis", "cluster.nodes.0.count=1,2",
             "--confirm", "1", "--jobs", "1", "--json", "--plot", str(tmp_path / "front.svg"))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["pareto_front"] and "chosen plan" in (tmp_path / "front.svg").read_text()
    p = _cli("plan", str(path), "--axis", "communication.strategy=ring,ps", "--plot", str(tmp_path / "front.gif"))
    assert p.returncode != 0 and "expected a .png or .svg" in p.stderr + p.stdout
    assert len((p.stderr + p.stdout).strip().splitlines()) == 1
