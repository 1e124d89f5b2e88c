"""training.recompute_modules (Megatron-Core's --recompute-granularity selective --recompute-modules) against
hand formulas: the tensors each module drops per block (Korthikanti et al. 2022's terms), the backward growing
by exactly the listed modules' forward, `[core_attn]` equal to plain `selective`, and the io refusals."""
from __future__ import annotations

import copy
import math
from collections import Counter
from dataclasses import replace

import pytest

from simdist.errors import ScenarioError
from simdist.io.load import load_data
from simdist.io.overrides import set_path
from simdist.memory import TransformerShape, block_activations, layer_activation_bytes
from simdist.scenario import Recompute
from simdist.strategies.mp_plan import build_mp_plan, transformer_shape
from simdist.strategies import rank_memory
from simdist.compute import layer_times
from simdist.strategies.tensor_parallel import tensor_parallel_plan

S, B, H, A_HEADS, T = 2048, 1, 4096, 32, 4
GPT = TransformerShape(hidden=H, heads=A_HEADS, seq_len=S)  # Korthikanti's block: 16-bit, GELU 4h, dropout
NODE = {"count": 1, "gpu": "h100-sxm5-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-h100",
        "nic": {"bandwidth": "400 Gb/s", "latency": "2 us", "count": 8, "transport": "rdma"}}
BASE = {"name": "rc-modules", "cluster": {"nodes": [NODE], "fabric": {"topology": "single_switch"}},
        "workload": {"model": {"gpt": {"layers": 8, "hidden": 1024, "heads": 16, "vocab": 32000}}, "seq_len": 1024,
                     "global_batch": 16, "precision": "bf16"},
        "communication": {"strategy": "ring", "backend": "nccl"},
        "training": {"parallelism": {"tp": 2, "pp": 2}, "optimizer": "adam", "recompute": "selective"},
        "run": {"fidelity": "estimate"}}


def _scenario(changes: dict | None = None):
    data = copy.deepcopy(BASE)
    for dotted, value in (changes or {}).items():
        set_path(data, dotted.split("."), value)
    return load_data(data)


def _sbh(x: float, sp: bool = False) -> float:
    """x in units of s b h bytes (Korthikanti's Table 2), per tp rank."""
    return x / (S * B * H) * (T if sp else 1)


@pytest.mark.parametrize("sp", [False, True])
def test_each_module_drops_its_tensors_per_korthikanti(sp):
    # GPT, 16-bit: 34 s b h / t with sequence parallelism; without it 10 s b h whole + 24 s b h / t.
    # layernorm drops the QKV and fc1 inputs (2 x 2h, whole), mlp the GELU input and fc2 input (2 x 4h + 2 x 4h, / t)
    acts = block_activations(GPT, B, T, sp)
    whole = (lambda x: x / T) if sp else (lambda x: x)
    core = 5 * A_HEADS * S / H / T
    none = whole(10) + 24 / T + core
    assert _sbh(acts.under(Recompute.NONE), sp) == pytest.approx(none * (T if sp else 1), rel=1e-12)
    expect = {("core_attn",): none - core, ("layernorm",): none - whole(4), ("mlp",): none - 16 / T,
              ("core_attn", "layernorm", "mlp"): none - core - whole(4) - 16 / T}
    for modules, sbh in expect.items():
        got = layer_activation_bytes(GPT, B, T, sp, Recompute.SELECTIVE, modules=modules)
        assert _sbh(got, sp) == pytest.approx(sbh * (T if sp else 1), rel=1e-12), modules


def test_mla_up_proj_drops_q_k_and_v():
    shape = TransformerShape(hidden=H, heads=A_HEADS, seq_len=S, q_width=6144, k_width=6144, v_width=4096,
                             out_width=4096, latent_width=2048, flash_attention=True)
    acts = block_activations(shape, B, T, True)
    dropped = acts.under(Recompute.NONE) - acts.under(Recompute.SELECTIVE, ("core_attn", "mla_up_proj"))
    assert dropped == pytest.approx(S * B * 2 * (6144 + 6144 + 4096) / T + acts.core_bytes, rel=1e-12)


