"""The catalog's parameter counts and FLOPs against published figures and closed forms."""
from __future__ import annotations

import math

import pytest

from simdist.workload import get_model, model_keys, parametric_bert, parametric_gpt
from simdist.workload.catalog import default_seq_len

# Published parameter counts (torchvision docs, the papers, HF configs). Inception-v3 without the aux head.
PUBLISHED_PARAMS = {
    "alexnet": 61.1e6, "vgg16": 138.36e6, "resnet50": 25.6e6, "resnet101": 44.5e6, "resnet152": 60.2e6,
    "inception-v3": 23.8e6, "vit-b16": 86.6e6, "bert-base": 110e6, "bert-large": 340e6, "gpt2": 124e6,
    "gpt2-xl": 1.558e9, "gpt3-1.3b": 1.3e9, "gpt3-13b": 13e9, "gpt3-175b": 175e9,
    "llama2-7b": 6.74e9, "llama2-13b": 13.0e9, "llama2-70b": 69.0e9, "llama3-8b": 8.03e9, "llama3-70b": 70.6e9,
    "llama3.1-8b": 8.03e9, "llama3.1-70b": 70.6e9, "llama3.1-405b": 405e9, "nemotron4-340b": 340e9,
    # mixture-of-experts models, total parameters (tests/workload/test_moe.py checks them to 1 % and the active ones)
    "mixtral-8x7b": 46.7e9, "mixtral-8x22b": 141e9, "qwen3-30b-a3b": 30.5e9, "qwen3-235b-a22b": 235e9,
    "deepseek-v3": 671e9, "deepseek-v3-mtp": 682.5e9, "gpt-oss-20b": 20.91e9, "gpt-oss-120b": 116.83e9,
}
# Exact Hugging Face counts (sum of the checkpoint's tensor sizes, as the model cards quote them).
HF_EXACT = {"llama3-8b": 8_030_261_248, "llama3-70b": 70_553_706_496, "llama3.1-8b": 8_030_261_248,
            "llama3.1-70b": 70_553_706_496, "llama3.1-405b": 405_853_388_800}
# The large dense models of issue-era training tables, within 1 % of the published totals (Llama 3 paper Table 3,
# Nemotron-4 340B report, GPT-3 Table 2.1).
LARGE_DENSE = {"llama3.1-405b": 405e9, "nemotron4-340b": 340e9, "gpt3-175b": 175e9}
# Exact torchvision counts (the generators follow its code).
TORCHVISION_EXACT = {"alexnet": 61_100_840, "vgg16": 138_357_544, "resnet50": 25_557_032, "resnet101": 44_549_160,
                     "resnet152": 60_192_808, "inception-v3": 23_834_568, "vit-b16": 86_567_656}
# Published GMACs at 224^2 (299^2 for Inception-v3) from torchvision's model docs (conv + linear only).
PUBLISHED_GMACS = {"alexnet": 0.71, "vgg16": 15.47, "resnet50": 4.09, "resnet101": 7.80, "resnet152": 11.51,
                   "inception-v3": 5.71}


def test_catalog_lists_every_required_model() -> None:
    assert set(model_keys()) == set(PUBLISHED_PARAMS)


@pytest.mark.parametrize("key", sorted(PUBLISHED_PARAMS))
def test_params_within_2_percent_of_published(key: str) -> None:
    assert get_model(key).params == pytest.approx(PUBLISHED_PARAMS[key], rel=0.02)


@pytest.mark.parametrize("key", sorted(TORCHVISION_EXACT))
def test_vision_params_match_torchvision_exactly(key: str) -> None:
    assert get_model(key).params == TORCHVISION_EXACT[key]


@pytest.mark.parametrize("key", sorted(HF_EXACT))
def test_llama3_params_match_hugging_face_exactly(key: str) -> None:
    assert get_model(key).params == HF_EXACT[key]


