"""Mixture-of-experts and multi-head latent attention models: parameter counts against the published totals and
active counts, FLOPs against Megatron-LM's num_floating_point_operations, layer names tensor parallelism knows."""
from __future__ import annotations

import math

import pytest

from simdist.results.mfu import model_flops_per_sample
from simdist.strategies.tensor_parallel import TpRole, layer_role
from simdist.workload import get_model, parametric_gpt
from simdist.workload.mla import MlaSpec
from simdist.workload.specs import MoeSpec

# (total, active) parameters as published: Mixtral paper / Mistral AI (46.7 B / 12.9 B, 141 B / 39 B), the Qwen3
# model cards (30.5 B / 3.3 B, 235 B / 22 B), DeepSeek-V3's report (671 B / 37 B).
PUBLISHED = {"mixtral-8x7b": (46.7e9, 12.9e9), "mixtral-8x22b": (141e9, 39e9), "qwen3-30b-a3b": (30.5e9, 3.3e9),
             "qwen3-235b-a22b": (235e9, 22e9), "deepseek-v3": (671e9, 37e9)}


@pytest.mark.parametrize("key", sorted(PUBLISHED))
def test_total_and_active_params_match_published(key: str) -> None:
    m = get_model(key)
    total, active = PUBLISHED[key]
    assert m.params == pytest.approx(total, rel=0.01)
    # active: every parameter a token runs through, embedding table included (2 % for the rounded 3.3 B and 37 B)
    assert m.active_params == pytest.approx(active, rel=0.02)


def test_deepseek_v3_counts_as_its_weights_readme() -> None:
    """DeepSeek-V3's README_WEIGHTS.md: main model 671 B, 36.6 B activated including the 0.9 B output head (so
    without the input embedding's lookup table); the MTP module 11.5 B unique parameters."""
    m = get_model("deepseek-v3")
    embedding = sum(l.params for l in m.layers if l.kind == "embedding")
    assert embedding == 129280 * 7168
    assert m.active_params - embedding == pytest.approx(36.6e9, rel=0.005)
    assert get_model("deepseek-v3-mtp").params - m.params == pytest.approx(11.5e9, rel=0.01)


def test_deepseek_v3_mla_layer_by_hand() -> None:
    """One MLA block's attention: W_DQ 7168x1536, q norm, W_UQ 1536 -> 128 x 192, W_DKV 7168 -> 512 + 64, kv norm,
    W_UKV 512 -> 128 x 256, W_O 128 x 128 -> 7168."""
    m = get_model("deepseek-v3", seq_len=4096)
    attn = {l.name.split(".", 2)[2]: l for l in m.layers if l.name.startswith("blocks.0.attn.")}
    assert attn["attn.q_down"].params == 7168 * 1536
    assert attn["attn.q_norm"].params == 1536 and attn["attn.kv_norm"].params == 512
    assert attn["attn.kv_down"].params == 7168 * 576
    assert attn["attn.qkv"].grad_shapes == ((128 * 192, 1536), (128 * 256, 512))
    assert attn["attn.proj"].grad_shapes == ((7168, 128 * 128),)
    assert sum(l.params for l in attn.values()) == 187_107_328
    s = 4096
    core = attn["attn.core"]  # Q K^T over 192-wide heads, P V over 128-wide values, softmax, rotary
    assert core.fwd_flops == 2 * s * s * 128 * 192 + 2 * s * s * 128 * 128 + 5 * 128 * s * s + 3 * s * 129 * 64
    assert core.output_elems == s * 128 * 128


def test_moe_block_layers_and_first_dense_blocks() -> None:
    m = get_model("deepseek-v3", seq_len=1024)
    names = {l.name for l in m.layers}
    for i in range(3):  # dense blocks keep the SwiGLU MLP of 18432
        assert f"blocks.{i}.mlp.gate_up" in names and f"blocks.{i}.experts" not in names
    experts = next(l for l in m.layers if l.name == "blocks.3.experts")
    assert experts.kind == "expert" and experts.experts == 256
    assert experts.grad_shapes == ((256, 4096, 7168), (256, 7168, 2048))
    assert experts.params == 256 * 3 * 7168 * 2048
    s, k, h, f = 1024, 8, 7168, 2048
    # active work: s x top_k token-expert pairs, each 3 GEMMs of h x f, plus SwiGLU (5 per element) and the
    # probability-weighted combine (2 per output element)
    assert experts.fwd_flops == 2 * s * k * 3 * h * f + 5 * s * k * f + 2 * s * k * h
    router = next(l for l in m.layers if l.name == "blocks.3.router")
    assert router.params == h * 256 and router.high_precision
    shared = next(l for l in m.layers if l.name == "blocks.3.shared_experts")
    assert shared.params == 3 * h * 2048 and shared.experts == 0
    assert sum(1 for l in m.layers if l.experts) == 58
    assert m.moe is not None and m.moe.router == "sigmoid" and m.moe.first_dense_layers == 3


