"""LoRA on a data-parallel run: the buckets and the all-reduce carry the adapters' gradients only, the optimizer
steps the adapters only, memory per GPU as the hand formula; the layouts that cannot price it are refused."""
from __future__ import annotations

import copy

import pytest

from simdist.collectives.schedule import CollectiveOp
from simdist.compute import DEFAULT_LAUNCH_OVERHEAD_S, DEFAULT_MEMORY_EFFICIENCY
from simdist.errors import ScenarioError
from simdist.io.load import load_data
from simdist.io.overrides import set_path
from simdist.strategies.plan import build_plan
from simdist.strategies.rank_memory import check_memory
from simdist.strategies.sharded_dp import build_sharded_plan
from simdist.workload.lora import frozen_param_count, trainable_param_count

NIC = {"bandwidth": "100 Gb/s", "latency": "5 us", "transport": "rdma"}
LORA = {
    "name": "lora",
    "cluster": {"nodes": [{"count": 1, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                           "nic": dict(NIC)}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": {"gpt": {"layers": 4, "hidden": 1024, "heads": 8, "vocab": 32000}}, "seq_len": 1024,
                 "batch_per_gpu": 2, "precision": "bf16", "grad_dtype": "bf16", "flash_attention": True},
    "training": {"optimizer": "adam", "finetune": {"method": "lora", "rank": 16}},
    "communication": {"strategy": "ring", "backend": "nccl", "bucket_size": "25 MB"},
    "run": {"iterations": 4, "warmup": 1, "fidelity": "estimate"},
}
R, H, LAYERS = 16, 1024, 4
ADAPTERS = LAYERS * R * ((H + 3 * H) + (H + H) + (H + 4 * H) + (4 * H + H))  # r (d_in + d_out) per linear


def _load(changes: dict | None = None):
    data = copy.deepcopy(LORA)
    for dotted, value in (changes or {}).items():
        set_path(data, dotted.split("."), value)
    return load_data(data)


def test_all_reduced_bytes_are_the_adapter_gradients():
    scenario = _load()
    model = scenario.workload.model
    assert trainable_param_count(model) == ADAPTERS
    plan = build_plan(scenario)
    reduced = sum(size for b in plan.buckets for op, size in b.collectives if op is CollectiveOp.ALL_REDUCE)
    assert reduced == 2 * ADAPTERS  # bf16 gradients of the adapters, nothing of the frozen base
    assert len(plan.buckets) == 1  # 10.5 MB of adapter gradients fill less than one 25 MB bucket


def test_optimizer_step_covers_the_adapters_only():
    scenario = _load()
    gpu = scenario.cluster.node_groups[0].gpu
    plan = build_plan(scenario)
    # fused Adam per parameter: read fp32 master and bf16 gradient, read+write two fp32 moments, write the fp32
    # master and the bf16 copy: 4 + 2 + 16 + 4 + 2 = 28 B; 12 FLOPs; a memory-bound pass plus one launch
    hand = max(12 * ADAPTERS / gpu.flops("fp32"),
               28 * ADAPTERS / (gpu.memory_bandwidth_Bps * DEFAULT_MEMORY_EFFICIENCY)) + DEFAULT_LAUNCH_OVERHEAD_S
    assert plan.optimizer_s == pytest.approx(hand, rel=1e-12)


def test_memory_per_gpu_is_frozen_bf16_weights_plus_adapter_states():
    scenario = _load()
    model = scenario.workload.model
    frozen = frozen_param_count(model)
    parts = check_memory(scenario).parts_bytes
    assert parts["weights"] == 2 * (frozen + ADAPTERS)
    assert parts["gradients"] == 2 * ADAPTERS
    assert parts["optimizer_states"] == 12 * ADAPTERS  # fp32 master + Adam's two moments, adapters only
    assert parts["buffers"] == 2 * ADAPTERS  # DDP's bucket copy of the adapters' gradients
    full = check_memory(_load({"training.finetune": None})).parts_bytes
    assert full["optimizer_states"] == 12 * frozen  # the same run fully trained: every weight's states


def test_lora_backward_is_cheaper_than_full_training():
    lora, full = build_plan(_load()), build_plan(_load({"training.finetune": None}))
    # frozen GEMMs compute input gradients only (tests/workload/test_lora.py); the adapters' small, memory-bound
    # GEMMs and merges take back part of it on a model this small
    assert lora.bwd_s < 0.9 * full.bwd_s
    assert lora.fwd_s > full.fwd_s  # the adapters' GEMMs and merges come on top of the same forward


def test_fsdp_gathers_every_weight_and_reduces_the_adapters_only():
    scenario = _load({"training.parallelism": {"zero": "fsdp"}})
    model = scenario.workload.model
    frozen, dp = frozen_param_count(model), 8
    sp = build_sharded_plan(scenario, build_plan(scenario))
    gathered = sum(size for op, size in sp.collectives() if op is CollectiveOp.ALL_GATHER)
    reduced = sum(size for op, size in sp.collectives() if op is CollectiveOp.REDUCE_SCATTER)
    assert gathered == 2 * 2 * (frozen + ADAPTERS)  # bf16 weights, gathered for forward and again for backward
    assert reduced == 2 * ADAPTERS  # the frozen base's units reduce nothing
    parts = check_memory(scenario).parts_bytes
    assert parts["weights"] == pytest.approx(2 * (frozen + ADAPTERS) / dp, rel=1e-12)  # FULL_SHARD: 1/dp of all
    assert parts["gradients"] == pytest.approx(2 * ADAPTERS / dp, rel=1e-12)
    assert parts["optimizer_states"] == pytest.approx(12 * ADAPTERS / dp, rel=1e-12)
    gpu = scenario.cluster.node_groups[0].gpu
    shard = -(-ADAPTERS // dp)
    hand = max(12 * shard / gpu.flops("fp32"),
               28 * shard / (gpu.memory_bandwidth_Bps * DEFAULT_MEMORY_EFFICIENCY)) + DEFAULT_LAUNCH_OVERHEAD_S
    assert sp.plan.optimizer_s == pytest.approx(hand, rel=1e-12)


def test_zero1_reduces_and_gathers_the_adapters_only():
    scenario = _load({"training.parallelism": {"zero": 1}})
    sp = build_sharded_plan(scenario, build_plan(scenario))
    assert sum(size for op, size in sp.collectives() if op is CollectiveOp.REDUCE_SCATTER) == 2 * ADAPTERS
    assert sum(size for op, size in sp.collectives() if op is CollectiveOp.ALL_GATHER) == 2 * ADAPTERS
    parts = check_memory(scenario).parts_bytes
    assert parts["weights"] == 2 * (frozen_param_count(scenario.workload.model) + ADAPTERS)  # not sharded
    assert parts["optimizer_states"] == pytest.approx(12 * ADAPTERS / 8, rel=1e-12)


@pytest.mark.parametrize("changes, path", [
    ({"training.parallelism": {"ep": 2}}, "training.finetune"),
    ({"training.parallelism": {"tp": 2}, "training.finetune": {"method": "lora", "rank": 3}},
     "training.finetune.rank"),
    ({"training.finetune": {"method": "full"}}, "training.finetune.method"),
    ({"training.finetune": {"method": "lora"}}, "training.finetune.rank"),
    ({"workload.model": "resnet50", "workload.seq_len": None, "workload.flash_attention": None},
     "training.finetune.target_modules"),
    ({"workload.packed_sequences": {"document_tokens": 256}, "workload.flash_attention": False},
     "workload.packed_sequences"),
    ({"workload.packed_sequences": {"document_tokens": 300}}, "workload.packed_sequences.document_tokens"),
])
def test_refused(changes, path):
    with pytest.raises(ScenarioError) as err:
        _load(changes)
    assert path in [i.path for i in err.value.issues]


def test_packed_documents_shorten_the_step():
    plain, packed = build_plan(_load()), build_plan(_load({"workload.packed_sequences": {"document_tokens": 128}}))
    assert packed.fwd_s < plain.fwd_s and packed.bwd_s < plain.bwd_s


def test_fsdp_lora_simulates_as_estimated():
    """The simulated iteration (per-unit graph, no reduce_scatter for the frozen root unit) is the estimate's."""
    from simdist.engine.simulation import simulate
    est = simulate(_load({"training.parallelism": {"zero": "fsdp"}}))
    sim = simulate(_load({"training.parallelism": {"zero": "fsdp"}, "run.fidelity": "simulate"}))
    assert sim.iteration_time_s == pytest.approx(est.iteration_time_s, rel=1e-6)


def test_a_lora_checkpoint_holds_the_adapters_states():
    from simdist.failures.costs import state_bytes
    assert state_bytes(_load()) == 12 * ADAPTERS  # fp32 master + Adam's two moments, 4 B each, adapters only
