"""workload.memory_format: NCHW activations on tensor cores (mixed precision, tf32 where the GPU has it) pay
cuDNN's layout transposes around every convolution; NHWC on CUDA cores (fp32) loses the 3 x 3 convolutions'
Winograd; native (the default) is each unit's own layout; refused where it changes nothing."""
from __future__ import annotations

from pathlib import Path

import pytest

from simdist.compute import WINOGRAD_SPEEDUP, layer_times, layout_transposes_elems, runs_winograd
from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.load import load_scenario

DDP = Path(__file__).resolve().parents[2] / "validation" / "published" / "scenarios" / "ddp-resnet50-dgx.yaml"


def test_a_conv_transposes_its_input_and_output_forward_and_per_backward_call():
    sc = load_scenario(DDP, [])
    conv = next(layer for layer in sc.workload.model.layers if layer.kind == "conv")
    both = conv.input_elems + conv.output_elems
    assert layout_transposes_elems(conv, "nchw", "fp16", dgrad=True) == (2 * both, 4 * both)
    assert layout_transposes_elems(conv, "nchw", "fp16", dgrad=False) == (2 * both, 2 * both)
    assert layout_transposes_elems(conv, "nhwc", "fp16", dgrad=True) == (0.0, 0.0)
    assert layout_transposes_elems(conv, "native", "fp16", dgrad=True) == (0.0, 0.0)
    assert layout_transposes_elems(conv, "nchw", "fp32", dgrad=True) == (0.0, 0.0)
    assert layout_transposes_elems(conv, "nchw", "tf32", dgrad=True) == (2 * both, 4 * both)  # tensor cores too


def test_nchw_adds_exactly_the_transposes_memory_time():
    sc = load_scenario(DDP, [])
    model, gpu = sc.workload.model, sc.cluster.node_groups[0].gpu
    nhwc = layer_times(model, gpu, 64, "fp16")
    nchw = layer_times(model, gpu, 64, "fp16", memory_format="nchw")
    for layer, a, b in zip(model.layers, nhwc, nchw):
        if layer.kind != "conv":
            assert (a.fwd_s, a.bwd_s) == (b.fwd_s, b.bwd_s)
        else:
            assert b.fwd_s > a.fwd_s and b.bwd_s > a.bwd_s
    with pytest.raises(ValueError, match="memory_format"):
        layer_times(model, gpu, 64, "fp16", memory_format="chwn")


def test_nchw_slows_a_mixed_precision_resnet_and_hides_more_of_the_same_exchange():
    plain, nchw = (simulate(load_scenario(DDP, extra)).to_dict() for extra in ([], ["workload.memory_format=nchw"]))
    assert nchw["iteration_time_s"] > 1.3 * plain["iteration_time_s"]


def test_tf32_pays_the_transposes_at_fp32_width_only_where_the_gpu_has_tf32_tensor_cores():
    sc = load_scenario(DDP, ["cluster.nodes.0.gpu=a100-sxm4-80gb", "cluster.nodes.0.intra_node=nvswitch-a100"])
    model, a100 = sc.workload.model, sc.cluster.node_groups[0].gpu
    conv = next(i for i, layer in enumerate(model.layers) if layer.kind == "conv" and i > 0)
    layer = model.layers[conv]
    nhwc = layer_times(model, a100, 64, "tf32")[conv]
    nchw = layer_times(model, a100, 64, "tf32", memory_format="nchw")[conv]
    bw = 2039e9 * 0.8  # the catalog's HBM rate x the default memory efficiency (no calibration here)
    both = layer.input_elems + layer.output_elems
    assert nchw.fwd_s - nhwc.fwd_s == pytest.approx(64 * 2 * both * 4 / bw + 2 * 5e-6, rel=1e-9)  # 4-byte tensors
    v100 = load_scenario(DDP, []).cluster.node_groups[0].gpu  # no tf32: its tf32 convolutions are fp32 ones
    assert layer_times(model, v100, 64, "tf32", memory_format="nchw") == layer_times(model, v100, 64, "tf32")


