"""MFU: model FLOPs (3 x forward per sample, no recomputation) x samples/s over the GPUs' peak dense FLOP/s."""
from __future__ import annotations

import pytest

from simdist.results.mfu import cluster_mfu, mfu, model_flops_per_sample
from simdist.workload import get_model
from tests.compute.gpus import A100_80GB, V100_16GB
from tests.strategies.scenario_runner import run_with


def test_one_gpu_share_over_its_peak_at_the_precision() -> None:
    assert mfu(156e12, A100_80GB, "bf16") == pytest.approx(0.5)
    assert mfu(9.75e12, A100_80GB, "fp32") == pytest.approx(0.5)
    with pytest.raises(ValueError):
        mfu(-1.0, A100_80GB, "bf16")


def test_model_flops_are_three_forwards() -> None:
    m = get_model("gpt2", seq_len=1024)
    assert model_flops_per_sample(m) == pytest.approx(3 * sum(x.fwd_flops for x in m.layers))


def test_cluster_mfu_sums_the_peaks_of_mixed_gpus() -> None:
    m = get_model("gpt2", seq_len=1024)
    f = model_flops_per_sample(m)
    got = cluster_mfu(m, 10.0, [(A100_80GB, 8), (V100_16GB, 8)], "fp16")
    assert got == pytest.approx(10.0 * f / (8 * 312e12 + 8 * 125e12))
    assert cluster_mfu(m, 10.0, [(A100_80GB, 8)], "fp16") == pytest.approx(mfu(10.0 * f / 8, A100_80GB, "fp16"))


def test_every_training_result_reports_it() -> None:
    base = {"name": "mfu",
            "cluster": {"nodes": [{"count": 2, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8,
                                   "intra_node": "nvswitch-a100", "nic": {"bandwidth": "200 Gb/s", "count": 8}}],
                        "fabric": {"topology": "single_switch"}},
            "workload": {"model": "gpt2", "batch_per_gpu": 4, "precision": "bf16", "seq_len": 1024},
            "run": {"fidelity": "estimate", "iterations": 2, "warmup": 0}}
    for change in ({}, {"training.parallelism": {"zero": 3}}, {"training.parallelism": {"zero": 3},
                                                               "training.recompute": "full"}):
        r = run_with(base, change).to_dict()
        m = get_model("gpt2", seq_len=1024)
        expect = model_flops_per_sample(m) * r["throughput"]["samples_per_s"] / (16 * 312e12)
        assert r["mfu"] == pytest.approx(expect, rel=1e-12)
