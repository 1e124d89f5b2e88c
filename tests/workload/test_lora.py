"""LoRA's model transform (simdist.workload.lora), its memory, its backward, and packed documents
(simdist.finetune), each against the hand formula."""
from __future__ import annotations

import math

import pytest

from simdist.compute import efficiency, launch_overhead_s, layer_times, memory_bandwidth_Bps
from simdist.finetune import is_attention_core, pack_documents
from simdist.hardware.specs import GpuSpec
from simdist.memory import estimate_memory, model_state_bytes
from simdist.workload import parametric_gpt
from simdist.workload.lora import LoraSpec, apply_lora, expand_targets, frozen_param_count, trainable_param_count

GPU = GpuSpec("t", "test", "test", {"fp32": 20e12, "fp16": 400e12, "bf16": 400e12}, 80e9, 2e12, 400.0, 1.0)
L, H, HEADS, V, S, R = 2, 1024, 8, 1000, 256, 8


def _gpt(seq_len: int = S, flash: bool = True):
    return parametric_gpt(L, H, HEADS, V, seq_len, flash_attention=flash, dropout=0.0)


def test_adapter_params_are_rank_times_in_plus_out_per_targeted_linear():
    base = _gpt()
    lora = apply_lora(base, LoraSpec(R))
    # GELU block: qkv h -> 3h, proj h -> h, fc1 h -> 4h, fc2 4h -> h; an adapter has r (d_in + d_out) weights
    per_block = R * ((H + 3 * H) + (H + H) + (H + 4 * H) + (4 * H + H))
    assert trainable_param_count(lora) == L * per_block
    assert frozen_param_count(lora) == base.params
    assert lora.params == base.params + L * per_block
    # only the adapters keep gradient tensors: the buckets and the all-reduce carry them alone
    grads = sum(math.prod(s) for _, s in lora.gradients_backward_order())
    assert grads == L * per_block
    attention_only = apply_lora(base, LoraSpec(R, expand_targets(["attention"])))
    assert trainable_param_count(attention_only) == L * R * ((H + 3 * H) + (H + H))


def test_lora_model_state_memory_matches_the_hand_formula():
    lora = apply_lora(_gpt(), LoraSpec(R))
    p_a, p_f = trainable_param_count(lora), frozen_param_count(lora)
    est = estimate_memory(lora, GPU, 1, "bf16", "adam", grad_dtype="bf16")
    # frozen base in bf16 (2 B), no master copy, gradient or state; adapters 2 B weights, 2 B gradients,
    # fp32 master + Adam's two fp32 moments (12 B)
    assert est.weights_bytes == 2 * (p_f + p_a)
    assert est.gradients_bytes == 2 * p_a
    assert est.optimizer_states_bytes == 12 * p_a
    full = model_state_bytes(p_f + p_a, "bf16", "adam", "bf16")
    assert full == (2 * (p_f + p_a), 2 * (p_f + p_a), 12 * (p_f + p_a))


