"""The model catalog: named architectures built layer by layer by the family generators.

`get_model('gpt3-175b', seq_len=2048)` returns a ModelSpec; CNNs ignore seq_len, ViT derives its image
size from it. Hyper-parameters and their sources are listed in docs/model.md ("model catalog").
"""
from __future__ import annotations

import functools
from typing import Callable

from simdist.workload import cnn
from simdist.workload.mla import MlaSpec
from simdist.workload.specs import ModelSpec, MoeSpec
from simdist.workload.transformer import parametric_bert, parametric_gpt, vit, vit_seq_to_image

_GPT2_VOCAB = 50257  # GPT-2 BPE, also used by GPT-3
_LLAMA_VOCAB = 32000
_LLAMA3_VOCAB = 128256  # Llama 3's tiktoken-based tokenizer (HF Meta-Llama-3 config.json vocab_size)


# Per-block kernel options a scenario may override (workload.flash_attention, .dropout, .fused_kernels,
# .causal_attention: off by default, a decoder's flash-attention core then computes the whole s x s square);
# each catalog transformer states its own defaults below, CNNs take none. GPT-2 and BERT default to a fused
# attention kernel (PyTorch >= 2.0's scaled_dot_product_attention, which Hugging Face's GPT-2 and BERT call:
# flash or memory-efficient attention, no s x s scores in HBM) with their 0.1 dropout; GPT-3 keeps the
# unfused core of Megatron-LM 2021, which the GPT-3 presets and cases model; Llama-2 flash attention, no
# dropout. docs/model-parallel.md, "Per-block cost".
KERNEL_OPTIONS = ("flash_attention", "dropout", "fused_kernels", "causal_attention")


def _gpt2(layers: int, hidden: int, heads: int, name: str) -> Callable[..., ModelSpec]:
    return lambda s, **kw: parametric_gpt(layers, hidden, heads, _GPT2_VOCAB, s, name=name, max_positions=1024,
                                          source="Radford et al. 2019 (GPT-2); HF gpt2 config",
                                          **{"flash_attention": True, **kw})


def _gpt3(layers: int, hidden: int, heads: int, name: str) -> Callable[..., ModelSpec]:
    return lambda s, **kw: parametric_gpt(layers, hidden, heads, _GPT2_VOCAB, s, name=name, max_positions=2048,
                                          source="Brown et al. 2020, arXiv:2005.14165, Table 2.1 (dense attention "
                                                 "assumed)", **kw)


def _llama(layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, name: str, vocab: int = _LLAMA_VOCAB,
           source: str = "Touvron et al. 2023, arXiv:2307.09288; HF Llama-2 configs") -> Callable[..., ModelSpec]:
    def build(s, **kw):
        opts = {"flash_attention": True, "dropout": 0.0, **kw}  # LLaMA trains without dropout
        return parametric_gpt(layers, hidden, heads, vocab, s, ffn, name=name, kv_heads=kv_heads,
                              positions="rotary", mlp="swiglu", norm="rmsnorm", bias=False, tied_head=False,
                              source=source, **opts)
    return build


def _llama3(layers: int, hidden: int, heads: int, ffn: int, name: str) -> Callable[..., ModelSpec]:
    """Llama 3: the Llama 2 block with 8 KV heads (GQA) at every size and a 128,256-token vocabulary."""
    return _llama(layers, hidden, heads, 8, ffn, name, _LLAMA3_VOCAB,
                  "HF meta-llama/Meta-Llama-3-8B and -70B config.json (Llama 3 model card)")


def _llama31(layers: int, hidden: int, heads: int, ffn: int, name: str) -> Callable[..., ModelSpec]:
    """Llama 3.1: the Llama 3 shapes (8 KV heads, SwiGLU, 128,256-token vocabulary) and the 405B size; its RoPE
    frequency scaling for 128k contexts changes no FLOP or parameter count."""
    return _llama(layers, hidden, heads, 8, ffn, name, _LLAMA3_VOCAB,
                  "Llama 3 Herd of Models (arXiv:2407.21783), Table 3; HF meta-llama/Llama-3.1-8B, -70B, -405B "
                  "config.json")


