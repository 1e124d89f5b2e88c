"""Every plot the CLI writes (run/estimate --plot for training, benchmark and failure runs, sweep --plot for its
three kinds, compare --plot, topo --out and --heatmap), read back from matplotlib's artist tree: each axes that
draws data has a title, labelled axes and, where it draws more than one labelled series, a legend whose entries
say something. The notebooks' figure functions are checked the same way in test_plots_figures.py,
test_figures_studies.py and test_plots_mp.py."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from simdist.cli import main

ROOT = Path(__file__).resolve().parents[1]
NODES = """
cluster:
  nodes:
    - {count: 4, gpu: a100-sxm4-80gb, gpus_per_node: 8, intra_node: nvswitch-a100,
       nic: {bandwidth: "200 Gb/s", latency: "2 us", count: 8, transport: rdma}}
  fabric: {topology: fat_tree, nodes_per_leaf: 2, link: {bandwidth: "400 Gb/s", latency: "1 us"}}
"""
TRAINING = "name: small\n" + NODES + """
workload: {model: resnet50, batch_per_gpu: 32, precision: fp16}
run: {iterations: 3, warmup: 1}
"""
FAILURES = "name: small-failures\n" + NODES + """
workload: {model: resnet50, batch_per_gpu: 32, precision: fp16}
failures:
  random: {}
  recovery: {policy: checkpoint_restart, checkpoint_interval: "30 min"}
run: {duration: "60 d", fidelity: estimate, replicas: 2}
"""


def _file(tmp_path, text: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(text))
    return str(path)


def _cli(*args) -> str:
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r.output


def _named(ticks) -> bool:
    """Tick labels that name categories (bars per GPU, links per name), not numbers on a scale."""
    def number(text: str) -> bool:
        try:
            float(text.replace("\u2212", "-").replace(",", "").rstrip("%"))
            return True
        except ValueError:
            return False
    return any(t.get_text() and not number(t.get_text()) for t in ticks)


def _labelled(fig) -> None:
    """Title, axis labels and legends of every axes that draws data (colour bars only need their label)."""
    suptitle = fig._suptitle.get_text() if fig._suptitle is not None else ""
    drawn = [ax for ax in fig.axes if ax.has_data() and ax.get_label() != "<colorbar>"]
    assert drawn, "the figure draws nothing"
    for ax in drawn:
        assert ax.get_title() or suptitle, "a title"
        assert ax.get_xlabel() or _named(ax.get_xticklabels()), "an x label (or named categories)"
        assert ax.get_ylabel() or _named(ax.get_yticklabels()), "a y label (or named categories)"
        _, labels = ax.get_legend_handles_labels()
        labels = [x for x in labels if not x.startswith("_")]
        if len(labels) > 1:
            legend = ax.get_legend() or (fig.legends[0] if fig.legends else None)
            assert legend is not None, f"a legend for {labels}"
            assert all(t.get_text().strip() for t in legend.get_texts())
    for bar in (ax for ax in fig.axes if ax.get_label() == "<colorbar>"):
        assert bar.get_ylabel() or bar.get_xlabel(), "a colour bar says what its colours are"


def test_run_plot_of_a_training_run(tmp_path, drawn):
    _cli("run", _file(tmp_path, TRAINING), "--plot", tmp_path / "run.png")
    (fig,) = drawn
    _labelled(fig)
    timeline, bars = fig.axes[:2]
    assert {t.get_text() for t in timeline.get_legend().get_texts()} >= {"forward", "backward"}
    assert "iteration" in bars.get_legend().get_texts()[0].get_text()
    assert all(t.get_text().endswith(" ms") for t in bars.texts if t.get_text())  # bar labels carry units


def test_estimate_plot_of_a_benchmark(tmp_path, drawn):
    _cli("estimate", ROOT / "scenarios/examples/nvswitch-8gpu-allreduce.yaml", "--plot", tmp_path / "bench.svg")
    (fig,) = drawn
    _labelled(fig)
    assert any("busbw" in ax.get_ylabel() or "GB/s" in ax.get_ylabel() for ax in fig.axes)


def test_plot_of_a_failure_run(tmp_path, drawn):
    _cli("estimate", _file(tmp_path, FAILURES), "--plot", tmp_path / "goodput.png")
    (fig,) = drawn
    _labelled(fig)
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(t.startswith("failures (") for t in texts) and any("goodput" in t for t in texts)


@pytest.mark.parametrize("axis, kind", [
    ("failures.recovery.checkpoint_interval=10 min,1 h,4 h", "goodput"),
    ("cluster.nodes.0.count=2,4", "scaling"),
    ("communication.strategy=ring,tree", "breakdown"),
])
def test_sweep_plots(tmp_path, drawn, axis, kind):
    text = FAILURES if kind == "goodput" else TRAINING.replace("run: {", "run: {fidelity: estimate, ")
    _cli("sweep", _file(tmp_path, text), "--axis", axis, "--out", tmp_path / "sweep.csv", "--jobs", "1",
         "--plot", tmp_path / f"{kind}.png")
    (fig,) = drawn
    _labelled(fig)


def test_compare_breakeven_plot(tmp_path, drawn):
    _cli("compare", _file(tmp_path, TRAINING), "--methods", "fp16,powersgd:4", "--bandwidths", "10 Gb/s,100 Gb/s",
         "--plot", tmp_path / "breakeven.png")
    (fig,) = drawn
    _labelled(fig)


def test_topo_drawing_and_heatmap(tmp_path, drawn):
    path = _file(tmp_path, TRAINING)
    _cli("topo", path, "--out", tmp_path / "topo.png", "--heatmap", tmp_path / "heat.png")
    drawing, heat = drawn
    assert drawing.axes[0].get_title() and drawing.axes[0].get_legend() is not None  # link kinds
    assert all(t.get_text().endswith(" links") for t in drawing.axes[0].get_legend().get_texts())
    assert heat.axes[0].get_title().startswith("link utilisation on")
    (bar,) = [ax for ax in heat.axes if ax.get_label() == "<colorbar>"]
    assert "utilisation" in bar.get_ylabel()
