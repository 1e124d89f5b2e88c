"""workload.memory_format: NCHW activations in mixed precision pay cuDNN's layout transposes around every
convolution; NHWC (the default) runs them natively; refused where it changes nothing."""
from __future__ import annotations

from pathlib import Path

import pytest

from simdist.compute import layer_times, layout_transposes_elems
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
    assert layout_transposes_elems(conv, "nchw", "fp32", dgrad=True) == (0.0, 0.0)


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


@pytest.mark.parametrize("sets", [
    ["workload.memory_format=nchw", "workload.precision=fp32"],
    ["workload.memory_format=nchw", "workload.model=gpt2", "workload.seq_len=128", "workload.batch_per_gpu=2"],
])
def test_refused_where_the_layout_changes_nothing(sets):
    with pytest.raises(ScenarioError, match="workload.memory_format"):
        load_scenario(DDP, sets)
