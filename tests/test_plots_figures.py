"""simdist.plots' figure functions: every axes has a title, labelled axes and a legend; they save when asked."""
from __future__ import annotations

from pathlib import Path

import pytest

import simdist
from simdist import plots
from simdist.errors import SimdistError

ROOT = Path(__file__).resolve().parents[1]
SPEC = {
    "name": "plots",
    "cluster": {"nodes": [{"count": 2, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                           "nic": {"bandwidth": "100 Gb/s", "latency": "2 us", "transport": "rdma"}}],
                "fabric": {"topology": "fat_tree", "nodes_per_leaf": 1, "oversubscription": 2.0,
                           "link": {"bandwidth": "100 Gb/s", "latency": "1 us"}}},
    "workload": {"model": "resnet50", "batch_per_gpu": 16, "precision": "fp16"},
    "run": {"iterations": 3, "warmup": 1},
}
BENCH = ROOT / "scenarios" / "examples" / "nvswitch-8gpu-allreduce.yaml"


@pytest.fixture(scope="module")
def run():
    return simdist.simulate(SPEC)


def _complete(fig, legend: bool = True):
    axes = [ax for ax in fig.axes if ax.has_data()]
    assert axes
    for ax in axes:
        assert ax.get_title() or fig._suptitle is not None
        assert ax.get_xlabel() or ax.get_xticklabels(), "x axis"
        assert ax.get_ylabel() or ax.get_yticklabels(), "y axis"
        if legend:
            assert ax.get_legend() is not None or fig.legends, "legend"


def test_breakdown_and_timeline(run, tmp_path):
    fig = plots.breakdown(run, path=str(tmp_path / "b.png"))
    _complete(fig)
    assert fig.axes[0].get_ylabel() == "time per iteration (ms)" and (tmp_path / "b.png").stat().st_size > 0
    fig = plots.timeline(run, gpus=2)
    _complete(fig)
    assert "2 of 16 GPUs shown" in fig.axes[0].get_title()
    with pytest.raises(ValueError, match="simulate it"):
        plots.timeline(simdist.estimate(SPEC))


def test_curves_bars_links(run):
    bench = {"ring": simdist.estimate(BENCH), "tree": simdist.estimate(simdist.load(BENCH, {"communication.strategy": "tree"}))}
    for metric in ("busbw_GBps", "time_s"):
        _complete(plots.bandwidth_curves({"8 GPUs": bench}, metric=metric))
    fig = plots.grouped_bars({"2:1": {"ring": run, "tree": run}}, ylabel="iteration time (ms)")
    _complete(fig)
    fig = plots.link_utilization({"ring": run})
    _complete(fig)
    assert any("spine" in t.get_text() for t in fig.axes[0].get_yticklabels())


def test_breakeven_chart_and_validation_report():
    table = simdist.breakeven(SPEC, ["10 Gb/s", "100 Gb/s"], "fp16,powersgd:4")
    _complete(plots.breakeven_chart([table]))
    report = {"cases": [{"name": "a", "metric": "time_s", "algorithm": "ring", "predicted": 0.1, "measured": 0.11},
                        {"name": "b", "metric": "time_s", "algorithm": "ps", "predicted": 0.3, "measured": 0.2}],
              "mape": 0.3}
    fig = plots.predicted_vs_measured(report)
    _complete(fig)
    assert "MAPE 30.0%" in fig.axes[0].get_title()


def test_unwritable_path_is_a_simdist_error(run, tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(SimdistError, match="cannot write plot"):
        plots.breakdown(run, path=str(tmp_path / "file" / "x.png"))