def test_core_attn_alone_is_todays_selective_exactly():
    plain, listed = _scenario(), _scenario({"training.recompute_modules": ["core_attn"]})
    a, b = build_mp_plan(plain), build_mp_plan(listed)
    assert [(c.fwd, c.bwd) for st in a.stages for c in st.chunks] == [(c.fwd, c.bwd) for st in b.stages
                                                                       for c in st.chunks]
    assert a.hardware_flops == b.hardware_flops
    ma, mb = _stages(plain), _stages(listed)
    assert [e.total_bytes for e in ma] == [e.total_bytes for e in mb]


def _stages(scenario):
    return rank_memory._stage_memory(scenario, build_mp_plan(scenario))


def _assert_drops_per_block(before, after, block_stages: list[int], per_block: float) -> None:
    """Each stage's activations drop by (its blocks) x `per_block` x the micro-batches it holds in flight (a
    whole number, at least 1); a stage without such blocks drops nothing."""
    for k, (a, b) in enumerate(zip(before, after)):
        blocks, drop = block_stages.count(k), a.activations_bytes - b.activations_bytes
        if blocks == 0:
            assert drop == 0
            continue
        ratio = drop / (blocks * per_block)
        assert ratio == pytest.approx(round(ratio), rel=1e-12) and round(ratio) >= 1


def _bwd_s(plan) -> float:
    return math.fsum(seg.compute_s for st in plan.stages for c in st.chunks for seg in c.bwd)


@pytest.mark.parametrize("module, suffixes", [("layernorm", ("norm1", "norm2")),
                                              ("mlp", ("mlp.fc1", "mlp.gelu", "mlp.fc2"))])
def test_backward_grows_by_exactly_the_modules_forward(module, suffixes):
    base = _scenario({"training.recompute_modules": ["core_attn"]})
    more = _scenario({"training.recompute_modules": ["core_attn", module]})
    model, t = base.workload.model, base.training
    tpp = tensor_parallel_plan(model, base.cluster.node_groups[0].gpu, t.micro_batch, "bf16", 2, False,
                               base.compute_calibration, heads=transformer_shape(model).heads,
                               accumulation_bytes=4)
    redo = math.fsum(tpp.layers[i].time.fwd_s for i, x in enumerate(model.layers)
                     if x.name.split(".", 2)[-1] in suffixes and x.name.startswith("blocks."))
    assert redo > 0
    assert _bwd_s(build_mp_plan(more)) - _bwd_s(build_mp_plan(base)) == pytest.approx(redo, rel=1e-9)


@pytest.mark.parametrize("sp", [False, True])
def test_mlp_reruns_its_forward_tp_collectives(sp):
    """Megatron-Core checkpoints the MLP whole (tensor_parallel.checkpoint(self.mlp, ...)), so its recomputed
    forward runs the MLP's tp collectives again before its backward: per block (8) the all-reduce of fc2's output,
    or with sequence parallelism the all-gather of fc1's input and the reduce-scatter of fc2's output, each of
    s b h x 2 bytes (1,024 tokens x 1,024 x bf16), and nothing else."""
    def calls(plan):
        return Counter((seg.call.op.value, seg.call.size_bytes, seg.kind) for st in plan.stages for c in st.chunks
                       for seg in c.bwd if seg.call is not None)

    sp_key = {"training.sequence_parallel": sp}
    base = calls(build_mp_plan(_scenario({**sp_key, "training.recompute_modules": ["core_attn"]})))
    more = calls(build_mp_plan(_scenario({**sp_key, "training.recompute_modules": ["core_attn", "mlp"]})))
    size = 1024 * 1024 * 2.0
    want = ({("all_gather", size, "recompute"): 8, ("reduce_scatter", size, "recompute"): 8} if sp
            else {("all_reduce", size, "recompute"): 8})
    assert more - base == Counter(want) and not base - more


