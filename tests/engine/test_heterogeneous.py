"""Mixed GPUs in one job: per-rank compute from each GPU, batch_split equal | proportional, node-group report."""
from __future__ import annotations

import copy

import pytest

from simdist.compute import layer_times
from simdist.io.load import load_data
from tests.strategies.scenario_runner import run_with


MIXED = {
    "name": "mixed",
    "cluster": {
        "nodes": [{"count": 2, "gpu": "v100-sxm2-32gb", "gpus_per_node": 8, "intra_node": "cube-mesh-v100",
                   "nic": {"bandwidth": "100 Gb/s", "latency": "5 us", "transport": "rdma"}},
                  {"count": 2, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                   "nic": {"bandwidth": "100 Gb/s", "latency": "5 us", "transport": "rdma"}}],
        "fabric": {"topology": "single_switch"},
    },
    "workload": {"model": "resnet50", "batch_per_gpu": 64, "precision": "fp16"},
    "communication": {"strategy": "ring", "bucket_size": "25 MB", "overlap": False},
    "run": {"iterations": 4, "warmup": 1},
}


def _step_s(gpu: str, batch: int) -> float:
    """One micro-batch's forward + backward on `gpu`, straight from the compute model."""
    scenario = load_data(copy.deepcopy(MIXED))
    spec = next(g.gpu for g in scenario.cluster.node_groups if g.gpu.key == gpu)
    times = layer_times(scenario.workload.model, spec, batch, "fp16")
    return sum(t.fwd_s + t.bwd_s for t in times)


@pytest.mark.parametrize("fidelity", ["estimate", "simulate"])
def test_proportional_beats_equal_by_the_factor_the_compute_model_predicts(fidelity):
    equal = run_with(MIXED, None, fidelity).to_dict()
    prop = run_with(MIXED, {"training.batch_split": "proportional"}, fidelity).to_dict()
    v, a = prop["node_groups"]
    assert (v["gpu"], a["gpu"]) == ("v100-sxm2-32gb", "a100-sxm4-80gb")
    assert 16 * v["batch_per_gpu"] + 16 * a["batch_per_gpu"] == 32 * 64 == prop["strategy"]["global_batch"]
    assert v["batch_per_gpu"] < 64 < a["batch_per_gpu"]
    predicted_equal = max(_step_s("v100-sxm2-32gb", 64), _step_s("a100-sxm4-80gb", 64))
    predicted_prop = max(_step_s("v100-sxm2-32gb", v["batch_per_gpu"]), _step_s("a100-sxm4-80gb", a["batch_per_gpu"]))
    assert equal["breakdown_s"]["compute"] == pytest.approx(predicted_equal, rel=1e-9)
    assert prop["breakdown_s"]["compute"] == pytest.approx(predicted_prop, rel=1e-9)
    # without overlap the buckets start when the slowest finishes its backward: the rest is the same
    saved = predicted_equal - predicted_prop
    assert equal["iteration_time_s"] - prop["iteration_time_s"] == pytest.approx(saved, rel=1e-6)
    assert prop["throughput"]["samples_per_s"] / equal["throughput"]["samples_per_s"] == pytest.approx(
        equal["iteration_time_s"] / prop["iteration_time_s"], rel=1e-12)
    assert saved > 0.2 * predicted_equal  # the A100s are much faster: the split matters
    # equal split: the A100 group waits for the V100s; proportional: both finish within a sample
    ev, ea = equal["node_groups"]
    assert ev["idle_s"] == 0.0 and ea["idle_s"] == pytest.approx(ev["step_s"] - ea["step_s"], rel=1e-6)
    assert a["idle_s"] < 0.1 * ea["idle_s"]


def test_proportional_equals_equal_on_a_uniform_cluster():
    data = copy.deepcopy(MIXED)
    data["cluster"]["nodes"][1].update(gpu="v100-sxm2-32gb", intra_node="cube-mesh-v100")
    equal = run_with(data, None, "estimate").to_dict()
    prop = run_with(data, {"training.batch_split": "proportional"}, "estimate").to_dict()
    assert prop["iteration_time_s"] == equal["iteration_time_s"]
    assert [g["batch_per_gpu"] for g in prop["node_groups"]] == [64, 64]