def test_frozen_linear_backward_is_its_input_gradient_only():
    base = _gpt()
    lora = apply_lora(base, LoraSpec(R))
    b, names = 4, [x.name for x in lora.layers]
    t_base = dict(zip([x.name for x in base.layers], layer_times(base, GPU, b, "bf16")))
    t_lora = dict(zip(names, layer_times(lora, GPU, b, "bf16")))
    launch = launch_overhead_s()
    layer = next(x for x in lora.layers if x.name == "blocks.1.mlp.fc1")
    assert layer.frozen and layer.grad_shapes == () and layer.saved_elems == 0
    rate = GPU.flops("bf16") * efficiency("linear", GPU, "bf16")
    flops = layer.fwd_flops * b
    # compute-bound GEMMs: trained, dgrad + wgrad = 2 x forward FLOPs in 2 kernels; frozen, dgrad = 1 x in 1
    assert t_base["blocks.1.mlp.fc1"].bwd_s == pytest.approx(2 * flops / rate + 2 * launch, rel=1e-12)
    assert t_lora["blocks.1.mlp.fc1"].bwd_s == pytest.approx(flops / rate + launch, rel=1e-12)
    assert t_lora["blocks.1.mlp.fc1"].fwd_s == t_base["blocks.1.mlp.fc1"].fwd_s
    # nothing before block 0's first adapter needs a gradient: its qkv base has no backward; the adapter's A
    # computes its weight gradient only (1 x forward), B both (its input gradient flows to A)
    assert t_lora["blocks.0.attn.qkv"].bwd_s == 0.0 and t_lora["embed.tokens"].bwd_s == 0.0
    a = next(x for x in lora.layers if x.name == "blocks.0.attn.qkv.lora_a")
    bw = memory_bandwidth_Bps(GPU)
    a_bytes = b * (a.output_elems + a.saved_elems) * 2 + a.params * 2  # read dY and x, write dW (bf16)
    a_rate = GPU.flops("bf16") * efficiency("linear", GPU, "bf16")
    assert t_lora[a.name].bwd_s == pytest.approx(max(a.fwd_flops * b / a_rate, a_bytes / bw) + launch, rel=1e-12)


def test_adapters_stay_in_bf16_under_a_transformer_engine_recipe():
    lora = apply_lora(_gpt(), LoraSpec(R))
    adapters = [x for x in lora.layers if ".lora_" in x.name and x.params]
    assert adapters and all(x.high_precision for x in adapters)


def test_lora_refuses_a_model_without_its_targets():
    from simdist.workload import get_model
    with pytest.raises(ValueError, match="name no linear layer"):
        apply_lora(get_model("resnet50"), LoraSpec(R))
    with pytest.raises(ValueError, match="unknown"):
        expand_targets(["q_proj"])


def test_packed_documents_cost_attention_per_document():
    s, doc = 1024, 256
    whole, per_doc = _gpt(s), _gpt(doc)
    packed = pack_documents(whole, s // doc, per_doc)
    for before, after, one in zip(whole.layers, packed.layers, per_doc.layers):
        if not is_attention_core(before):
            assert after == before
            continue
        assert after.fwd_flops == pytest.approx(s // doc * one.fwd_flops, rel=1e-12)
        # flash attention's per-token tensors are the same; its s^2 GEMMs (4 s^2 h forward) shrink to 4 s L h
        assert after.saved_elems == before.saved_elems and after.input_elems == before.input_elems
        s2_before = 4.0 * s * s * H
        s2_after = 4.0 * s * doc * H
        assert before.fwd_flops - after.fwd_flops == pytest.approx(s2_before - s2_after + 5.0 * HEADS * (s * s - s * doc),
                                                                   rel=1e-9)


def test_gated_mlp_adapters_span_the_fused_gate_and_up_projection():
    """Megatron fuses a SwiGLU MLP's gate and up projections into linear_fc1 (h -> 2f): one adapter on the fused
    layer, B of 2f x r; linear_fc2 is the down projection (f -> h)."""
    f = 2816
    base = parametric_gpt(1, H, HEADS, V, S, ffn_hidden=f, mlp="swiglu", norm="rmsnorm", bias=False,
                          positions="rotary", tied_head=False, flash_attention=True, dropout=0.0)
    lora = apply_lora(base, LoraSpec(R, expand_targets(["linear_fc1", "linear_fc2"])))
    shapes = {x.name: x.grad_shapes for x in lora.layers if ".lora_" in x.name and x.params}
    assert shapes == {"blocks.0.mlp.gate_up.lora_a": ((R, H),), "blocks.0.mlp.gate_up.lora_b": ((2 * f, R),),
                      "blocks.0.mlp.down.lora_a": ((R, f),), "blocks.0.mlp.down.lora_b": ((H, R),)}
    # the untied LM head is frozen like every other weight
    head = next(x for x in lora.layers if x.name == "lm_head")
    assert head.frozen and head.grad_shapes == ()