def test_the_stage_memory_drops_blocks_times_the_module_bytes():
    base = _scenario({"training.recompute_modules": ["core_attn"]})
    more = _scenario({"training.recompute_modules": ["core_attn", "layernorm", "mlp"]})
    shape, plan = transformer_shape(base.workload.model), build_mp_plan(base)
    acts = block_activations(shape, 1, 2, False)
    for st, (a, b) in enumerate(zip(_stages(base), _stages(more))):
        blocks = sum(1 for c in plan.stages[st].chunks for i in range(*c.layers)
                     if base.workload.model.layers[i].name.endswith("attn.core"))
        per_mb = blocks * (acts.norm_out_bytes + acts.mlp_bytes)
        ratio = (a.activations_bytes - b.activations_bytes) / per_mb
        assert ratio == pytest.approx(round(ratio), rel=1e-12) and round(ratio) >= 1  # x micro-batches in flight


MOE = {"workload.model": "qwen3-30b-a3b", "workload.seq_len": 1024, "workload.global_batch": 16,
       "training.parallelism": {"tp": 1, "pp": 1, "ep": 8}}


def test_moe_act_drops_the_routed_experts_activation_outputs():
    shape = TransformerShape(hidden=H, heads=A_HEADS, seq_len=S, mlp="swiglu", ffn_hidden=9 * 768, routed_ffn=8 * 768)
    acts = block_activations(shape, B, T, True, 2, 1)  # fp8 recipe: the down projection saves a 1-byte copy
    assert acts.under(Recompute.SELECTIVE, ("core_attn",)) - acts.under(Recompute.SELECTIVE, ("core_attn", "moe_act")) \
        == pytest.approx(S * B * 8 * 768 * 1 / T, rel=1e-12)


def test_moe_act_backward_grows_by_the_experts_activation_kernel():
    base = _scenario({**MOE, "training.recompute_modules": ["core_attn"]})
    more = _scenario({**MOE, "training.recompute_modules": ["core_attn", "moe_act"]})
    plan = build_mp_plan(base)
    # each experts layer as the plan runs it, timed with and without its activation kernel
    from simdist.strategies.expert_parallel import expert_parallel_plan
    model, t, gpu = base.workload.model, base.training, base.cluster.node_groups[0].gpu
    tpp = tensor_parallel_plan(model, gpu, t.micro_batch, "bf16", 1, False, base.compute_calibration,
                               heads=transformer_shape(model).heads, accumulation_bytes=4)
    tpp, _ = expert_parallel_plan(tpp, model, gpu, "bf16", ep=8, etp=1, tokens=t.micro_batch * 1024,
                                  hidden=transformer_shape(model).hidden, calibration=base.compute_calibration,
                                  accumulation_bytes=4)
    redo = 0.0
    for x in tpp.layers:
        if x.shard.experts:
            rest = [k for k in x.shard.fwd_kernels if k.kind != "activation"]
            lone = [x.shard, replace(x.shard, fwd_kernels=tuple(rest))]
            times = layer_times(replace(model, layers=tuple(lone)), gpu, t.micro_batch, "bf16",
                                base.compute_calibration)
            redo += times[0].fwd_s - times[1].fwd_s
    assert redo > 0
    assert _bwd_s(build_mp_plan(more)) - _bwd_s(plan) == pytest.approx(redo, rel=1e-9)