def test_batches_are_integers_that_add_up_with_a_remainder():
    r = run_with(MIXED, {"training.batch_split": "proportional", "workload.batch_per_gpu": 7,
                         "cluster.nodes.1.count": 1}, "estimate").to_dict()
    groups = r["node_groups"]
    assert r["strategy"]["global_batch"] == 24 * 7
    assert all(isinstance(b, int) and b >= 1 for g in groups for b in g["batches"])
    assert r["strategy"]["rank_classes"] >= 2


def test_memory_is_checked_per_group_with_its_own_batch():
    from simdist.errors import InfeasibleError

    data = copy.deepcopy(MIXED)
    data["cluster"]["nodes"][0]["gpu"] = "v100-sxm2-16gb"
    data["workload"].update(model="bert-large", batch_per_gpu=20, seq_len=512, flash_attention=False)  # keeps s x s probabilities
    with pytest.raises(InfeasibleError):  # 20 samples do not fit a 16 GB V100 ...
        run_with(data, None, "estimate")
    # ... but the proportional split moves samples to the 80 GB A100s
    r = run_with(data, {"training.batch_split": "proportional"}, "estimate")
    assert r.memory.fits


def test_the_text_report_shows_node_groups():
    from simdist.io.load import load_data
    from simdist.report import print_result

    data = copy.deepcopy(MIXED)
    data["training"] = {"batch_split": "proportional"}
    text = print_result(load_data(data), run_with(data, None, "estimate"))
    assert "node groups (batch split proportional)" in text and "idle (waits for slowest)" in text
    assert "a100-sxm4-80gb" in text


@pytest.mark.parametrize("fidelity", ["estimate", "simulate"])
def test_a_mixed_ring_is_bottlenecked_by_the_slower_groups_link(fidelity):
    from tests.engine.test_every_key import BENCH

    data = copy.deepcopy(BENCH)
    fast = data["cluster"]["nodes"][0]
    fast.update(count=2, gpus_per_node=1, intra_node="pcie-gen3")
    slow = copy.deepcopy(fast)
    slow["nic"] = {"bandwidth": "10 Gb/s", "latency": "5 us", "transport": "rdma"}
    data["cluster"]["nodes"] = [fast, slow]
    data["workload"]["benchmark"]["sizes"] = ["1 GB"]
    r = run_with(data, None, fidelity)
    nic = load_data(copy.deepcopy(data)).cluster.node_groups[1].nic.link
    # ring all_reduce busbw = the slowest link's effective bandwidth (latency is negligible at 1 GB)
    assert r.collectives[0].busbw_GBps == pytest.approx(nic.bandwidth_Bps * nic.efficiency / 1e9, rel=1e-3)
    assert all(l.link.startswith(("node2/", "node3/", "switch->node2", "switch->node3")) for l in r.links[:4])


def test_a_proportional_split_charges_each_groups_loader_its_own_batch():
    """workload.input_pipeline on a mixed cluster: each node group's loader feeds its own ranks' batch on its
    own CPU (the default cost, scaled to 2 x E5-2698 v4 on the V100 nodes and 2 x EPYC 7742 on the A100s).
    The slowest of the two sets the loader's time: not the largest batch at the slowest loader's rate."""
    from simdist.input_pipeline import loader_samples_per_s

    sets = {"training.batch_split": "proportional",
            "workload.input_pipeline": {"workers_per_gpu": 4, "host_cores": 40}}
    prop = run_with(MIXED, sets, "estimate").to_dict()
    v, a = prop["node_groups"]
    scenario = load_data(copy.deepcopy(MIXED), ["workload.input_pipeline={workers_per_gpu: 4, host_cores: 40}"])
    pipe = scenario.workload.input_pipeline
    rate_v = loader_samples_per_s(pipe, 8, "cube-mesh-v100")
    rate_a = loader_samples_per_s(pipe, 8, "nvswitch-a100")
    assert rate_v < rate_a and v["batch_per_gpu"] < a["batch_per_gpu"]
    expected = max(v["batch_per_gpu"] / rate_v, a["batch_per_gpu"] / rate_a)
    assert prop["input_pipeline"]["loader_s_per_iteration"] == pytest.approx(expected, rel=1e-12)
    assert expected < a["batch_per_gpu"] / rate_v  # the largest batch at the slowest rate would overstate it
