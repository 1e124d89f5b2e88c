"""The memory model: ZeRO accounting, activations, fit checks with named figures."""
from __future__ import annotations

import pytest

from simdist.errors import InfeasibleError
from simdist.memory import FRAMEWORK_RESERVE_BYTES, check_fits, estimate_memory
from simdist.workload import get_model, model_from_layers
from .gpus import A100_80GB, V100_16GB


def test_gpt3_175b_does_not_fit_one_v100() -> None:
    est = estimate_memory(get_model("gpt3-175b"), V100_16GB, 1, "fp16", "adam", grad_dtype="fp16")
    assert not est.fits
    with pytest.raises(InfeasibleError) as info:
        check_fits(est)
    msg = str(info.value)
    assert "needs 2.68 TiB per GPU" in msg
    assert "weights 325 GiB" in msg and "optimizer states 1.91 TiB" in msg
    assert "the v100-sxm2-16gb has 14.9 GiB" in msg
    assert info.value.exit_code == 3


def test_resnet50_batch64_fp16_fits_a100_80gb() -> None:
    est = check_fits(estimate_memory(get_model("resnet50"), A100_80GB, 64, "fp16", "momentum"))
    assert est.fits and est.total_bytes < 80e9


@pytest.mark.parametrize("precision,grad,optimizer,per_param", [
    ("fp16", "fp16", "adam", 16),  # ZeRO: 2 + 2 + (4 master + 4 + 4)
    ("bf16", "fp32", "adam", 18),  # fp32 gradients (DDP-style reduction) add 2
    ("fp32", "fp32", "adam", 16),  # 4 + 4 + 8
    ("fp32", "fp32", "sgd", 8),
    ("fp32", "fp32", "momentum", 12),
    ("fp16", "fp16", "sgd", 8),  # 2 + 2 + 4 master
])
def test_model_state_bytes_per_param(precision: str, grad: str, optimizer: str, per_param: int) -> None:
    m = get_model("gpt2")
    est = estimate_memory(m, A100_80GB, 1, precision, optimizer, grad_dtype=grad)
    state = est.weights_bytes + est.gradients_bytes + est.optimizer_states_bytes
    assert state == pytest.approx(per_param * m.params)


def test_zero_stages_shard_what_the_paper_says() -> None:
    m = get_model("gpt3-1.3b")
    n, dp = m.params, 8
    stages = [estimate_memory(m, A100_80GB, 1, "fp16", "adam", "fp16", zero=z, dp=dp) for z in range(4)]
    per_param = [(s.weights_bytes + s.gradients_bytes + s.optimizer_states_bytes) / n for s in stages]
    # ZeRO paper figure 1: 2+2+K, 2+2+K/Nd, 2+(2+K)/Nd, (2+2+K)/Nd with K = 12
    assert per_param == pytest.approx([16, 4 + 12 / dp, 2 + 14 / dp, 16 / dp])
    assert all(s.activations_bytes == stages[0].activations_bytes for s in stages)


def test_activations_and_workspace_by_hand() -> None:
    m = model_from_layers([
        {"name": "fc", "kind": "linear", "params": 10, "fwd_flops": 20, "input_elems": 1000, "output_elems": 3000,
         "saved_elems": 1000},
        {"name": "act", "kind": "activation", "params": 0, "fwd_flops": 0, "input_elems": 3000, "output_elems": 3000,
         "saved_elems": 3000},
    ], "m")
    est = estimate_memory(m, A100_80GB, 8, "bf16", "sgd", extra_buffer_bytes=25e6)
    assert est.activations_bytes == 4000 * 8 * 2
    assert est.workspace_bytes == FRAMEWORK_RESERVE_BYTES + 6000 * 8 * 2
    assert est.buffers_bytes == 25e6
    assert est.total_bytes == pytest.approx(sum(est.parts_bytes.values()))
    assert list(est.parts_bytes) == ["weights", "gradients", "optimizer_states", "activations", "buffers", "workspace"]
    assert est.capacity_bytes == 80e9 and est.gpu == "a100-sxm4-80gb"


def test_memory_grows_with_batch_and_precision() -> None:
    m = get_model("bert-base")
    b8 = estimate_memory(m, V100_16GB, 8, "fp16", "adam")
    b16 = estimate_memory(m, V100_16GB, 16, "fp16", "adam")
    fp32 = estimate_memory(m, V100_16GB, 8, "fp32", "adam")
    assert b16.activations_bytes == pytest.approx(2 * b8.activations_bytes)
    assert fp32.activations_bytes == pytest.approx(2 * b8.activations_bytes)
    assert b16.total_bytes > b8.total_bytes


@pytest.mark.parametrize("kwargs,match", [
    (dict(batch_per_gpu=0), "batch_per_gpu"), (dict(zero=4), "zero"), (dict(dp=0), "dp"),
    (dict(optimizer="adagrad"), "optimizer"), (dict(precision="int8"), "precision"),
    (dict(extra_buffer_bytes=-1.0), "extra_buffer_bytes"),
])
def test_bad_arguments(kwargs: dict, match: str) -> None:
    args = dict(model=get_model("alexnet"), gpu=A100_80GB, batch_per_gpu=1, precision="fp32", optimizer="sgd")
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        estimate_memory(**args)
