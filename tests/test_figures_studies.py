"""The figure functions of notebooks 06-08 (simdist.figures): node groups, line charts with marks, Pareto fronts.
Each axes has a title, labelled axes and a legend, and the figures draw what they are given."""
from __future__ import annotations

import pytest

import simdist
from simdist import figures

NIC = {"bandwidth": "100 Gb/s", "latency": "2 us", "transport": "rdma"}
MIXED = {
    "name": "mixed",
    "cluster": {"nodes": [{"count": 1, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100", "nic": NIC},
                          {"count": 1, "gpu": "v100-sxm2-32gb", "gpus_per_node": 8, "intra_node": "cube-mesh-v100", "nic": NIC}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": "resnet50", "batch_per_gpu": 32, "precision": "fp16"},
    "training": {"batch_split": "proportional"},
    "run": {"iterations": 2, "warmup": 1},
}


def _complete(fig):
    for ax in [a for a in fig.axes if a.has_data()]:
        assert ax.get_title() or fig._suptitle is not None
        assert ax.get_xlabel() and ax.get_ylabel()
        assert ax.get_legend() is not None


def test_node_group_chart(tmp_path):
    res = {split: simdist.estimate(simdist.load(MIXED, {"training.batch_split": split})) for split in ("equal", "proportional")}
    fig = figures.node_group_chart(res, path=str(tmp_path / "g.png"), title="mixed")
    _complete(fig)
    assert (tmp_path / "g.png").stat().st_size > 0 and len(fig.axes) == 2
    labels = [t.get_text() for t in fig.axes[1].texts]
    batches = [g["batch_per_gpu"] for g in res["proportional"].node_groups]
    assert labels == [f"batch {b}/GPU" for b in batches] and batches[0] > batches[1]


def test_node_group_bars_stack_to_the_slowest_step():
    """Compute + idle of the fast group equals the slow group's step (both unslowed by collectives, as the
    breakdown counts compute), under simulation where interference slows the compute stream."""
    result = simdist.simulate(simdist.load(MIXED, {"training.batch_split": "equal"}))
    fast, slow = sorted(result.node_groups, key=lambda g: g["step_s"])
    assert fast["step_s"] + fast["idle_s"] == pytest.approx(slow["step_s"], rel=1e-9) and slow["idle_s"] == 0
    fig = figures.node_group_chart({"equal": result})
    heights = {}
    for bar in fig.axes[0].patches:  # compute and idle bars stacked per group
        heights[bar.get_x()] = heights.get(bar.get_x(), 0.0) + bar.get_height()
    assert max(heights.values()) == pytest.approx(slow["step_s"] * 1e3, rel=1e-9)
    assert min(heights.values()) == pytest.approx(slow["step_s"] * 1e3, rel=1e-9)


def test_lines_marks_and_log_ticks():
    xs = [10, 20, 40, 80]
    fig = figures.lines({"a": (xs, [0.8, 0.9, 0.95, 0.9])}, xlabel="interval (min)", ylabel="goodput",
                        xscale="log", percent=True, marks={"optimum": 40})
    _complete(fig)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["10", "20", "40", "80"]
    assert "optimum" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert ax.get_xscale() == "log"


def test_pareto_chart():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"cost": [1.0, 2.0, 3.0, 2.5], "days": [10.0, 5.0, 2.0, 6.0], "gpu": ["a", "a", "b", "b"],
                          "plan": ["p1", "p2", "p3", "p4"]})
    front = frame.iloc[:3]
    fig = figures.pareto_chart(frame, "cost", "days", front, chosen=frame.iloc[1], hue="gpu", label="plan",
                               limits={"deadline": ("y", 7.0)}, title="t")
    _complete(fig)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert {"a", "b", "Pareto front", "deadline", "chosen plan"} <= set(legend)
    assert sorted(t.get_text() for t in fig.axes[0].texts) == ["p1", "p2", "p3"]