def _nemotron4(layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int,
               name: str) -> Callable[..., ModelSpec]:
    """Nemotron-4: GQA, RoPE, squared-ReLU MLP, no linear biases, untied embeddings, LayerNorm, no dropout."""
    def build(s, **kw):
        opts = {"flash_attention": True, "dropout": 0.0, **kw}
        return parametric_gpt(layers, hidden, heads, vocab, s, ffn, name=name, kv_heads=kv_heads,
                              positions="rotary", mlp="squared_relu", norm="layernorm", bias=False,
                              tied_head=False, source="Nemotron-4 340B Technical Report (arXiv:2406.11704), "
                              "Table 1; HF nvidia/Nemotron-4-340B-Base config (ffn_hidden_size 73728)", **opts)
    return build


def _mixtral(layers: int, hidden: int, heads: int, ffn: int, vocab: int, name: str,
             source: str) -> Callable[..., ModelSpec]:
    """Mixtral (Jiang et al. 2024, arXiv:2401.04088): the Mistral block (GQA with 8 KV heads, RoPE, RMSNorm, no
    biases, untied head) with every MLP a mixture of 8 SwiGLU experts of the dense FFN's width, top-2, softmax
    router, no shared expert."""
    moe = MoeSpec(experts=8, top_k=2, expert_ffn_hidden=ffn, router="softmax")

    def build(s, **kw):
        opts = {"flash_attention": True, "dropout": 0.0, **kw}
        return parametric_gpt(layers, hidden, heads, vocab, s, ffn, name=name, kv_heads=8, positions="rotary",
                              mlp="swiglu", norm="rmsnorm", bias=False, tied_head=False, source=source, moe=moe,
                              **opts)
    return build


def _qwen3_moe(layers: int, hidden: int, heads: int, experts_ffn: int, name: str) -> Callable[..., ModelSpec]:
    """Qwen3 MoE (Qwen3 Technical Report, arXiv:2505.09388, Table 2): GQA with 4 KV heads of width 128 (64 x 128 >
    hidden at 235B), RMSNorm on each query and key head, RoPE, no biases, untied head, vocab 151936; every block a
    mixture of 128 SwiGLU experts, top-8, softmax router, no shared expert."""
    moe = MoeSpec(experts=128, top_k=8, expert_ffn_hidden=experts_ffn, router="softmax")

    def build(s, **kw):
        opts = {"flash_attention": True, "dropout": 0.0, **kw}
        return parametric_gpt(layers, hidden, heads, 151936, s, None, name=name, kv_heads=4, positions="rotary",
                              mlp="swiglu", norm="rmsnorm", bias=False, tied_head=False, head_dim=128, qk_norm=True,
                              moe=moe, source=f"HF Qwen/{name.replace('qwen3', 'Qwen3').replace('-a', '-A')} "
                              "config.json; Qwen3 Technical Report (arXiv:2505.09388)", **opts)
    return build


def _gpt_oss(layers: int, experts: int, name: str) -> Callable[..., ModelSpec]:
    """GPT-OSS (OpenAI, "gpt-oss-120b & gpt-oss-20b Model Card", arXiv:2508.10925; HF openai/gpt-oss-120b and -20b
    config.json): hidden 2880, 64 query heads of 64 (4096 wide) and 8 KV heads, biases on the attention projections,
    the router and the experts, RMSNorm, RoPE, blocks alternating a 128-token sliding window (even blocks) with full
    attention, every block `experts` SwiGLU experts of 2880, top-4, no shared expert, vocab 201088, untied. The
    attention sinks (one learned logit per head and block: 2,304 parameters in the 120b) are not modelled."""
    moe = MoeSpec(experts=experts, top_k=4, expert_ffn_hidden=2880, router="softmax")

    def build(s, **kw):
        opts = {"flash_attention": True, "dropout": 0.0, **kw}
        return parametric_gpt(layers, 2880, 64, 201088, s, 2880, name=name, kv_heads=8, positions="rotary",
                              mlp="swiglu", norm="rmsnorm", bias=True, tied_head=False, head_dim=64, moe=moe,
                              sliding_window=128, sliding_window_every=2,
                              source=f"HF openai/{name} config.json; gpt-oss model card (arXiv:2508.10925)", **opts)
    return build