def test_native_is_nhwc_on_tensor_cores_and_nchw_on_cuda_cores():
    sc = load_scenario(DDP, [])
    model, v100 = sc.workload.model, sc.cluster.node_groups[0].gpu
    assert layer_times(model, v100, 64, "fp16") == layer_times(model, v100, 64, "fp16", memory_format="nhwc")
    assert layer_times(model, v100, 64, "fp32") == layer_times(model, v100, 64, "fp32", memory_format="nchw")


def test_channels_last_fp32_runs_its_3x3_stride_1_convolutions_without_winograd():
    """cuDNN lists implicit-GEMM algorithms only for float convolutions with NHWC filters: each 3 x 3 stride-1
    convolution's FLOPs go back from the Winograd count to the direct one; other layers are unchanged."""
    sc = load_scenario(DDP, [])
    model, v100 = sc.workload.model, sc.cluster.node_groups[0].gpu
    nchw = layer_times(model, v100, 64, "fp32", memory_format="nchw")
    nhwc = layer_times(model, v100, 64, "fp32", memory_format="nhwc")
    marked = [i for i, layer in enumerate(model.layers) if layer.winograd]
    assert marked and len(marked) < sum(layer.kind == "conv" for layer in model.layers)  # 1 x 1 and strided stay
    for i, (layer, a, b) in enumerate(zip(model.layers, nchw, nhwc)):
        if i in marked:
            assert runs_winograd(layer, "nchw", "fp32") and not runs_winograd(layer, "nhwc", "fp32")
            assert b.fwd_s > a.fwd_s and b.bwd_s > a.bwd_s
            assert b.fwd_s <= WINOGRAD_SPEEDUP * a.fwd_s  # at most the FLOPs' ratio (the bytes do not move)
        else:
            assert (a.fwd_s, a.bwd_s) == (b.fwd_s, b.bwd_s)
    assert not runs_winograd(model.layers[marked[0]], "nchw", "fp16")  # tensor cores: implicit GEMM either way
    fp32 = ["workload.precision=fp32", "workload.batch_per_gpu=64"]
    native, last = (simulate(load_scenario(DDP, [*fp32, *extra])).to_dict()
                    for extra in ([], ["workload.memory_format=nhwc"]))
    assert last["iteration_time_s"] > 1.1 * native["iteration_time_s"]


@pytest.mark.parametrize("sets", [
    ["workload.memory_format=nchw", "workload.model=gpt2", "workload.seq_len=128", "workload.batch_per_gpu=2"],
    ["workload.memory_format=nhwc", "workload.model=gpt2", "workload.seq_len=128", "workload.batch_per_gpu=2"],
    ["workload.memory_format=nhwc", "workload.precision=fp32", "workload.batch_per_gpu=2",
     "workload.model={layers: [{name: c1, kind: conv, params: 9408, fwd_flops: 236000000, input_elems: 150528, output_elems: 802816}]}"],
])
def test_refused_where_the_layout_changes_nothing(sets):
    with pytest.raises(ScenarioError, match="workload.memory_format"):
        load_scenario(DDP, sets)


@pytest.mark.parametrize("sets", [
    ["workload.memory_format=nchw", "workload.precision=fp32"],  # fp32's own layout, stated
    ["workload.memory_format=nhwc", "workload.precision=tf32", "workload.batch_per_gpu=64"],  # a V100: fp32, no Winograd
    ["workload.memory_format=nhwc", "cluster.nodes.0.gpu=k80-12gb", "cluster.nodes.0.intra_node=pcie-gen3",
     "workload.batch_per_gpu=32"],  # fp16 runs as fp32 on a K80
])
def test_accepted_where_a_layout_can_matter(sets):
    load_scenario(DDP, sets)


def test_a_precision_the_gpu_lacks_is_reported_as_what_it_ran_in():
    """tf32 on a V100 computes as fp32 (no tf32 tensor cores): the node group says so; native precisions add nothing."""
    fallback = simulate(load_scenario(DDP, ["workload.precision=tf32", "workload.batch_per_gpu=64"])).to_dict()
    fp32 = simulate(load_scenario(DDP, ["workload.precision=fp32", "workload.batch_per_gpu=64"])).to_dict()
    (row,) = fallback["node_groups"]
    assert (row["precision"], row["precision_ran"]) == ("tf32", "fp32")
    assert row["step_s"] == fp32["node_groups"][0]["step_s"]
    assert "precision_ran" not in fp32["node_groups"][0]