def test_shared_experts_drops_their_swiglu_and_down_projection_inputs():
    # A = 2 (bf16), q = 1 (an fp8 recipe's saved copy): f_s (2A + q) per token over t ranks, in MoE blocks only
    shape = TransformerShape(hidden=H, heads=A_HEADS, seq_len=S, mlp="swiglu", ffn_hidden=9 * 2048,
                             routed_ffn=8 * 2048, shared_ffn=2048)
    acts = block_activations(shape, B, T, True, 2, 1)
    kept = acts.under(Recompute.SELECTIVE, ("core_attn",), dense_mlp=False)
    assert kept - acts.under(Recompute.SELECTIVE, ("core_attn", "shared_experts"), dense_mlp=False) \
        == pytest.approx(S * B * 2048 * (2 * 2 + 1) / T, rel=1e-12)
    assert acts.under(Recompute.SELECTIVE, ("core_attn", "shared_experts")) \
        == acts.under(Recompute.SELECTIVE, ("core_attn",))  # a dense block has no shared experts to drop


SHARED = {"workload.model": "deepseek-v3", "workload.seq_len": 1024, "workload.global_batch": 64,
          "workload.precision": "bf16", "training.parallelism": {"tp": 1, "pp": 8, "ep": 8},
          "cluster.nodes.0.count": 8}


def test_shared_experts_backward_grows_by_their_forward_and_memory_drops_by_hand():
    base = _scenario({**SHARED, "training.recompute_modules": ["core_attn"]})
    more = _scenario({**SHARED, "training.recompute_modules": ["core_attn", "shared_experts"]})
    plan, model = build_mp_plan(base), base.workload.model
    redo = math.fsum(seg.compute_s for st in build_mp_plan(more).stages for c in st.chunks for seg in c.bwd) \
        - _bwd_s(plan)
    stage_of = {i: k for k, st in enumerate(plan.stages) for c in st.chunks for i in range(*c.layers)}
    shared = [i for i, x in enumerate(model.layers) if x.name.endswith(".shared_experts")]
    # the shared experts' forward as the tp plan times them (a dense SwiGLU MLP, not an experts layer: ep leaves it)
    t, gpu = base.training, base.cluster.node_groups[0].gpu
    tpp = tensor_parallel_plan(model, gpu, t.micro_batch, "bf16", 1, False, base.compute_calibration,
                               heads=transformer_shape(model).heads, accumulation_bytes=4)
    assert shared and redo == pytest.approx(math.fsum(tpp.layers[i].time.fwd_s for i in shared), rel=1e-9)
    # memory: each stage drops (its MoE blocks) x f_s (2A + q) per token x the micro-batches it holds in flight
    f_s = model.moe.shared_experts * model.moe.expert_ffn_hidden
    per_block = 1024 * f_s * (2 * 2 + 2)
    _assert_drops_per_block(_stages(base), _stages(more), [stage_of[i] for i in shared], per_block)


def test_shared_experts_rerun_their_forward_tp_collectives_once_more_inside_moe():
    """DeepSeek-V3 at tp 2 with sequence parallelism: the checkpointed shared experts' recomputed forward gathers
    their input and reduce-scatters their output again in each of the 58 MoE blocks (1,024 tokens x 7,168 x bf16);
    under `moe` as well, their own checkpoint inside the MoE layer's runs them once more (nested checkpoints)."""
    def calls(modules):
        plan = build_mp_plan(_scenario({**SHARED, "training.parallelism": {"tp": 2, "pp": 8, "ep": 8},
                                        "training.sequence_parallel": True, "cluster.nodes.0.count": 16,
                                        "training.recompute_modules": ["core_attn", *modules]}))
        return Counter((seg.call.op.value, seg.call.size_bytes, seg.kind) for st in plan.stages for c in st.chunks
                       for seg in c.bwd if seg.call is not None)

    size = 1024 * 7168 * 2
    want = Counter({("all_gather", size, "recompute"): 58, ("reduce_scatter", size, "recompute"): 58})
    assert calls(["shared_experts"]) - calls([]) == want
    assert calls(["moe", "shared_experts"]) - calls(["moe"]) == want