@pytest.mark.parametrize("key", sorted(PUBLISHED_GMACS))
def test_cnn_macs_match_published(key: str) -> None:
    m = get_model(key)
    macs = sum(l.fwd_flops for l in m.layers if l.kind in ("conv", "linear")) / 2
    assert macs / 1e9 == pytest.approx(PUBLISHED_GMACS[key], rel=0.01)
    # the non-matmul layers (norms, activations, pools) add little on top
    assert m.fwd_flops / 2 == pytest.approx(macs, rel=0.02)


@pytest.mark.parametrize("key", model_keys())
def test_grad_shapes_sum_to_params(key: str) -> None:
    m = get_model(key)
    for layer in m.layers:
        assert sum(math.prod(s) for s in layer.grad_shapes) == layer.params, layer.name
    assert sum(math.prod(s) for _, s in m.gradients_backward_order()) == m.params


@pytest.mark.parametrize("key", model_keys())
def test_layers_are_well_formed(key: str) -> None:
    m = get_model(key)
    names = [l.name for l in m.layers]
    assert len(set(names)) == len(names)
    kinds = {"conv", "linear", "attention", "embedding", "norm", "pool", "activation", "other", "expert"}
    for l in m.layers:
        assert l.kind in kinds
        assert l.params >= 0 and l.fwd_flops >= 0 and l.input_elems >= 0 and l.output_elems > 0 and l.saved_elems >= 0


def test_resnet50_conv_weight_and_fc_shapes() -> None:
    m = get_model("resnet50")
    by_name = {l.name: l for l in m.layers}
    assert by_name["conv1.conv"].grad_shapes == ((64, 3, 7, 7),)
    assert by_name["conv1.bn"].grad_shapes == ((64,), (64,))
    assert by_name["fc"].grad_shapes == ((1000, 2048), (1000,))
    # conv1: 112 x 112 x 64 outputs, 3 x 7 x 7 MACs each
    assert by_name["conv1.conv"].fwd_flops == 2 * 112 * 112 * 64 * 3 * 49
    assert by_name["conv1.conv"].input_elems == 3 * 224 * 224


def test_alexnet_first_conv_shapes_by_hand() -> None:
    first = get_model("alexnet").layers[0]
    # 224 -> (224 + 4 - 11) // 4 + 1 = 55
    assert first.output_elems == 64 * 55 * 55
    assert first.params == 64 * 3 * 11 * 11 + 64
    assert first.grad_shapes == ((64, 3, 11, 11), (64,))


def _gpt_closed_form_flops(layers: int, h: int, s: int, vocab: int) -> float:
    """Narayanan et al. 2021: 24 s h^2 + 4 s^2 h per layer, plus 2 s h V for the LM head."""
    return layers * (24 * s * h * h + 4 * s * s * h) + 2 * s * h * vocab


@pytest.mark.parametrize("key,layers,h", [("gpt2", 12, 768), ("gpt3-1.3b", 24, 2048), ("gpt3-175b", 96, 12288)])
def test_gpt_forward_flops_closed_form(key: str, layers: int, h: int) -> None:
    m = get_model(key)
    s = m.tokens_per_sample
    matmul = sum(l.fwd_flops for l in m.layers if l.kind == "linear")
    attn_matmul = layers * 4 * s * s * h
    assert matmul + attn_matmul == pytest.approx(_gpt_closed_form_flops(layers, h, s, 50257), rel=1e-9)
    # total within 2% (softmax, norms, GELU, loss add a little), and ~ 2 params tokens + attention term
    assert m.fwd_flops == pytest.approx(_gpt_closed_form_flops(layers, h, s, 50257), rel=0.02)
    assert m.fwd_flops == pytest.approx(2 * m.params * s + attn_matmul, rel=0.05)


def test_default_sequence_lengths() -> None:
    expected = {"bert-base": 512, "gpt2": 1024, "gpt3-175b": 2048, "llama2-7b": 4096, "vit-b16": 197, "resnet50": None}
    for key, s in expected.items():
        assert default_seq_len(key) == s
        assert get_model(key).tokens_per_sample == s


