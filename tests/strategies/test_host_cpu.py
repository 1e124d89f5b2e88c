"""The input pipeline's cost per sample scaled to the node's host CPU (simdist/hardware/data/host_cpus.yaml):
which CPU a node has, when the measured cost is scaled and when not, what the result reports, and refusals."""
from __future__ import annotations

from pathlib import Path

import pytest

from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.input_pipeline import scaled_cost
from simdist.io.catalog import host_cpu_catalog
from simdist.io.load import load_scenario
from simdist.scenario import InputPipelineSpec

DDP = Path(__file__).resolve().parents[2] / "validation" / "published" / "scenarios" / "ddp-resnet50-dgx.yaml"
DEFAULT = "workload.input_pipeline={workers_per_gpu: 8, host_cores: 40}"
CAT = host_cpu_catalog()


def host_cpus() -> dict:
    return {c.key: c for c in CAT.cpus}


def run(*sets: str) -> dict:
    return simulate(load_scenario(DDP, list(sets))).to_dict()


def test_the_dgx_nodes_have_the_cpus_their_datasheets_name():
    assert CAT.node_cpu("cube-mesh-v100") == "xeon-e5-2698-v4"
    assert CAT.node_cpu("nvswitch-v100") == "xeon-platinum-8168"
    assert CAT.node_cpu("nvswitch-a100") == "epyc-7742"
    assert CAT.node_cpu("pcie-gen3") is None  # a "typical" server: its CPU is not known
    cpus = host_cpus()
    assert (cpus["xeon-e5-2698-v4"].cores, cpus["xeon-e5-2698-v4"].threads) == (40, 80)
    assert all(c.source and c.per_core_score > 0 for c in cpus.values())
    assert CAT.reference in cpus


def test_a_cost_measured_on_the_reference_cpu_is_scaled_by_per_core_integer_throughput():
    cpus = host_cpus()
    p = InputPipelineSpec(cpu_s_per_sample=2e-3, workers_per_gpu=8, host_cores=40, measured_on=CAT.reference, cpus=CAT)
    s = scaled_cost(p, "cube-mesh-v100")
    ratio = cpus[CAT.reference].per_core_score / cpus["xeon-e5-2698-v4"].per_core_score
    assert s.host_cpu == "xeon-e5-2698-v4" and s.factor == pytest.approx(ratio)
    assert s.cpu_s_per_sample == pytest.approx(2e-3 * ratio)
    # host_cpu overrides the node's; a cost measured on the node's own CPU is not scaled
    p2 = InputPipelineSpec(cpu_s_per_sample=2e-3, workers_per_gpu=8, host_cores=40, measured_on="epyc-7742",
                           host_cpu="epyc-7742", cpus=CAT)
    assert scaled_cost(p2, "cube-mesh-v100").factor == 1.0
    own = InputPipelineSpec(cpu_s_per_sample=2e-3, workers_per_gpu=8, host_cores=40, cpus=CAT)
    assert scaled_cost(own, "cube-mesh-v100").cpu_s_per_sample == 2e-3


def test_a_node_whose_cpu_is_unknown_falls_back_to_the_measured_cost_and_says_so():
    p = InputPipelineSpec(cpu_s_per_sample=2e-3, workers_per_gpu=8, host_cores=40, measured_on=CAT.reference, cpus=CAT)
    s = scaled_cost(p, "pcie-gen3")
    assert s.host_cpu is None and s.factor == 1.0 and "fallback" in s.note
    assert s.cpu_s_per_sample == 2e-3


def test_the_default_cost_on_a_dgx1_binds_at_amp_and_not_at_fp32():
    amp = run(DEFAULT)["input_pipeline"]
    assert amp["host_cpu"] == "xeon-e5-2698-v4" and amp["cpu_speed_factor"] > 1.5
    assert amp["input_bound"]
    fp32 = run(DEFAULT, "workload.precision=fp32", "workload.batch_per_gpu=112")["input_pipeline"]
    assert not fp32["input_bound"]
    # the same cost taken as measured on the node's own CPU is not scaled
    own = run("workload.input_pipeline={workers_per_gpu: 8, host_cores: 40, cpu_per_sample: 2.14 ms}")
    assert own["input_pipeline"]["cpu_speed_factor"] == 1.0


@pytest.mark.parametrize("value, key", [
    ("{workers_per_gpu: 8, host_cores: 40, host_cpu: pentium-4}", "workload.input_pipeline.host_cpu"),
    ("{workers_per_gpu: 8, host_cores: 40, cpu_per_sample: 2 ms, measured_on: z80}",
     "workload.input_pipeline.measured_on"),
    ("{workers_per_gpu: 8, host_cores: 40, measured_on: epyc-7742}", "workload.input_pipeline.measured_on"),
])
def test_unknown_cpus_and_a_measured_on_that_contradicts_the_default_cost_are_refused(value, key):
    with pytest.raises(ScenarioError) as e:
        load_scenario(DDP, [f"workload.input_pipeline={value}"])
    assert key in str(e.value)


def test_a_training_process_takes_one_hardware_thread_a_fraction_of_an_smt_core():
    from simdist.input_pipeline import loader_cores, threads_per_core

    p = InputPipelineSpec(cpu_s_per_sample=4e-3, workers_per_gpu=16, host_cores=48, cpus=CAT)
    assert threads_per_core(p, "nvswitch-v100") == 2.0  # 2 x Platinum 8168: 48 cores, 96 threads
    assert threads_per_core(p, "pcie-gen3") == 1.0      # CPU unknown: a whole core per process
    assert loader_cores(p, 16, 2.0) == pytest.approx((48 - 16 / 2) / 16)
    assert loader_cores(p, 16) == pytest.approx((48 - 16) / 16)
    with pytest.raises(ValueError):
        loader_cores(p, 16, 0.5)