def test_moe_drops_the_moe_layers_inside_once():
    # a MoE block's MLP side, f = (top_k + shared) f_e wide: SwiGLU's gate and up (2A f) and the down projections'
    # inputs (q f) over t ranks; moe_act's (top_k f_e q) and shared_experts' (f_s (2A + q)) parts are inside it
    k, shared, fe = 8, 1, 2048
    shape = TransformerShape(hidden=H, heads=A_HEADS, seq_len=S, mlp="swiglu", ffn_hidden=(k + shared) * fe,
                             routed_ffn=k * fe, shared_ffn=shared * fe)
    acts = block_activations(shape, B, T, True, 2, 1)
    kept = acts.under(Recompute.SELECTIVE, ("core_attn",), dense_mlp=False)
    moe = acts.under(Recompute.SELECTIVE, ("core_attn", "moe"), dense_mlp=False)
    assert kept - moe == pytest.approx(S * B * (k + shared) * fe * (2 * 2 + 1) / T, rel=1e-12)
    for extra in (("moe_act",), ("shared_experts",), ("moe_act", "shared_experts")):
        assert acts.under(Recompute.SELECTIVE, ("core_attn", "moe", *extra), dense_mlp=False) == moe
        assert acts.under(Recompute.SELECTIVE, ("core_attn", *extra, "moe"), dense_mlp=False) == moe
    assert acts.under(Recompute.SELECTIVE, ("core_attn", "moe")) == acts.under(Recompute.SELECTIVE, ("core_attn",))


def _moe_layers(model) -> list[int]:
    return [i for i, x in enumerate(model.layers) if x.name.split(".")[-1] in ("router", "experts", "shared_experts")]


def _forward_calls_in_backward(plan) -> list:
    """The forward collectives (tp or expert) the plan's backward segments carry, over all stages and chunks."""
    from simdist.strategies.tensor_parallel import Phase
    return [seg.call for st in plan.stages for c in st.chunks for seg in c.bwd
            if seg.call is not None and seg.call.phase is Phase.FWD]


def test_moe_backward_reruns_the_moe_layers_forward_with_its_dispatch_and_combine():
    base = _scenario({**SHARED, "training.recompute_modules": ["core_attn"]})
    more = _scenario({**SHARED, "training.recompute_modules": ["core_attn", "moe"]})
    model, t, gpu = base.workload.model, base.training, base.cluster.node_groups[0].gpu
    plan, again = build_mp_plan(base), build_mp_plan(more)
    # the MoE layers as the plan times them: tp 1, then expert parallelism (ep 8: each GPU 32 of 256 experts)
    from simdist.strategies.expert_parallel import expert_parallel_plan
    tpp = tensor_parallel_plan(model, gpu, t.micro_batch, "bf16", 1, False, base.compute_calibration,
                               heads=transformer_shape(model).heads, accumulation_bytes=4)
    tpp, _ = expert_parallel_plan(tpp, model, gpu, "bf16", ep=8, etp=1, tokens=1024, hidden=7168,
                                  calibration=base.compute_calibration, accumulation_bytes=4)
    layers = _moe_layers(model)
    assert len(layers) == 3 * (61 - 3)  # DeepSeek-V3: blocks 3..60 are MoE blocks (router, experts, shared)
    redo = math.fsum(tpp.layers[i].time.fwd_s for i in layers)
    assert _bwd_s(again) - _bwd_s(plan) == pytest.approx(redo, rel=1e-9)
    # the dispatch and combine all-to-alls run again: 2 per MoE block, T k h A = 1024 x 8 x 7168 x 2 bytes each
    assert _forward_calls_in_backward(plan) == []
    calls = _forward_calls_in_backward(again)
    assert len(calls) == 2 * 58 and {c.size_bytes for c in calls} == {1024 * 8 * 7168 * 2}
    assert sorted(c.what.split(" ", 1)[1] for c in calls) == ["combine all_to_all"] * 58 + ["dispatch all_to_all"] * 58
    # each just before its own layer's backward: the recomputed forward precedes the experts' combine backward
    for st in again.stages:
        for c in st.chunks:
            names = [seg.name for seg in c.bwd]
            for j, seg in enumerate(c.bwd):
                if seg.kind == "recompute" and seg.name.endswith(".shared_experts"):
                    assert c.bwd[j + 1].name.startswith("backward " + seg.name.split(" ", 1)[1].split("..")[0])
            assert sum(1 for n in names if n.startswith("recompute")) in (0, 3 * sum(
                1 for i in range(*c.layers) if model.layers[i].experts))
    # hardware FLOPs: the MoE layers' forward once more per sample (router 2 s h E, experts and shared experts
    # 6 s h f_e per routed or shared expert a token runs, plus their elementwise work)
    per_sample = math.fsum(model.layers[i].fwd_flops for i in layers)
    gemms = 58 * 2 * 1024 * 7168 * (256 + 3 * 2048 * (8 + 1))
    assert gemms / per_sample == pytest.approx(1.0, abs=0.01)
    assert again.hardware_flops - plan.hardware_flops == pytest.approx(64 * per_sample, rel=1e-12)