def test_seq_len_changes_attention_quadratically_and_matmuls_linearly() -> None:
    a, b = get_model("gpt2", seq_len=512), get_model("gpt2", seq_len=1024)
    attn = lambda m: sum(l.fwd_flops for l in m.layers if l.kind == "attention")
    lin = lambda m: sum(l.fwd_flops for l in m.layers if l.kind == "linear")
    assert attn(b) / attn(a) == pytest.approx(4.0, rel=0.01)
    assert lin(b) / lin(a) == pytest.approx(2.0, rel=1e-12)
    assert a.params == b.params  # the position table keeps the model's 1024 positions


def test_cnn_ignores_seq_len_and_vit_derives_image_size() -> None:
    assert get_model("resnet50", seq_len=77).params == get_model("resnet50").params
    assert get_model("vit-b16", seq_len=577).tokens_per_sample == 577  # 384 x 384 images
    with pytest.raises(ValueError, match="1 \\+ n\\^2"):
        get_model("vit-b16", seq_len=200)


def test_unknown_key_and_bad_seq_len() -> None:
    with pytest.raises(KeyError, match="resnet51"):
        get_model("resnet51")
    with pytest.raises(ValueError):
        get_model("gpt2", seq_len=0)


def test_llama2_70b_uses_grouped_query_attention() -> None:
    m = get_model("llama2-70b")
    qkv = next(l for l in m.layers if l.name == "blocks.0.attn.qkv")
    assert qkv.grad_shapes == ((8192 + 2 * 8 * 128, 8192),)  # 64 query heads, 8 key/value heads of 128
    gate_up = next(l for l in m.layers if l.name == "blocks.0.mlp.gate_up")
    assert gate_up.grad_shapes == ((28672, 8192), (28672, 8192))
    assert not any(l.name.startswith("embed.positions") for l in m.layers)  # rotary positions have no table


def test_parametric_gpt_small_by_hand() -> None:
    # 1 layer, h=8, 2 heads, vocab 10, 4 tokens: per block 12 h^2 + 13 h, embeddings (10 + 4) h, final LN 2h
    m = parametric_gpt(1, 8, 2, 10, 4)
    assert m.params == 12 * 64 + 13 * 8 + 14 * 8 + 16
    assert m.tokens_per_sample == 4
    core = next(l for l in m.layers if l.kind == "attention")
    assert core.fwd_flops == 4 * 4 * 4 * 8 + 5 * 2 * 4 * 4  # dropout (memory-bound) counts no FLOPs
    assert parametric_gpt(1, 8, 2, 10, 4, dropout=0.0).layers[5].fwd_flops == core.fwd_flops
    assert core.saved_elems == 3 * 4 * 8 + 2 * 4 * 4  # Q, K, V and two 4 x 4 softmax maps


def test_flash_attention_saves_no_quadratic_term() -> None:
    plain = parametric_gpt(2, 64, 4, 100, 256)
    flash = parametric_gpt(2, 64, 4, 100, 256, flash_attention=True)
    core = lambda m: next(l for l in m.layers if l.kind == "attention")
    assert core(plain).saved_elems - core(flash).saved_elems == 4 * 256 * 256 - 256 * 64 - 4 * 256
    assert plain.fwd_flops == flash.fwd_flops


def test_parametric_bert_matches_bert_base() -> None:
    m = parametric_bert(12, 768, 12)
    assert m.params == get_model("bert-base").params
    no_heads = parametric_bert(12, 768, 12, pretraining_heads=False)
    assert no_heads.params == 109_482_240  # HF BertModel (with pooler)


