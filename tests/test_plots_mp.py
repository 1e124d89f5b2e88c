"""The model-parallel figure functions (simdist.plots_mp, re-exported by simdist.plots): layouts side by side,
a refused layout drawn as such, and stacked terms that add up to the iteration."""
from __future__ import annotations

import pytest

import simdist
from simdist import plots

SPEC = {
    "name": "gpt2-mp",
    "cluster": {"nodes": [{"count": 1, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                           "nic": {"bandwidth": "200 Gb/s", "latency": "2 us", "count": 8, "transport": "rdma"}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": "gpt2", "seq_len": 1024, "global_batch": 16, "precision": "fp16"},
    "training": {"parallelism": {"dp": 2, "tp": 2, "pp": 2}, "micro_batch": 1, "schedule": "1f1b", "optimizer": "adam"},
    "communication": {"strategy": "ring", "bucket_size": "25 MB"},
    "run": {"iterations": 2, "warmup": 0, "fidelity": "estimate"},
}
REFUSED = simdist.InfeasibleError("does not fit in GPU memory: needs 106 GB per GPU (weights 12.9 GB, ...), "
                                  "the a100-sxm4-80gb has 85.9 GB")


@pytest.fixture(scope="module")
def layouts():
    def run(tp, pp):
        return simdist.estimate(simdist.load(SPEC, {"training.parallelism": {"dp": 8 // (tp * pp), "tp": tp, "pp": pp}}))
    return {"tp 2, pp 2, dp 2": run(2, 2), "tp 1, pp 4, dp 2": run(1, 4), "refused": REFUSED}


def _complete(fig):
    for ax in [a for a in fig.axes if a.has_data()]:
        assert ax.get_title() or fig._suptitle is not None
        assert ax.get_xlabel() and ax.get_ylabel()
        assert ax.get_legend() is not None


def test_layout_chart(layouts, tmp_path):
    fig = plots.layout_chart(layouts, path=str(tmp_path / "l.png"), title="gpt2")
    _complete(fig)
    assert (tmp_path / "l.png").stat().st_size > 0 and len(fig.axes) == 2
    ax_t, ax_m = fig.axes
    heights = [p.get_height() for p in ax_t.patches]
    assert heights[:2] == pytest.approx([r.throughput.tokens_per_s / 1e3 for r in list(layouts.values())[:2]])
    assert [t.get_text() for t in ax_t.texts if "MFU" not in t.get_text()] == \
        ["does not fit in GPU memory:\nneeds 106 GB per GPU"]
    assert "cannot run (does not fit)" in [t.get_text() for t in ax_m.get_legend().get_texts()]
    r = layouts["tp 2, pp 2, dp 2"]
    stacked = sum(p.get_height() for p in ax_m.patches if p.get_x() < 0.5)
    assert stacked == pytest.approx(sum(r.memory.parts_bytes.values() if isinstance(r.memory.parts_bytes, dict)
                                        else vars(r.memory.parts_bytes).values()) / 2**30)  # GiB


def test_parallel_breakdown_adds_up_to_the_iteration(layouts):
    fig = plots.parallel_breakdown(layouts, marks={"published": 0.5})
    _complete(fig)
    ax = fig.axes[0]
    for x, r in enumerate(list(layouts.values())[:2]):
        stacked = sum(p.get_height() for p in ax.patches if abs(p.get_x() + p.get_width() / 2 - x) < 1e-9)
        assert stacked == pytest.approx(r.iteration_time_s, rel=1e-9)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"compute", "tp communication", "pipeline bubble", "published", "cannot run (does not fit)"} <= set(legend)