# DeepSeek-V3 (arXiv:2412.19437, section 4.2; HF deepseek-ai/DeepSeek-V3 config.json): 61 layers of 7168, MLA with
# 128 heads, the first 3 blocks dense (FFN 18432), then 256 routed experts of 2048 (top-8, sigmoid router) and 1
# shared expert; vocab 129280, untied head. `deepseek-v3` is the 671 B main model; `deepseek-v3-mtp` adds the one
# multi-token-prediction module it was pre-trained with (11.5 B more parameters).
_DEEPSEEK_V3_MLA = MlaSpec(kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
                           q_lora_rank=1536)
_DEEPSEEK_V3_MOE = MoeSpec(experts=256, top_k=8, shared_experts=1, expert_ffn_hidden=2048, router="sigmoid",
                           first_dense_layers=3)


def _deepseek_v3(name: str, mtp_layers: int) -> Callable[..., ModelSpec]:
    def build(s, **kw):
        opts = {"flash_attention": True, "dropout": 0.0, **kw}
        return parametric_gpt(61, 7168, 128, 129280, s, 18432, name=name, positions="rotary", mlp="swiglu",
                              norm="rmsnorm", bias=False, tied_head=False, mla=_DEEPSEEK_V3_MLA,
                              moe=_DEEPSEEK_V3_MOE, mtp_layers=mtp_layers,
                              source="DeepSeek-V3 Technical Report (arXiv:2412.19437); HF deepseek-ai/DeepSeek-V3 "
                                     "config.json", **opts)
    return build


def _bert(layers: int, hidden: int, heads: int, name: str) -> Callable[..., ModelSpec]:
    return lambda s, **kw: parametric_bert(layers, hidden, heads, 30522, s, name=name,
                                           source="Devlin et al. 2018, arXiv:1810.04805; HF bert-*-uncased configs",
                                           **{"flash_attention": True, **kw})


def _fixed(build: Callable[[], ModelSpec]) -> Callable[..., ModelSpec]:
    def fixed(s, **kw):
        if kw:
            raise ValueError(f"{', '.join(sorted(kw))}: only transformer models take per-block kernel options")
        return build()
    return fixed


