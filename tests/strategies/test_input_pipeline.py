"""workload.input_pipeline (the host data loader on the node's CPU cores) and workload.single_gpu_throughput
(the GPU compute anchored to a measured single-GPU throughput): what each does to a run, and where each is refused."""
from __future__ import annotations

from pathlib import Path

import pytest

from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.input_pipeline import loader_bound, loader_cores, loader_samples_per_s
from simdist.io.load import load_scenario
from simdist.scenario import InputPipelineSpec

DDP = Path(__file__).resolve().parents[2] / "validation" / "published" / "scenarios" / "ddp-resnet50-dgx.yaml"
SLOW = "workload.input_pipeline={workers_per_gpu: 8, host_cores: 40, cpu_per_sample: 4 ms}"
ONE_GPU = ["cluster.nodes.0.intra_node=pcie-gen3", "cluster.nodes.0.gpus_per_node=1"]


def run(*sets: str) -> dict:
    return simulate(load_scenario(DDP, list(sets))).to_dict()


def test_a_gpus_loader_gets_its_share_of_the_nodes_cores_less_one_per_training_process():
    p = InputPipelineSpec(cpu_s_per_sample=4e-3, workers_per_gpu=8, host_cores=40)
    assert loader_cores(p, 8) == 4.0            # (40 - 8) / 8
    assert loader_cores(p, 1) == 8.0            # min(8 workers, 39 cores)
    assert loader_samples_per_s(p, 8) == pytest.approx(1000.0)
    wide = InputPipelineSpec(cpu_s_per_sample=4e-3, workers_per_gpu=16, host_cores=128)
    assert loader_cores(wide, 8) == 15.0        # (128 - 8) / 8
    b = loader_bound(p, (8,), 256, 0.2)
    assert b.bound and b.loader_s == pytest.approx(0.256) and b.iteration_s == pytest.approx(0.256)
    assert not loader_bound(p, (8,), 100, 0.2).bound


def test_a_loader_slower_than_the_gpus_sets_the_step_and_the_scaling_baseline_has_the_whole_node():
    plain, slow = run(), run(SLOW)
    ip = slow["input_pipeline"]
    # DGX-1: 2 x E5-2698 v4, 2 threads per core, so each training process takes half a core: (40 - 8/2) / 8
    assert ip["input_bound"] and ip["cores_per_gpu"] == 4.5
    # 8 GPUs x 256 samples per step, each loader at 4.5 cores / 4 ms = 1,125 samples/s
    assert slow["iteration_time_s"] == pytest.approx(256 / 1125)
    assert slow["throughput"]["samples_per_s"] == pytest.approx(9000.0)
    # one GPU alone: min(its step, 8 workers / 4 ms = 2,000/s) -> the GPU's own rate here
    single = plain["throughput"]["samples_per_s"] / plain["scaling_efficiency"] / 8
    assert slow["scaling_efficiency"] == pytest.approx(1125.0 / single, rel=1e-9)
    # waiting for data is not exposed communication
    assert slow["breakdown_s"]["exposed_communication"] == pytest.approx(plain["breakdown_s"]["exposed_communication"])


def test_a_loader_that_keeps_up_changes_nothing():
    plain = run("workload.precision=fp32", "workload.batch_per_gpu=112")
    fed = run("workload.precision=fp32", "workload.batch_per_gpu=112", SLOW)
    assert not fed["input_pipeline"]["input_bound"]
    assert fed["iteration_time_s"] == plain["iteration_time_s"]
    assert fed["scaling_efficiency"] == plain["scaling_efficiency"]


@pytest.mark.parametrize("sets, key", [
    (["workload.input_pipeline={workers_per_gpu: 8, host_cores: 8}"], "workload.input_pipeline.host_cores"),
    ([SLOW, "training.sync=asp", "communication.strategy=ps"], "workload.input_pipeline"),
    (["workload.single_gpu_throughput=1000", "cluster.nodes.0.count=2", "training.parallelism.zero=3"],
     "workload.single_gpu_throughput"),
    (["workload.single_gpu_throughput=5000", SLOW], "workload.single_gpu_throughput"),
])
def test_refused_where_it_would_not_act(sets, key):
    with pytest.raises(ScenarioError) as err:
        simulate(load_scenario(DDP, sets))
    assert key in str(err.value)


def test_a_benchmark_has_no_loader_or_compute_to_anchor():
    with pytest.raises(ScenarioError) as err:
        load_scenario(DDP, ["workload.model=null", "workload.batch_per_gpu=null",
                            "workload.benchmark={op: all_reduce, sizes: ['1 MB']}",
                            "workload.input_pipeline={workers_per_gpu: 8, host_cores: 40}",
                            "workload.single_gpu_throughput=1000"])
    assert "workload.input_pipeline" in str(err.value) and "workload.single_gpu_throughput" in str(err.value)


def test_the_anchor_makes_one_gpu_train_at_the_measured_throughput():
    out = run(*ONE_GPU, "workload.single_gpu_throughput=1000")
    assert out["throughput"]["samples_per_s"] == pytest.approx(1000.0, rel=1e-4)  # a 1-rank exchange: microseconds
    assert out["single_gpu_throughput"]["measured_samples_per_s"] == 1000
    eight = run("workload.single_gpu_throughput=1000")
    # the baseline of the scaling efficiency is the measured throughput
    assert eight["throughput"]["samples_per_s"] / eight["scaling_efficiency"] == pytest.approx(8000.0, rel=1e-9)


def test_a_slower_anchor_exposes_less_of_the_same_exchange():
    # over one 10 Gb/s TCP NIC per node the all-reduce is exposed; a longer (anchored) step hides more of it
    net = ["cluster.nodes.0.count=2", "cluster.nodes.0.nic={bandwidth: 10 Gb/s, latency: 25 us, count: 1, transport: tcp}"]
    fast, slow = run(*net), run(*net, "workload.single_gpu_throughput=600")
    assert slow["scaling_efficiency"] > fast["scaling_efficiency"]


def test_each_node_group_feeds_its_own_batch_the_slowest_loader_sets_the_step():
    p = InputPipelineSpec(cpu_s_per_sample=4e-3, workers_per_gpu=8, host_cores=40)  # 1,000 samples/s per GPU at 8 GPUs
    # group 0 (8 GPUs) feeds 300 samples a rank, group 1 (8 GPUs) 100: group 0's loader sets 0.3 s
    b = loader_bound(p, (8, 8), (300, 100), 0.2)
    assert b.loader_s == pytest.approx(0.3) and b.bound
    # the other way round the same; a group with fewer GPUs gets more cores each (4 GPUs: 9 cores -> 8 workers)
    assert loader_bound(p, (8, 8), (100, 300), 0.2).loader_s == pytest.approx(0.3)
    b4 = loader_bound(p, (4, 8), (400, 100), 0.2)
    assert b4.loader_s == pytest.approx(400 / 2000.0) and b4.cores_per_gpu == 8.0
    with pytest.raises(ValueError):
        loader_bound(p, (8, 8), (100,), 0.2)
