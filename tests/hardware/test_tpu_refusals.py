"""What io/ refuses on TPUs (io/rules_tpu.py), each at its YAML path: precisions the chip has no units for,
NCCL/gloo backends, the model parallelism and ZeRO stages whose GSPMD sharding is not modelled (pp, cp, ep, ZeRO
1/2, tp without zero 3 or off the torus or not innermost), and torus3d on a shape the schedule would not follow;
and what it accepts: bf16 and fp32 on both chips, fp8 on v5p, tp with zero 3 and zero 3 alone."""
from __future__ import annotations

import pytest

from simdist.errors import ScenarioError
from simdist.io.load import load_scenario

V4 = "scenarios/presets/tpu-v4-bert.yaml"
V5P = "scenarios/presets/tpu-v5p-gpt.yaml"


def _refused(preset: str, *overrides: str) -> dict[str, str]:
    with pytest.raises(ScenarioError) as err:
        load_scenario(preset, list(overrides))
    out: dict[str, str] = {}
    for i in err.value.issues:
        out[i.path] = f"{out[i.path]} | {i.message}" if i.path in out else i.message
    return out


@pytest.mark.parametrize("precision", ["fp16", "tf32", "fp8", "mxfp8", "nvfp4"])
def test_v4_refuses_precisions_it_has_no_units_for(precision):
    issues = _refused(V4, f"workload.precision={precision}")
    assert "tpu-v4 has no" in issues["workload.precision"]


@pytest.mark.parametrize("precision", ["fp16", "tf32"])
def test_v5p_refuses_fp16_and_tf32(precision):
    assert "tpu-v5p has no" in _refused(V5P, f"workload.precision={precision}")["workload.precision"]


@pytest.mark.parametrize("preset,precision", [(V4, "bf16"), (V4, "fp32"), (V5P, "fp8"), (V5P, "fp32")])
def test_precisions_the_chips_have_run(preset, precision):
    s = load_scenario(preset, [f"workload.precision={precision}"])
    assert s.cluster.node_groups[0].gpu.runs_as(precision) == precision  # no fallback on a TPU


@pytest.mark.parametrize("backend", ["nccl", "gloo"])
def test_nccl_and_gloo_are_refused_on_tpus(backend):
    assert "do not run on TPUs" in _refused(V4, f"communication.backend={backend}")["communication.backend"]


@pytest.mark.parametrize("axis", ["pp", "cp"])
def test_pipeline_and_context_parallelism_are_refused_on_tpus(axis):
    issues = _refused(V5P, f"training.parallelism.{axis}=2", "training.parallelism.tp=2", "training.parallelism.zero=3")
    assert "GSPMD's 1-D model parallelism (tp with zero 3) only" in issues[f"training.parallelism.{axis}"]


def test_tp_needs_zero_3_on_tpus():
    issues = _refused(V5P, "training.parallelism.tp=4")
    assert "set training.parallelism.zero 3" in issues["training.parallelism.tp"]


def test_tp_needs_the_model_axis_innermost():
    issues = _refused(V5P, "training.parallelism.tp=4", "training.parallelism.zero=3",
                      "training.placement_order=dp,tp,pp")
    assert "start the order with tp" in issues["training.placement_order"]


@pytest.mark.parametrize("zero", [1, 2])
def test_zero_1_and_2_are_refused_on_tpus(zero):
    issues = _refused(V4, f"training.parallelism.zero={zero}")
    assert "zero 3" in issues["training.parallelism.zero"]


@pytest.mark.parametrize("overrides", [["training.parallelism.zero=3"],
                                       ["training.parallelism.zero=3", "training.parallelism.tp=4"],
                                       ["training.parallelism.zero=3", "training.parallelism.tp=8",
                                        "training.placement_order=tp,pp,dp"]])
def test_gspmd_1d_model_parallelism_and_fsdp_are_accepted(overrides):
    s = load_scenario(V5P, overrides)
    assert s.training.parallelism.zero == 3


def test_torus3d_dims_must_be_the_shape_the_schedule_uses():
    issues = _refused(V5P, "cluster.fabric.dims=[4, 4, 8]")
    assert "[8, 4, 4]" in issues["cluster.fabric.dims"] and "the same torus" in issues["cluster.fabric.dims"]
    issues = _refused(V5P, "cluster.fabric.dims=[2, 8, 8]")
    assert "[8, 4, 4]" in issues["cluster.fabric.dims"] and "the same torus" not in issues["cluster.fabric.dims"]


def test_tpu_slices_smaller_than_a_cube_are_not_tori():
    issues = _refused(V4, "cluster.nodes.0.count=32", "cluster.fabric.dims=[4, 4, 2]", "communication.strategy=ring")
    assert "multiple of 4" in issues["cluster.fabric.dims"]
    load_scenario(V4, ["cluster.nodes.0.count=128", "cluster.fabric.dims=[8, 4, 4]"])  # two cubes: a torus


def test_host_input_pipelines_are_refused_on_tpus():
    issues = _refused(V4, "workload.input_pipeline={workers_per_gpu: 2, host_cores: 8, cpu_per_sample: '4 ms'}")
    assert "four share a TPU host" in issues["workload.input_pipeline"]


def test_torus3d_needs_a_rank_count_with_a_3d_shape():
    issues = _refused(V4, "cluster.nodes.0.count=7", "cluster.fabric={topology: torus3d, link: ici-v4}")
    assert "no 3-D shape" in issues["communication.strategy"]


def test_torus3d_on_gpus_is_a_logical_grid():
    """Not TPU-only: 8 DGX A100 nodes (64 GPUs) run it as a 4x4x4 grid of ranks over their switched fabric."""
    s = load_scenario("scenarios/presets/pytorch-ddp.yaml", ["communication.strategy=torus3d"])
    assert s.communication.strategy == "torus3d"