@pytest.mark.parametrize("kwargs,match", [
    (dict(layers=0, hidden=8, heads=2, vocab=10, seq_len=4), "layers"),
    (dict(layers=1, hidden=10, heads=3, vocab=10, seq_len=4), "divisible"),
    (dict(layers=1, hidden=8, heads=2, vocab=10, seq_len=4, kv_heads=3), "kv_heads"),
    (dict(layers=1, hidden=8, heads=2, vocab=10, seq_len=4, positions="alibi"), "positions"),
    (dict(layers=1, hidden=8, heads=2, vocab=10, seq_len=4, mlp="relu"), "mlp"),
])
def test_parametric_gpt_rejects_bad_shapes(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parametric_gpt(**kwargs)


@pytest.mark.parametrize("key", sorted(LARGE_DENSE))
def test_large_dense_params_within_1_percent(key: str) -> None:
    assert get_model(key).params == pytest.approx(LARGE_DENSE[key], rel=0.01)


def _matmul_flops_per_token_closed_form(layers: int, h: int, heads: int, kv: int, ffn: int, gated: bool,
                                        vocab: int, s: int) -> float:
    """Narayanan et al. 2021 (Megatron-LM, eq. 3 before the factor 3 for backward) generalised to GQA and a
    gated MLP: forward = 2 x (the blocks' matmul weights) + 2 h V (LM head) + 4 s h per layer (Q K^T and A V)."""
    d = h // heads
    block = h * (heads + 2 * kv) * d + h * h + (3 if gated else 2) * h * ffn
    return 2.0 * layers * block + 2.0 * h * vocab + 4.0 * s * h * layers


@pytest.mark.parametrize("key, shape", [
    ("llama3.1-405b", (126, 16384, 128, 8, 53248, True, 128256)),
    ("llama3.1-8b", (32, 4096, 32, 8, 14336, True, 128256)),
    ("nemotron4-340b", (96, 18432, 96, 8, 73728, False, 256000)),
])
def test_matmul_flops_match_megatron_count(key: str, shape: tuple) -> None:
    s = 2048
    m = get_model(key, seq_len=s)
    layers, h, heads, kv, ffn, gated, vocab = shape
    d = h // heads
    linear = sum(l.fwd_flops for l in m.layers if l.kind == "linear")
    # the flash core's FLOPs are its two matmuls plus softmax (5 per score) and rotary (3 per q/k element)
    core = sum(l.fwd_flops for l in m.layers if l.kind == "attention")
    core_matmuls = core - layers * (5.0 * heads * s * s + 3.0 * s * (heads + kv) * d)
    assert (linear + core_matmuls) / s == pytest.approx(
        _matmul_flops_per_token_closed_form(layers, h, heads, kv, ffn, gated, vocab, s), rel=1e-12)
    # training is 3 x forward: 6 N per token (N: the matmul weights, embeddings excluded) plus attention
    n_matmul = sum(l.params for l in m.layers if l.kind == "linear")
    assert 3 * linear / s == pytest.approx(6.0 * n_matmul, rel=1e-12)


def test_nemotron4_block_by_hand() -> None:
    """One Nemotron-4 340B block: GQA qkv 18432 x (96 + 2 x 8) x 192, projection 18432^2, squared-ReLU MLP
    18432 x 73728 up and down, two LayerNorms (weight and bias); no linear biases."""
    m = get_model("nemotron4-340b", seq_len=4096)
    block = [l for l in m.layers if l.name.startswith("blocks.0.")]
    by = {l.name.split("blocks.0.")[1]: l for l in block}
    assert by["attn.qkv"].params == 18432 * (96 + 16) * 192
    assert by["attn.proj"].params == 18432 * 18432
    assert by["mlp.fc1"].params == by["mlp.fc2"].params == 18432 * 73728
    assert by["norm1"].params == by["norm2"].params == 2 * 18432
    assert sum(l.params for l in block) == 18432 * 112 * 192 + 18432 ** 2 + 2 * 18432 * 73728 + 4 * 18432
    act = by["mlp.squared_relu"]
    assert act.fwd_flops == 2.0 * 4096 * 73728  # max(x, 0) and the square
    assert m.params == 96 * sum(l.params for l in block) + 2 * 256000 * 18432 + 2 * 18432  # untied, final norm