def test_tensor_parallel_roles_still_recognise_attention_and_dense_mlp() -> None:
    roles = {l.name: layer_role(l) for l in get_model("deepseek-v3", seq_len=256).layers}
    assert roles["blocks.0.attn.qkv"] is TpRole.COLUMN  # MLA's up-projections
    assert roles["blocks.0.attn.core"] is TpRole.HEADS and roles["blocks.0.attn.proj"] is TpRole.ROW
    assert roles["blocks.0.attn.q_down"] is TpRole.REPLICATED  # Megatron-Core's MLA duplicates the down-projections
    assert roles["blocks.0.mlp.gate_up"] is TpRole.COLUMN and roles["blocks.0.mlp.down"] is TpRole.ROW
    for part in ("router", "experts", "shared_experts"):  # experts replicated until expert parallelism
        assert roles[f"blocks.3.{part}"] is TpRole.REPLICATED
    qwen = {l.name: layer_role(l) for l in get_model("qwen3-30b-a3b", seq_len=256).layers}
    assert qwen["blocks.0.attn.qkv"] is TpRole.COLUMN and qwen["blocks.0.attn.proj"] is TpRole.ROW


def test_qwen3_heads_wider_than_hidden_and_qk_norm() -> None:
    m = get_model("qwen3-235b-a22b", seq_len=128)
    by = {l.name: l for l in m.layers}
    assert by["blocks.0.attn.qkv"].grad_shapes == ((64 * 128 + 2 * 4 * 128, 4096),)
    assert by["blocks.0.attn.proj"].grad_shapes == ((4096, 64 * 128),)
    assert by["blocks.0.attn.qk_norm"].params == 2 * 128


def _gemm_flops(m) -> tuple[float, float]:
    """(all matmul FLOPs outside the attention core, the routers' share) of one forward, per sample."""
    total = router = 0.0
    for l in m.layers:
        if l.fwd_kernels and l.kind in ("linear", "expert"):
            total += math.fsum(k.flops for k in l.fwd_kernels if k.kind in ("linear", "expert"))
        elif l.kind == "linear":
            total += l.fwd_flops
            router += l.fwd_flops if l.name.endswith(".router") else 0.0
    return total, router


def _megatron_flops(s: int, layers: int, h: int, vocab: int, attn_linear: float, core_per_token_s: float,
                    dense_layers: int, ffn: int, moe_layers: int, moe_ffn: int, k: int, shared_ffn: int,
                    mtp: int, extra_norms: float = 0.0) -> float:
    """Megatron-LM's num_floating_point_operations (megatron/training/training.py) for one sample of s tokens
    (BSHD, SwiGLU): 3 (fwd + wgrad + dgrad) x 2 (FMA) x the token-linear terms, plus the causal core term."""
    n = layers + mtp
    linear = 3 * 2 * s * (h * (ffn * 3 * dense_layers + (moe_ffn * k * 3 + shared_ffn * 3) * moe_layers)
                          + attn_linear * n + extra_norms + mtp * (3 * h + 2 * h * h) + h * vocab * (mtp + 1))
    return linear + s * s * core_per_token_s * n


@pytest.mark.parametrize("key", ["deepseek-v3", "deepseek-v3-mtp"])
def test_deepseek_v3_flops_match_megatron(key: str) -> None:
    """Megatron-LM counts the same GEMMs (MLA's projections, dense MLPs, top-k and shared experts, eh_proj, the
    logits of the model and of each MTP module) but not the router, and counts the lora norms (+1 per rank) and the
    MTP norms as FLOPs; its attention core is causal (half of simdist's full s x s)."""
    s, mtp = 4096, int(key.endswith("mtp"))
    m = get_model(key, seq_len=s)
    gemm, router = _gemm_flops(m)
    h, heads, qk, rope, v, ql, kvl = 7168, 128, 128, 64, 128, 1536, 512
    attn_linear = (ql * (h + heads * (qk + rope) + 1) + kvl * (h + heads * (qk + v) + 1) + h * rope
                   + heads * v * h)
    core = 3 * 2 * (heads * (qk + rope) / 2 + heads * v / 2)
    megatron = _megatron_flops(s, 61, h, 129280, attn_linear, core, 3, 18432, 58 + mtp, 2048, 8, 2048, mtp)
    norms = 3 * 2 * s * (ql + kvl) * (61 + mtp) + 3 * 2 * s * mtp * 3 * h
    cores = sum(l.fwd_flops for l in m.layers if l.kind == "attention")
    core_matmuls = (2 * s * s * heads * (qk + rope) + 2 * s * s * heads * v) * (61 + mtp)
    assert 3 * (gemm - router) + norms + 3 * core_matmuls / 2 == pytest.approx(megatron, rel=1e-12)
    assert cores > core_matmuls  # plus softmax and rotary


