"""LoRA under tensor and pipeline parallelism: the frozen base takes no gradients, reduction or optimizer states
per stage, its linears' backward is the input gradient only, the adapters sit beside their base linears as
Megatron-Bridge's ParallelLinearAdapter shards them (with its extra tp collectives), and tp 1 x pp 1 gives the
data-parallel plan's figures. Hand formulas on a 4-block GPT (hidden 4096, rank 16)."""
from __future__ import annotations

import copy
import math
from collections import Counter

import pytest

from simdist.collectives.schedule import CollectiveOp
from simdist.compute_rates import layer_kernel_overhead_s, memory_bandwidth_Bps
from simdist.engine.simulation import simulate
from simdist.io.load import load_data
from simdist.io.overrides import set_path
from simdist.graph.tasks import Collective
from simdist.strategies.mp_plan import build_mp_plan
from simdist.strategies.pipeline_graph import stage_graph
from simdist.strategies.plan import build_plan
from simdist.strategies.rank_memory import _stage_memory, check_memory
from simdist.strategies.tensor_parallel import Phase, TpRole, layer_role, tensor_parallel_plan
from simdist.workload.lora import trainable_param_count

AG, AR, RS = CollectiveOp.ALL_GATHER, CollectiveOp.ALL_REDUCE, CollectiveOp.REDUCE_SCATTER
R, H, LAYERS, S, TP, PP = 16, 4096, 4, 1024, 2, 2
ADAPTERS = LAYERS * R * 16 * H  # r (d_in + d_out) over qkv (h -> 3h), proj (h -> h), fc1 (h -> 4h), fc2 (4h -> h)
BASE = {
    "name": "mp-lora",
    "cluster": {"nodes": [{"count": 1, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                           "nic": {"bandwidth": "100 Gb/s", "latency": "5 us", "transport": "rdma"}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": {"gpt": {"layers": LAYERS, "hidden": H, "heads": 32, "vocab": 32000}}, "seq_len": S,
                 "global_batch": 16, "precision": "bf16", "grad_dtype": "bf16", "flash_attention": True},
    "training": {"optimizer": "adam", "finetune": {"method": "lora", "rank": R},
                 "parallelism": {"tp": TP, "pp": PP, "dp": 2}, "micro_batch": 1, "schedule": "1f1b",
                 "sequence_parallel": True},
    "communication": {"strategy": "ring", "backend": "nccl", "bucket_size": "25 MB"},
    "run": {"iterations": 3, "warmup": 1, "fidelity": "estimate"},
}


def _load(changes: dict | None = None, full: bool = False):
    data = copy.deepcopy(BASE)
    if full:
        del data["training"]["finetune"]
    for dotted, value in (changes or {}).items():
        set_path(data, dotted.split("."), value)
    return load_data(data)


def test_stage_gradients_and_optimizer_states_are_the_adapters_share():
    scenario = _load()
    plan = build_mp_plan(scenario)
    per_stage = ADAPTERS / (TP * PP)  # every adapter matrix split over tp (A or B), two blocks per stage
    for st in plan.stages:
        assert math.fsum(c.grad_bytes for c in st.chunks) == 2 * per_stage  # bf16 gradients, none of the base
        assert math.fsum(st.grad_buckets) == 2 * per_stage
    for est, st in zip(_stage_memory(scenario, plan), plan.stages):
        assert est.gradients_bytes == 2 * per_stage
        assert est.optimizer_states_bytes == pytest.approx(12 * per_stage, rel=1e-12)  # fp32 master + Adam's 2 moments
        # weights: the frozen base's tp share in bf16 (a split layer's 1/tp, a norm whole) and the adapters
        layers = scenario.workload.model.layers
        frozen = math.fsum(_tp_share(layers[i]) for c in st.chunks for i in range(*c.layers) if layers[i].frozen)
        if st.rank_class.index == PP - 1:  # the tied head reads its own copy of the embedding
            frozen += 32000 * H / TP
        assert est.weights_bytes == pytest.approx(2 * (frozen + per_stage), rel=1e-12)


def _tp_share(layer) -> float:
    """A frozen layer's parameters on one tp rank: 1/tp of a split layer's, a norm's whole."""
    role = layer_role(layer)
    split = role in (TpRole.COLUMN, TpRole.ROW, TpRole.VOCAB_EMBEDDING, TpRole.VOCAB_HEAD)
    return math.ceil(layer.params / TP) if split else float(layer.params)


def test_zero1_steps_the_adapters_shard():
    scenario = _load({"training.parallelism.zero": 1})
    est = _stage_memory(scenario, build_mp_plan(scenario))[0]
    assert est.optimizer_states_bytes == pytest.approx(12 * ADAPTERS / (TP * PP) / 2, rel=1e-12)  # over dp 2


def test_zero3_gathers_the_whole_base_and_reduces_the_adapters_gradients_only():
    """ZeRO-3 under tp 2 x pp 2: each unit all_gathers its parameters (a block its frozen base and its adapters),
    but its gradient reduce_scatter carries the adapters' only (a stage's two blocks: its adapter share per
    micro-batch); units of frozen weights only (the embedding, the head) reduce nothing. The optimizer states are
    the adapters' shard over dp; simulate exceeds estimate by the contention full fine-tuning has (1 %)."""
    def summed(graph, op, words):
        return math.fsum(t.size_bytes for t in graph.tasks if isinstance(t, Collective) and t.op is op
                         and words in t.name)

    def collectives(scenario):
        plan = build_mp_plan(scenario)
        graphs = [stage_graph(plan, st, scenario.communication.bucket_size_bytes) for st in plan.stages]
        return plan, [{AG: summed(g, AG, "parameters all_gather"), RS: summed(g, RS, "gradients reduce_scatter")}
                      for g in graphs]

    lora, full = _load({"training.parallelism.zero": 3}), _load({"training.parallelism.zero": 3}, full=True)
    plan, got = collectives(lora)
    base_plan, base = collectives(full)
    micro = 16 // 2  # micro-batches per replica (global batch 16, dp 2, micro-batch 1)
    for st, full_st, a, b in zip(plan.stages, base_plan.stages, got, base):
        assert a[RS] == pytest.approx(micro * 2 * ADAPTERS / (TP * PP), rel=1e-12) and a[RS] < b[RS]
        assert a[AG] > 0
        for u, v in zip(st.units, full_st.units):
            block = u.name.startswith("blocks.")  # a block: its base and its adapters (their tp share); a frozen
            # row-parallel bias counts split over tp (tensor_parallel._shard_params): h (1 - 1/tp) less, twice
            assert u.params == v.params + (ADAPTERS / LAYERS / TP - 2 * H * (1 - 1 / TP) if block else 0)
            assert u.trainable == (ADAPTERS / LAYERS / TP if block else 0) and v.trainable == v.params
    est = _stage_memory(lora, plan)[0]
    assert est.optimizer_states_bytes == pytest.approx(12 * ADAPTERS / (TP * PP) / 2, rel=1e-12)
    def gap(full_ft: bool) -> float:  # simulate over estimate: ZeRO-3's gathers meet the tp calls on NVSwitch
        est, sim = (simulate(_load({"training.parallelism.zero": 3, "run.fidelity": f}, full=full_ft))
                    for f in ("estimate", "simulate"))
        return sim.iteration_time_s / est.iteration_time_s - 1

    lora_gap, full_gap = gap(False), gap(True)  # deterministic runs, each once
    assert 0 < lora_gap < 0.02 and lora_gap == pytest.approx(full_gap, abs=0.002)  # as full fine-tuning's


def test_context_parallelism_halves_every_tp_call_and_keeps_the_adapters_states():
    """cp 2 (dp 1) against cp 1 (dp 2) on tp 2 x pp 2: each rank runs half the tokens, so every tp call, the
    base's and the adapters' rank-r ones, carries half the bytes; the stage's gradients stay its adapters' share
    (cp shards no weight); the activations shrink; simulate equals estimate."""
    def calls(plan):
        return Counter((seg.call.op, seg.call.size_bytes) for st in plan.stages for c in st.chunks
                       for seg in c.fwd + c.bwd if seg.call is not None)

    one = _load({"training.parallelism": {"tp": TP, "pp": PP, "dp": 2, "cp": 1}})
    two = _load({"training.parallelism": {"tp": TP, "pp": PP, "dp": 1, "cp": 2}})
    a, b = build_mp_plan(one), build_mp_plan(two)
    halved = calls(b)
    assert halved == Counter({(op, size / 2): n for (op, size), n in calls(a).items()})
    assert (AR, R * (S / 2) * 2.0) in halved  # an adapter's rank-r partial sums: r x s / cp tokens x bf16
    for x, y in zip(a.stages, b.stages):
        assert math.fsum(c.grad_bytes for c in y.chunks) == math.fsum(c.grad_bytes for c in x.chunks) \
            == 2 * ADAPTERS / (TP * PP)
    for x, y in zip(_stage_memory(one, a), _stage_memory(two, b)):
        assert y.activations_bytes < x.activations_bytes
    sim = simulate(_load({"training.parallelism": {"tp": TP, "pp": PP, "dp": 1, "cp": 2}, "run.fidelity": "simulate"}))
    assert sim.iteration_time_s == pytest.approx(simulate(two).iteration_time_s, rel=1e-4)


def test_frozen_linear_backward_is_its_input_gradient_only():
    s = _load()
    tpp = tensor_parallel_plan(s.workload.model, s.cluster.node_groups[0].gpu, 1, "bf16", TP, True)
    names = [x.shard.name for x in tpp.layers]
    for name in ("blocks.1.attn.qkv", "blocks.1.attn.proj", "blocks.1.mlp.fc1", "blocks.1.mlp.fc2"):
        x = tpp.layers[names.index(name)]
        assert x.shard.frozen
        # bf16: the input gradient reads the output gradient and the weights and writes the input gradient, the
        # forward's bytes, at the forward's FLOPs and one kernel: no weight-gradient GEMM, write or accumulation
        assert x.time.bwd_s == pytest.approx(x.time.fwd_s, rel=1e-12)
        ops = [(c.op, c.phase) for c in x.collectives]
        # a frozen layer re-gathers no input for a weight gradient
        assert ops in ([(AG, Phase.FWD), (RS, Phase.BWD)], [(RS, Phase.FWD), (AG, Phase.BWD)])


def test_adapter_collectives_by_hand():
    s = _load()
    b = 2
    for sp in (True, False):
        tpp = tensor_parallel_plan(s.workload.model, s.cluster.node_groups[0].gpu, b, "bf16", TP, sp)
        got = {x.shard.name: sorted((c.op.value, c.phase.value, c.size_bytes) for c in x.collectives)
               for x in tpp.layers}
        rank, full = b * S * R * 2.0, b * S * H * 2.0  # bf16 activations of a micro-batch
        # beside linear_qkv: A's r outputs gathered; its input gradient all_reduced without sequence parallelism
        # (with it, Transformer Engine returns the layernorm output gathered: no collective of its own)
        assert got["blocks.1.attn.qkv.lora_a"] == sorted([("all_gather", "fwd", rank)]
                                                         + ([] if sp else [("all_reduce", "bwd", full)]))
        assert got["blocks.1.attn.qkv.lora_b"] == [("all_reduce", "bwd", rank)]
        # beside linear_proj: A's partial sums all_reduced, B's output gathered to h (and its gradient from the
        # sequence shards), B's input gradient all_reduced
        assert got["blocks.1.attn.proj.lora_a"] == [("all_reduce", "fwd", rank)]
        assert got["blocks.1.attn.proj.lora_b"] == sorted([("all_gather", "fwd", full), ("all_reduce", "bwd", rank)]
                                                          + ([("all_gather", "bwd", full)] if sp else []))
        # block 0's first adapter is the first trainable layer: no input gradient, none of its collectives
        assert got["blocks.0.attn.qkv.lora_a"] == [("all_gather", "fwd", rank)]
        assert all(p == "fwd" for ops in (got["blocks.0.attn.qkv"], got["embed.tokens"]) for _, p, _ in ops)


def test_adapter_shards():
    s = _load()
    tpp = tensor_parallel_plan(s.workload.model, s.cluster.node_groups[0].gpu, 1, "bf16", TP, True)
    shard = {x.shard.name: x for x in tpp.layers}
    assert shard["blocks.1.attn.qkv.lora_a"].shard.params == R // TP * H
    assert shard["blocks.1.attn.qkv.lora_b"].shard.params == 3 * H // TP * R
    assert shard["blocks.1.mlp.fc2.lora_a"].shard.params == R * 4 * H // TP
    assert shard["blocks.1.mlp.fc2.lora_b"].shard.params == H // TP * R
    # A beside a column base keeps the gathered input whole on every rank, even with sequence parallelism
    assert shard["blocks.1.attn.qkv.lora_a"].shard.saved_elems == S * H
    assert shard["blocks.1.mlp.fc2.lora_a"].shard.saved_elems == S * 4 * H / TP


def test_tp1_pp1_plan_agrees_with_the_data_parallel_plan():
    scenario = _load({"training.parallelism": {"tp": 1, "pp": 1, "dp": 8}, "training.sequence_parallel": False,
                      "workload.global_batch": 8})  # one sample per GPU: the dp plan's pass is one micro-batch
    mp, dp = build_mp_plan(scenario), build_plan(scenario)
    (st,) = mp.stages
    assert math.fsum(c.grad_bytes for c in st.chunks) == 2 * ADAPTERS == 2 * trainable_param_count(
        scenario.workload.model)
    assert st.optimizer_s == pytest.approx(dp.optimizer_s, rel=1e-12)
    (c,) = st.chunks
    assert c.fwd_s == pytest.approx(dp.fwd_s, rel=1e-12)
    # Megatron's DDP adds each micro-batch's weight gradients into its main_grad buffer with a kernel per
    # gradient tensor (compute.layer_times, accumulation_bytes): the adapters' only, 2 + 2 x 2 B per parameter
    gpu = scenario.cluster.node_groups[0].gpu
    adapters = [x for x in scenario.workload.model.layers if x.name.endswith(("lora_a", "lora_b"))]
    accumulate = math.fsum(x.params * 6 / memory_bandwidth_Bps(gpu) + layer_kernel_overhead_s() for x in adapters)
    assert c.bwd_s == pytest.approx(dp.bwd_s + accumulate, rel=1e-12)
    (mem,) = _stage_memory(scenario, mp)
    ddp = check_memory(scenario)
    assert mem.weights_bytes == ddp.parts_bytes["weights"]
    assert mem.gradients_bytes == ddp.parts_bytes["gradients"]
    assert mem.optimizer_states_bytes == ddp.parts_bytes["optimizer_states"]


def test_lora_is_faster_and_smaller_than_full_fine_tuning_on_tp2_pp2():
    """(At hidden 1024 the adapters' extra tp collectives, two h-wide all_gathers and eight rank-r calls per block,
    outweigh the dropped weight-gradient GEMMs: LoRA's step is then the longer one, as the model prices it.)"""
    lora, full = _load(), _load(full=True)
    a, b = simulate(lora), simulate(full)
    assert a.iteration_time_s < b.iteration_time_s
    assert a.memory.per_gpu_bytes < b.memory.per_gpu_bytes


def test_simulated_iteration_is_the_estimate():
    """Within 1e-4: the events and the estimate's fold differ by 7.6e-5 on full fine-tuning of this layout too."""
    est = simulate(_load())
    sim = simulate(_load({"run.fidelity": "simulate"}))
    assert sim.iteration_time_s == pytest.approx(est.iteration_time_s, rel=1e-4)


def test_stage_activations_by_hand():
    """Per block and token (bf16, sequence parallelism, tp 2): the frozen linears save none of their inputs
    (Korthikanti's h/t for linear_qkv and linear_fc1, h/t for linear_proj, 4h/t for linear_fc2: 3.5h elements),
    the adapters save theirs (A beside linear_qkv and linear_fc1 the gathered h each, beside linear_proj h/t and
    linear_fc2 4h/t, and the four B's r each: 4.5h + 4r): 2 (h + 4r) bytes more per token than full training.
    Stage 0 holds two blocks of two micro-batches (1F1B over pp 2)."""
    lora, full = _load(), _load(full=True)
    a = _stage_memory(lora, build_mp_plan(lora))[0]
    b = _stage_memory(full, build_mp_plan(full))[0]
    assert a.activations_bytes - b.activations_bytes == pytest.approx(2 * 2 * S * 2 * (H + 4 * R), rel=1e-12)


def test_with_tp_comm_overlap_the_adapter_gathers_its_own_input():
    """Under tp_comm_overlap Transformer Engine's userbuffers gather the layernorm output for the base GEMM, so
    NeMo / Megatron-Bridge leave return_layernorm_output_gathered off and A all_gathers its input itself
    (gather_from_sequence_parallel_region: a reduce_scatter of its gradient in backward)."""
    s = _load()
    b = 1
    tpp = tensor_parallel_plan(s.workload.model, s.cluster.node_groups[0].gpu, b, "bf16", TP, True,
                               tp_comm_overlap=True)
    got = {x.shard.name: sorted((c.op.value, c.phase.value, c.when.value, c.size_bytes) for c in x.collectives)
           for x in tpp.layers}
    rank, full = b * S * R * 2.0, b * S * H * 2.0
    assert got["blocks.1.mlp.fc1.lora_a"] == sorted([("all_gather", "fwd", "before", full),
                                                     ("all_gather", "fwd", "after", rank),
                                                     ("reduce_scatter", "bwd", "after", full)])


def test_a_frozen_linear_tp_cannot_split_is_refused():
    """As full training's rules refuse it (rules_parallel reads the trainable layers' gradient shapes, which a
    frozen layer lacks): an MLP of 10,001 over tp 2, adapted or only frozen."""
    from simdist.errors import ScenarioError
    gpt = {"gpt": {"layers": LAYERS, "hidden": H, "heads": 32, "vocab": 32000, "ffn_hidden": 10001}}
    for targets in (["linear_qkv"], ["all-linear"]):
        with pytest.raises(ScenarioError) as err:
            _load({"workload.model": gpt, "training.finetune": {"method": "lora", "rank": R,
                                                                 "target_modules": targets}})
        assert "training.parallelism.tp" in [i.path for i in err.value.issues]
        assert "10001" in str(err.value)