def test_moe_memory_drops_each_moe_blocks_mlp_side_by_hand():
    base = _scenario({**SHARED, "training.recompute_modules": ["core_attn"]})
    more = _scenario({**SHARED, "training.recompute_modules": ["core_attn", "moe"]})
    every = _scenario({**SHARED, "training.recompute_modules": ["core_attn", "moe", "moe_act", "shared_experts"]})
    plan, model = build_mp_plan(base), base.workload.model
    stage_of = {i: k for k, st in enumerate(plan.stages) for c in st.chunks for i in range(*c.layers)}
    experts = [i for i, x in enumerate(model.layers) if x.experts]
    per_block = 1024 * (8 + 1) * 2048 * (2 * 2 + 2)  # s (top_k + shared) f_e (2A + q), bf16, tp 1
    fewer = _stages(more)
    assert [c.activations_bytes for c in _stages(every)] == [b.activations_bytes for b in fewer]  # dropped once
    _assert_drops_per_block(_stages(base), fewer, [stage_of[i] for i in experts], per_block)


def test_moe_act_drops_in_the_moe_blocks_of_a_model_whose_first_blocks_are_dense():
    # DeepSeek-V3's blocks 0-2 are dense: each MoE block still drops top_k f_e q = 8 x 2048 x 2 bytes per token
    base = _scenario({**SHARED, "training.recompute_modules": ["core_attn"]})
    more = _scenario({**SHARED, "training.recompute_modules": ["core_attn", "moe_act"]})
    plan, model = build_mp_plan(base), base.workload.model
    stage_of = {i: k for k, st in enumerate(plan.stages) for c in st.chunks for i in range(*c.layers)}
    experts = [i for i, x in enumerate(model.layers) if x.experts]
    for k, (a, b) in enumerate(zip(_stages(base), _stages(more))):
        blocks = sum(1 for i in experts if stage_of[i] == k)
        ratio = (a.activations_bytes - b.activations_bytes) / (blocks * 1024 * 8 * 2048 * 2)
        assert ratio == pytest.approx(round(ratio), rel=1e-12) and round(ratio) >= 1  # x micro-batches in flight


def test_moe_with_a_module_inside_recomputes_that_module_twice():
    # nested checkpoints (Megatron-Core's CheckpointFunction): the MoE layer's recompute runs the shared experts'
    # checkpointed forward, whose own backward runs it again
    one = _scenario({**SHARED, "training.recompute_modules": ["core_attn", "moe"]})
    two = _scenario({**SHARED, "training.recompute_modules": ["core_attn", "moe", "shared_experts"]})
    model, t, gpu = one.workload.model, one.training, one.cluster.node_groups[0].gpu
    tpp = tensor_parallel_plan(model, gpu, t.micro_batch, "bf16", 1, False, one.compute_calibration,
                               heads=transformer_shape(model).heads, accumulation_bytes=4)
    shared = [i for i, x in enumerate(model.layers) if x.name.endswith(".shared_experts")]
    assert _bwd_s(build_mp_plan(two)) - _bwd_s(build_mp_plan(one)) == pytest.approx(
        math.fsum(tpp.layers[i].time.fwd_s for i in shared), rel=1e-9)


