"""communication.gradient_as_bucket_view, PyTorch DDP's gradient_as_bucket_view=True: each .grad is a view of its
all-reduce bucket, so the reducer's copy of each reduced bucket back into .grad after the backward is gone, and the
flat gradient copy the buckets keep beside the gradients with it. Refused wherever DDP's reducer does not run.
Two DGX-1 (4 x 100 Gb/s InfiniBand each), ResNet-50 fp32, batch 32, as tests/collectives/test_ddp_buckets.py."""
from __future__ import annotations

import copy

import pytest

from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.load import load_scenario
from simdist.io.overrides import set_path
from simdist.strategies.plan import build_plan
from tests.engine.test_every_key import BENCH, MP, TRAIN
from tests.io.test_check_equals_run import check_and_run
from tests.strategies.scenario_runner import run_with

REAL_CATALOGS = True  # conftest: the real catalogs (the scenario names real hardware)
BASE = "validation/published/scenarios/ddp-resnet50-dgx.yaml"
TWO_DGX1 = ["cluster.nodes.0.count=2", "workload.precision=fp32", "workload.batch_per_gpu=32",
            "run.fidelity=estimate", "cluster.nodes.0.gpu={base: v100-sxm2-16gb, comm_interference: 0}"]
VIEW = "communication.gradient_as_bucket_view=true"
RESNET50_GRAD_BYTES = 102_228_128  # 25,557,032 parameters x 4 B (fp32 gradients)


def _load(*extra: str):
    return load_scenario(BASE, TWO_DGX1 + list(extra))


def test_without_overlap_the_step_loses_exactly_the_last_copy():
    """No overlap: the buckets are reduced one after another after the backward, each copy into .grad runs beside
    the next bucket's all-reduce, and only the last bucket's copy stands between the last all-reduce and the
    optimizer. With the buckets as views that copy is gone: the step is shorter by exactly grad_copy_s[-1]."""
    flags = ("communication.overlap=false", "communication.bucket_size=25MB")
    copies = build_plan(_load(*flags)).classes[0].grad_copy_s
    assert len(copies) > 1 and build_plan(_load(*flags, VIEW)).classes[0].grad_copy_s == ()
    copied, viewed = simulate(_load(*flags)).iteration_time_s, simulate(_load(*flags, VIEW)).iteration_time_s
    assert copied - viewed == pytest.approx(copies[-1], rel=1e-9)


def test_small_buckets_lose_the_copies_that_ran_after_the_backward():
    """1 MB buckets: the copies (2 x 102,228,128 B / 720 GB/s + 161 tensors x 5 us = 1.089 ms) ran back to back
    after the backward; as views the step ends when the last bucket's all-reduce (tens of us) does, so it is at
    most the copies shorter and at least the copies less that all-reduce."""
    plan = build_plan(_load("communication.bucket_size=1MB"))
    cc = plan.classes[0]
    copies = sum(cc.grad_copy_s)
    assert copies == pytest.approx(2 * RESNET50_GRAD_BYTES / 720e9 + 161 * 5e-6)
    copied = simulate(_load("communication.bucket_size=1MB")).iteration_time_s
    viewed = simulate(_load("communication.bucket_size=1MB", VIEW)).iteration_time_s
    assert copied == pytest.approx(cc.fwd_s + cc.bwd_s + copies + cc.optimizer_s, rel=1e-9)
    assert copies - 0.2e-3 < copied - viewed <= copies + 1e-12


def test_the_buckets_flat_copy_of_the_gradients_is_saved():
    """'the saved memory size will be equal to the total gradients size' (DDP's docstring): the buffers part
    loses every gradient's bytes; the gradients themselves stay."""
    copied = simulate(_load()).memory.parts_bytes
    viewed = simulate(_load(VIEW)).memory.parts_bytes
    assert copied["buffers"] - viewed["buffers"] == pytest.approx(RESNET50_GRAD_BYTES)
    assert copied["gradients"] == viewed["gradients"] == pytest.approx(RESNET50_GRAD_BYTES)


TPU = {"cluster": {"nodes": [{"count": 64, "gpu": "tpu-v5p", "gpus_per_node": 1, "intra_node": "tpu-v5p",
                              "nic": {"link": "ici-v5p"}}],
                   "fabric": {"topology": "torus3d", "dims": [4, 4, 4], "link": "ici-v5p"}},
       "workload.precision": "bf16"}
# where DDP's reducer does not run, with the words of the refusal
REFUSALS = {
    "benchmark": (BENCH, {}, "benchmark"),
    "one GPU": (TRAIN, {"cluster.nodes.0.count": 1, "cluster.nodes.0.gpus_per_node": 1}, "one data-parallel rank"),
    "model parallel": (TRAIN, MP, "Megatron-Core"),
    "zero": (TRAIN, {"training.parallelism.zero": 2}, "ZeRO / FSDP"),
    "fsdp": (TRAIN, {"training.parallelism.zero": "fsdp"}, "ZeRO / FSDP"),
    "parameter server": (TRAIN, {"communication.strategy": "ps"}, "parameter servers"),
    "horovod fusion": (TRAIN, {"communication.bucketing": "fusion"}, "Horovod"),
    "local sgd": (TRAIN, {"training.sync": "local_sgd", "training.local_steps": 4}, "local_sgd"),
    "onebit": (TRAIN, {"communication.compression": {"method": "onebit"}}, "1-bit"),
    "tpu": (TRAIN, TPU, "TPU"),
}


def _data(base: dict, changes: dict) -> dict:
    data = copy.deepcopy(base)
    for dotted, value in {**changes, "communication.gradient_as_bucket_view": True}.items():
        set_path(data, dotted.split("."), copy.deepcopy(value))
    return data


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refused_where_the_reducer_does_not_run(case):
    base, changes, words = REFUSALS[case]
    run_with(base, changes)  # runs without the key
    with pytest.raises(ScenarioError) as err:
        run_with(base, {**changes, "communication.gradient_as_bucket_view": True})
    assert "communication.gradient_as_bucket_view" in str(err.value) and words in str(err.value)


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_check_refuses_as_run_does(case, tmp_path):
    base, changes, _ = REFUSALS[case]
    (check_code, check_lines), (run_code, run_lines) = check_and_run(_data(base, changes), tmp_path / "s.yaml")
    assert run_code == 2 and (check_code, check_lines) == (run_code, run_lines)


def test_accepted_with_a_comm_hook():
    """PyTorch's own hooks (fp16_compress_hook, powerSGD_hook) decompress into bucket.buffer() and return it, so
    with views the reducer's bucket_view_in.copy_(bucket_view_out) is skipped too: no copies, a shorter step."""
    hook = {"communication.compression": {"method": "powersgd", "rank": 4}}
    assert (run_with(TRAIN, {**hook, "communication.gradient_as_bucket_view": True}).iteration_time_s
            < run_with(TRAIN, hook).iteration_time_s)


def test_local_sgd_runs_without_ddps_reducer_have_no_copies_and_no_copy_term():
    """Local SGD's rounds run without DDP's reducer (plan.no_ddp_reducer, the rule the refusal reads too): its plan
    carries no copies, so the breakdown has no grad_copy term taken out of the iteration."""
    scenario = _load("training.sync=local_sgd")
    assert all(c.grad_copy_s == () for c in build_plan(scenario).classes)
    assert simulate(scenario).breakdown_s.grad_copy is None
    assert simulate(_load()).breakdown_s.grad_copy > 0  # the same cluster under bsp pays them