# key -> (builder taking seq_len, default seq_len or None for models without a sequence)
_CATALOG: dict[str, tuple[Callable, int | None]] = {
    "alexnet": (_fixed(cnn.alexnet), None),
    "vgg16": (_fixed(cnn.vgg16), None),
    "resnet50": (_fixed(lambda: cnn.resnet(50)), None),
    "resnet101": (_fixed(lambda: cnn.resnet(101)), None),
    "resnet152": (_fixed(lambda: cnn.resnet(152)), None),
    "inception-v3": (_fixed(cnn.inception_v3), None),
    "vit-b16": (lambda s, **kw: vit(image_size=vit_seq_to_image(s), **kw), 197),
    "bert-base": (_bert(12, 768, 12, "bert-base"), 512),
    "bert-large": (_bert(24, 1024, 16, "bert-large"), 512),
    "gpt2": (_gpt2(12, 768, 12, "gpt2"), 1024),
    "gpt2-xl": (_gpt2(48, 1600, 25, "gpt2-xl"), 1024),
    "gpt3-1.3b": (_gpt3(24, 2048, 16, "gpt3-1.3b"), 2048),
    "gpt3-13b": (_gpt3(40, 5120, 40, "gpt3-13b"), 2048),
    "gpt3-175b": (_gpt3(96, 12288, 96, "gpt3-175b"), 2048),
    "llama2-7b": (_llama(32, 4096, 32, 32, 11008, "llama2-7b"), 4096),
    "llama2-13b": (_llama(40, 5120, 40, 40, 13824, "llama2-13b"), 4096),
    "llama2-70b": (_llama(80, 8192, 64, 8, 28672, "llama2-70b"), 4096),
    "llama3-8b": (_llama3(32, 4096, 32, 14336, "llama3-8b"), 8192),
    "llama3-70b": (_llama3(80, 8192, 64, 28672, "llama3-70b"), 8192),
    "llama3.1-8b": (_llama31(32, 4096, 32, 14336, "llama3.1-8b"), 8192),
    "llama3.1-70b": (_llama31(80, 8192, 64, 28672, "llama3.1-70b"), 8192),
    "llama3.1-405b": (_llama31(126, 16384, 128, 53248, "llama3.1-405b"), 8192),
    "nemotron4-340b": (_nemotron4(96, 18432, 96, 8, 73728, 256000, "nemotron4-340b"), 4096),
    "mixtral-8x7b": (_mixtral(32, 4096, 32, 14336, 32000, "mixtral-8x7b",
                              "Jiang et al. 2024 (arXiv:2401.04088); HF mistralai/Mixtral-8x7B-v0.1 config.json"), 4096),
    "mixtral-8x22b": (_mixtral(56, 6144, 48, 16384, 32768, "mixtral-8x22b",
                               "HF mistralai/Mixtral-8x22B-v0.1 config.json (Mistral AI, April 2024)"), 4096),
    "qwen3-30b-a3b": (_qwen3_moe(48, 2048, 32, 768, "qwen3-30b-a3b"), 4096),
    "qwen3-235b-a22b": (_qwen3_moe(94, 4096, 64, 1536, "qwen3-235b-a22b"), 4096),
    "gpt-oss-20b": (_gpt_oss(24, 32, "gpt-oss-20b"), 4096),
    "gpt-oss-120b": (_gpt_oss(36, 128, "gpt-oss-120b"), 4096),
    "deepseek-v3": (_deepseek_v3("deepseek-v3", 0), 4096),
    "deepseek-v3-mtp": (_deepseek_v3("deepseek-v3-mtp", 1), 4096),
}


def model_keys() -> list[str]:
    """Catalog keys in catalog order (CNNs first, then transformers by size)."""
    return list(_CATALOG)


def default_seq_len(key: str) -> int | None:
    """The sequence length a catalog model is profiled at when none is given (None: not a sequence model)."""
    if key not in _CATALOG:
        raise KeyError(f"unknown model {key!r}; known: {', '.join(_CATALOG)}")
    return _CATALOG[key][1]


def get_model(key: str, seq_len: int | None = None, **options) -> ModelSpec:
    """The catalog model `key` profiled at `seq_len` tokens (its default when None; ignored by CNNs).

    `options` (KERNEL_OPTIONS: flash_attention, dropout, fused_kernels, causal_attention) override a transformer's
    defaults (causal_attention: decoders only);
    a CNN refuses them (ValueError)."""
    if key not in _CATALOG:
        raise KeyError(f"unknown model {key!r}; known: {', '.join(_CATALOG)}")
    build, default = _CATALOG[key]
    if seq_len is not None and (not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len <= 0):
        raise ValueError(f"seq_len must be a positive integer, got {seq_len!r}")
    unknown = sorted(set(options) - set(KERNEL_OPTIONS))
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)}; expected some of {', '.join(KERNEL_OPTIONS)}")
    return _built(key, seq_len if seq_len is not None and default is not None else default,
                  tuple(sorted((k, type(v).__name__, v) for k, v in options.items())))


@functools.lru_cache(maxsize=32)
def _built(key: str, seq_len: int | None, options: tuple[tuple[str, str, object], ...]) -> ModelSpec:
    """The model built once per process per (key, sequence length, kernel options): a sweep resolves the same
    model at every point, and building its layers was most of resolving one. Safe to share: a ModelSpec is a
    frozen dataclass whose layers are a tuple of frozen LayerSpecs (their kernels and shapes tuples too). The
    options carry their type names, so dropout 0 and 0.0 (equal, and equal hashes) stay two entries."""
    return _CATALOG[key][0](seq_len, **{k: v for k, _, v in options})