@pytest.mark.parametrize("key,layers,h,heads,kv,d,vocab,moe_ffn,k", [
    ("mixtral-8x7b", 32, 4096, 32, 8, 128, 32000, 14336, 2),
    ("mixtral-8x22b", 56, 6144, 48, 8, 128, 32768, 16384, 2),
    ("qwen3-235b-a22b", 94, 4096, 64, 4, 128, 151936, 1536, 8),
])
def test_gqa_moe_flops_match_megatron(key, layers, h, heads, kv, d, vocab, moe_ffn, k) -> None:
    s = 2048
    m = get_model(key, seq_len=s)
    gemm, router = _gemm_flops(m)
    attn_linear = h * (heads * d + 2 * kv * d) + heads * d * h
    core = 3 * 2 * heads * d / 2 * 2
    megatron = _megatron_flops(s, layers, h, vocab, attn_linear, core, 0, 0, layers, moe_ffn, k, 0, 0)
    assert 3 * (gemm - router) + 3 * layers * 4 * s * s * heads * d / 2 == pytest.approx(megatron, rel=1e-12)


def test_moe_spec_validation() -> None:
    with pytest.raises(ValueError, match="top_k"):
        MoeSpec(experts=4, top_k=5, expert_ffn_hidden=8)
    with pytest.raises(ValueError, match="router"):
        MoeSpec(experts=4, top_k=2, expert_ffn_hidden=8, router="relu")
    with pytest.raises(ValueError, match="capacity_factor"):
        MoeSpec(experts=4, top_k=2, expert_ffn_hidden=8, capacity_factor=0)
    with pytest.raises(ValueError, match="expert_ffn_hidden"):
        MoeSpec(experts=4, top_k=2)
    with pytest.raises(ValueError, match="positive"):
        MlaSpec(kv_lora_rank=0, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8)
    moe = MoeSpec(experts=4, top_k=2, expert_ffn_hidden=8, first_dense_layers=3)
    with pytest.raises(ValueError, match="first_dense_layers"):
        parametric_gpt(2, 16, 2, 10, 4, mlp="swiglu", moe=moe)
    with pytest.raises(ValueError, match="SwiGLU"):
        parametric_gpt(2, 16, 2, 10, 4, moe=MoeSpec(experts=4, top_k=2, expert_ffn_hidden=8))


def test_small_moe_by_hand() -> None:
    """2 layers of h 16, 4 experts of 8, top-2, 1 shared expert, first layer dense: the counts by hand."""
    moe = MoeSpec(experts=4, top_k=2, shared_experts=1, expert_ffn_hidden=8, first_dense_layers=1)
    m = parametric_gpt(2, 16, 2, 10, 4, 32, mlp="swiglu", norm="rmsnorm", bias=False, tied_head=False,
                       positions="rotary", dropout=0.0, moe=moe)
    dense = parametric_gpt(2, 16, 2, 10, 4, 32, mlp="swiglu", norm="rmsnorm", bias=False, tied_head=False,
                           positions="rotary", dropout=0.0)
    mlp = 3 * 16 * 32
    moe_mlp = 16 * 4 + 4 * 3 * 16 * 8 + 3 * 16 * 8  # router, routed experts, shared expert
    assert m.params == dense.params - mlp + moe_mlp
    assert m.active_params == m.params - 2 * 3 * 16 * 8  # 2 of the 4 routed experts idle per token
    assert [l.name for l in m.layers if l.name.startswith("blocks.1.")][-4:] == [
        "blocks.1.router", "blocks.1.experts", "blocks.1.shared_experts", "blocks.1.mlp.residual"]
    assert m.moe == moe and dense.moe is None and dense.active_params == dense.params


