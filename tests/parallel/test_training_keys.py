"""The model-parallel training keys: resolved when they mean something, refused (naming the key) when not,
and ZeRO refused only combined with tp or pp (tp and pp run on the model-parallel path, zero alone in
strategies/sharded_dp: tests/strategies/test_sharded_*)."""
from __future__ import annotations

import copy

import pytest

from simdist.errors import ScenarioError
from simdist.io.load import load_data
from simdist.scenario import Recompute

BASE = {
    "cluster": {"nodes": [{"count": 2, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                           "nic": {"bandwidth": "200 Gb/s", "latency": "3 us"}}],
                "fabric": {"topology": "single_switch", "link": {"bandwidth": "200 Gb/s", "latency": "1 us"}}},
    "workload": {"model": "gpt2", "batch_per_gpu": 4, "precision": "fp16", "seq_len": 1024},
}


def _with(**training):
    d = copy.deepcopy(BASE)
    d["training"] = training
    return d


def test_new_keys_resolve() -> None:
    s = load_data(_with(parallelism={"tp": 4, "pp": 2, "zero": "fsdp"}, placement_order="tp, pp, dp",
                        sequence_parallel=True, recompute="selective", schedule="interleaved", virtual_stages=2))
    t = s.training
    assert t.parallelism.zero == 3 and t.parallelism.dp == 2
    assert t.placement_order == "tp,pp,dp" and t.sequence_parallel and t.recompute is Recompute.SELECTIVE
    assert t.virtual_stages == 2


def test_defaults() -> None:
    t = load_data(_with()).training
    assert (t.placement_order, t.sequence_parallel, t.recompute, t.virtual_stages) == (None, False, Recompute.NONE, 1)


@pytest.mark.parametrize("training,key,words", [
    ({"parallelism": {"zero": "zero3"}}, "training.parallelism.zero", "expected 0, 1, 2, 3 or 'fsdp'"),
    ({"parallelism": {"tp": 4}, "placement_order": "tp,dp"}, "training.placement_order", "the three axes"),
    ({"placement_order": "tp,pp,dp"}, "training.placement_order", "only matters when two of dp, tp, pp"),
    ({"sequence_parallel": True}, "training.sequence_parallel", "needs training.parallelism.tp > 1"),
    ({"recompute": "full"}, "training.recompute", "model-parallel layouts only"),
    ({"virtual_stages": 2}, "training.virtual_stages", "schedule interleaved"),
    ({"parallelism": {"pp": 2}, "schedule": "interleaved"}, "training.virtual_stages", ">= 2 chunks"),
    ({"parallelism": {"dp": 2, "tp": 4, "pp": 4}}, "training.parallelism", "expected the cluster's 16 GPUs"),
])
def test_meaningless_or_bad_values_refused(training, key, words) -> None:
    with pytest.raises(ScenarioError) as info:
        load_data(_with(**training))
    assert any(i.path == key and words in i.message for i in info.value.issues), str(info.value)


def test_engine_runs_zero_with_tp_and_each_alone() -> None:
    from simdist.strategies.plan import data_parallel_degree

    assert data_parallel_degree(load_data(_with(parallelism={"zero": "fsdp", "tp": 2}))) == 8  # 16 GPUs / tp 2
    for parallelism in ({"tp": 2}, {"pp": 2}):
        s = load_data(_with(parallelism=parallelism))
        assert data_parallel_degree(s) == s.cluster.num_gpus // 2