def test_moe_under_expert_tensor_parallelism_reruns_the_etp_gather_and_scatter():
    # qwen3-30b-a3b (no shared experts) on 8 GPUs: pp 2, tp 2 with sequence parallelism, ep 2, etp 2 (dp 2, edp 1)
    ctx = {**MOE, "workload.seq_len": 512, "cluster.nodes.0.gpu": "h200-sxm-141gb",
           "training.parallelism": {"tp": 2, "pp": 2, "ep": 2, "etp": 2, "zero": 1},
           "training.sequence_parallel": True}
    plan = build_mp_plan(_scenario({**ctx, "training.recompute_modules": ["core_attn", "moe"]}))
    calls = _forward_calls_in_backward(plan)
    # per MoE block: dispatch and combine all-to-alls of T k h A (T = b s / tp = 256 tokens, k 8, h 2048, A 2) and
    # the etp all-gather and reduce-scatter of the gathered rows, etp x that
    routed = 256 * 8 * 2048 * 2
    blocks = 48
    ops = sorted((c.op.value, c.size_bytes) for c in calls)
    assert ops == sorted([("all_to_all", routed)] * 2 * blocks + [("all_gather", 2 * routed)] * blocks
                         + [("reduce_scatter", 2 * routed)] * blocks)


def test_moe_under_tp_reruns_the_shared_experts_sequence_parallel_calls():
    # DeepSeek-V3 on 128 GPUs: tp 2 with sequence parallelism, pp 8, ep 8, etp 1 (plan only: no memory check)
    ctx = {**SHARED, "training.parallelism": {"tp": 2, "pp": 8, "ep": 8, "etp": 1}, "training.sequence_parallel": True,
           "cluster.nodes.0.count": 16, "workload.global_batch": 128}
    calls = _forward_calls_in_backward(build_mp_plan(_scenario({**ctx, "training.recompute_modules": ["moe"]})))
    # per MoE block: dispatch and combine of T k h A (T = s / tp = 512), the shared experts' all-gather of their
    # input and reduce-scatter of their output, s h A each
    routed, shared = 512 * 8 * 7168 * 2, 1024 * 7168 * 2
    assert sorted((c.op.value, c.size_bytes) for c in calls) == sorted(
        [("all_to_all", routed)] * 2 * 58 + [("all_gather", shared)] * 58 + [("reduce_scatter", shared)] * 58)


@pytest.mark.parametrize("changes, words", [
    ({"training.recompute": "full", "training.recompute_modules": ["core_attn"]}, "read only with"),
    ({"training.recompute_modules": ["moe"]}, "no routed experts"),
    ({"training.recompute_modules": ["moe_act"]}, "no routed experts"),
    ({**MOE, "training.recompute_modules": ["shared_experts"]}, "no layer it recomputes"),
    ({"training.recompute_modules": ["attention"]}, "expected Megatron-Core module names"),
    ({"training.recompute_modules": ["mlp", "mlp"]}, "each module once"),
    ({"training.recompute_modules": ["mla_up_proj"]}, "no multi-head latent attention"),
    ({"training.parallelism": {"zero": 1}, "training.recompute_modules": ["core_attn"]}, "model-parallel layouts"),
    ({"workload.model": "qwen3-30b-a3b", "training.recompute_modules": ["mlp"]}, "no layer it recomputes"),
])
def test_refusals_name_the_key(changes, words):
    from simdist.engine.simulation import simulate
    with pytest.raises(ScenarioError, match=words) as e:
        simulate(_scenario(changes))
    assert "training.recompute_modules" in str(e.value)