def test_model_flops_count_the_active_experts() -> None:
    """MFU's model FLOPs of Mixtral 8x7B: 6 x the active non-embedding parameters per token plus the attention
    core (3 x forward), the 6 N rule on top-2 of 8 experts, not on all of them."""
    s = 4096
    m = get_model("mixtral-8x7b", seq_len=s)
    dense_params = sum(l.params for l in m.layers if l.kind not in ("embedding", "norm"))
    active = m.active_params - sum(l.params for l in m.layers if l.kind in ("embedding", "norm"))
    cores = 3 * sum(l.fwd_flops for l in m.layers if l.kind == "attention")
    assert model_flops_per_sample(m) == pytest.approx(6 * active * s + cores, rel=0.01)
    assert model_flops_per_sample(m) < 0.4 * (6 * dense_params * s + cores)


@pytest.mark.parametrize("key,total,active", [("gpt-oss-120b", 116.83e9, 5.13e9), ("gpt-oss-20b", 20.91e9, 3.61e9)])
def test_gpt_oss_counts_as_its_model_card(key: str, total: float, active: float) -> None:
    """gpt-oss model card (arXiv:2508.10925), Table 1: total parameters and active parameters per token, the
    unembedding counted and the input embedding not (the attention sinks, 64 per block, not modelled)."""
    m = get_model(key)
    embedding = sum(l.params for l in m.layers if l.kind == "embedding")
    assert m.params == pytest.approx(total, rel=0.001)
    assert m.active_params - embedding == pytest.approx(active, rel=0.002)
    experts = next(l for l in m.layers if l.experts)
    assert experts.grad_shapes[2:] == ((experts.experts, 2 * 2880), (experts.experts, 2880))  # the experts' biases


def test_sliding_window_blocks_attend_to_the_window() -> None:
    """GPT-OSS's even blocks attend to the last 128 keys: their scores and context GEMMs are s x 128, not s x s."""
    s = 4096
    m = get_model("gpt-oss-120b", seq_len=s)
    cores = [l for l in m.layers if l.kind == "attention"]
    a, d = 64, 64
    band, full = cores[0].fwd_flops, cores[1].fwd_flops
    rotary = 3 * s * (64 + 8) * 64
    assert band == 2 * (2 * s * 128 * a * d) + 5 * a * s * 128 + rotary
    assert full == 2 * (2 * s * s * a * d) + 5 * a * s * s + rotary
    short = get_model("gpt-oss-120b", seq_len=64)  # a window longer than the sequence is the whole sequence
    c = [l for l in short.layers if l.kind == "attention"]
    assert c[0].fwd_flops == c[1].fwd_flops


# Megatron-Bridge docs/performance-summary.md (25.11 container), model TFLOP/s per GPU / tokens/s per GPU: the
# FLOPs per token its "model TFLOP/s" counts (DGX-GB300 rows, sequence 4096); and per model the attention cores'
# (blocks, heads, query/key width, value width)
BRIDGE_FLOPS_PER_TOKEN = {"deepseek-v3-mtp": (1026e12 / 3943, (62, 128, 192, 128)),
                          "qwen3-30b-a3b": (666e12 / 28934, (48, 32, 128, 128)),
                          "qwen3-235b-a22b": (792e12 / 5350, (94, 64, 128, 128))}


@pytest.mark.parametrize("key", sorted(BRIDGE_FLOPS_PER_TOKEN))
def test_megatron_bridge_model_flops_are_these_models_gemms(key: str) -> None:
    """Megatron-Bridge's published model TFLOP/s of DeepSeek-V3 and Qwen3 are these models' GEMMs as Megatron-LM
    counts them (the router left out, MLA's lora norms and the MTP norms counted, the attention core causal: half
    of simdist's s x s), DeepSeek-V3's with its MTP module: to 0.5 %, from the rounded published figures."""
    s = 4096
    published, (blocks, heads, qk, v) = BRIDGE_FLOPS_PER_TOKEN[key]
    m = get_model(key, seq_len=s)
    gemm, router = _gemm_flops(m)
    mla = sum(1 for l in m.layers if l.name.endswith("attn.q_norm"))
    mtp = sum(1 for l in m.layers if l.name.endswith("eh_proj"))
    norms = 3 * 2 * s * ((1536 + 512) * mla + 3 * 7168 * mtp)
    causal_core = 3 * blocks * (2 * s * s * heads * qk + 2 * s * s * heads * v) / 2
    assert (3 * (gemm - router) + norms + causal_core) / s == pytest.approx(published, rel=0.005)
