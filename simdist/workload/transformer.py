"""Parametric transformer generators: GPT-style decoders (GPT-2/3, LLaMA-2), BERT encoders and ViT.

A block is a handful of LayerSpecs (norm, qkv, attention core, projection, residual add, MLP pieces):
enough resolution for gradient buckets and for the roofline to tell matmuls from memory-bound work.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from simdist.workload import layers as L
from simdist.workload import mla
from simdist.workload.mla import MlaSpec
from simdist.workload.moe import moe_mlp
from simdist.workload.specs import Kernel, LayerSpec, ModelSpec, MoeSpec

_SCALARS = (bool, int, float, str, type(None))


def built_once(build):
    """`build` (a model generator of scalar arguments) run once per process per argument list: a sweep
    resolves the same model at every point, and building its layers was most of resolving one. Sharing
    the result is safe: a ModelSpec is frozen, its layers a tuple of frozen LayerSpecs. Arguments carry
    their types in the key (dropout 0 and 0.0 are two entries); a call with any other argument builds."""
    cache: dict[tuple, ModelSpec] = {}

    @functools.wraps(build)
    def cached(*args, **kwargs):
        if not all(type(v) in _SCALARS for v in (*args, *kwargs.values())):
            return build(*args, **kwargs)
        key = (tuple((type(v).__name__, v) for v in args),
               tuple(sorted((k, type(v).__name__, v) for k, v in kwargs.items())))
        hit = cache.get(key)
        if hit is None:
            if len(cache) >= 32:
                cache.pop(next(iter(cache)))
            hit = cache[key] = build(*args, **kwargs)
        return hit
    return cached


@dataclass(frozen=True)
class BlockConfig:
    """Everything that shapes one transformer block."""

    hidden: int
    heads: int
    ffn_hidden: int
    kv_heads: int  # < heads: grouped-query attention
    mlp: str = "gelu"  # gelu | swiglu | squared_relu
    norm: str = "layernorm"  # layernorm | rmsnorm
    bias: bool = True
    rotary: bool = False
    flash_attention: bool = False  # attention core saves Q, K, V and the log-sum-exp, not the s x s probabilities
    dropout: float = 0.0  # hidden and attention dropout probability; > 0 adds the dropout kernels and masks
    fused_kernels: bool = True  # Megatron's fused scale-mask-softmax and bias+dropout+add (else PyTorch eager's)
    pre_norm: bool = True  # GPT/LLaMA/ViT: pre-norm; BERT: post-norm
    kv_channels: int | None = None  # a head's width when it is not hidden / heads (Qwen3: 128 with 64 x 128 > 4096)
    qk_norm: bool = False  # RMSNorm on each head's query and key (Qwen3's q_norm, k_norm)
    mla: MlaSpec | None = None  # DeepSeek's multi-head latent attention instead of (grouped-query) attention
    window: int | None = None  # sliding-window attention: each query attends to the last `window` keys
    causal: bool = False  # a decoder's causal mask, which a flash-attention kernel skips tile by tile

    @property
    def head_dim(self) -> int:
        return self.kv_channels if self.kv_channels is not None else self.hidden // self.heads


# The key/query tile of flash-attention kernels (FlashAttention-2's and cuDNN's 128 x 128 blocks): a causal kernel
# computes the tiles on and below the diagonal, nb (nb + 1) / 2 of the nb^2 tiles of an s x s score matrix
FLASH_TILE = 128


def attended_keys(cfg: BlockConfig, s: int) -> float:
    """The keys each query's scores are computed against, on average: all s (an unfused core computes the whole
    s x s scores, masked or not), a sliding window, or with `causal` flash attention the tiles on and below the
    diagonal: (nb + 1) / 2 tiles of FLASH_TILE keys per query, nb = ceil(s / FLASH_TILE)."""
    if cfg.window and cfg.window < s:
        return cfg.window
    if cfg.causal and cfg.flash_attention:
        tiles = -(-s // FLASH_TILE)
        return min(s, (tiles + 1) / 2 * FLASH_TILE)
    return s


def standard_dims(cfg: BlockConfig, s: int) -> L.CoreDims:
    """(Grouped-query) attention's core operands: one head width for Q, K and V."""
    d, a, kv = cfg.head_dim, cfg.heads, cfg.kv_heads
    q, k_v = s * a * d, s * kv * d
    matmul = 2.0 * s * attended_keys(cfg, s) * a * d
    return L.CoreDims(q, k_v, k_v, q, matmul, matmul, s * (a + kv) * d if cfg.rotary else 0)


def _check_dims(hidden: int, heads: int, kv_heads: int, seq_len: int) -> None:
    for label, v in (("hidden", hidden), ("heads", heads), ("kv_heads", kv_heads), ("seq_len", seq_len)):
        if not isinstance(v, int) or v <= 0:
            raise ValueError(f"{label} must be a positive integer, got {v!r}")
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be divisible by kv_heads ({kv_heads})")


def _check_kernel_options(dropout: float, fused_kernels: bool) -> None:
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be a probability in [0, 1), got {dropout!r}")
    if not isinstance(fused_kernels, bool):
        raise ValueError(f"fused_kernels must be true or false, got {fused_kernels!r}")


def _no_causal_encoder(causal_attention: bool) -> None:
    if causal_attention:
        raise ValueError("causal_attention: an encoder (BERT, ViT) attends in both directions, it has no causal mask")


def _norm(cfg: BlockConfig, name: str, elems: int) -> LayerSpec:
    if cfg.norm == "rmsnorm":
        return L.norm(name, elems, cfg.hidden, bias=False, flops_per_elem=L.RMSNORM_FLOPS_PER_ELEM)
    return L.norm(name, elems, cfg.hidden)


def attention_core(name: str, cfg: BlockConfig, s: int, dims: L.CoreDims | None = None) -> LayerSpec:
    """softmax(Q K^T / sqrt(d)) V over all heads: 2 s^2 h FLOPs for Q K^T and 2 s^2 h for AV (causal masks not skipped).

    Without flash attention the core is the kernels Megatron-LM runs (Narayanan et al. 2021, section 4.2): the
    Q K^T batched GEMM writes the b x a x s x s scores to HBM, a fused scale-mask-softmax (or, unfused, scale,
    masked_fill and softmax apart) reads and writes them, dropout reads them and writes them and its 1-byte mask,
    the probabilities x V batched GEMM reads them; backward mirrors each. With flash attention one kernel keeps
    the scores on chip, and its backward recomputes Q K^T: 5 matmuls to forward's 2 (Dao 2023, FlashAttention-2).
    """
    dims = dims or standard_dims(cfg, s)
    a = cfg.heads
    q, k, v, o = dims.q, dims.k, dims.v, dims.o
    qkv_elems = q + k + v
    scores, context = dims.scores_flops, dims.context_flops
    keys = attended_keys(cfg, s)
    probs = float(a * s * keys)
    softmax = L.SOFTMAX_FLOPS_PER_ELEM * probs
    rotary = 3.0 * dims.rotated if dims.rotated else 0.0  # rotate q and k: two multiplies and an add
    if cfg.flash_attention:
        saved = qkv_elems + o + a * s  # Q, K, V, output, log-sum-exp
        flops = scores + context + softmax + rotary  # dropout, if any, inside the kernel (no mask in HBM)
        # backward recomputes Q K^T, then dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q
        bwd = Kernel(f"{name}.flash_bwd", "attention", 3 * scores + 2 * context + 2 * (softmax + rotary),
                     2 * qkv_elems + 2 * o + a * s)  # read Q K V O dO lse, write dQ dK dV
        return LayerSpec(name, "attention", 0, flops, qkv_elems, o, saved, (), bwd_kernels=(bwd,))
    saved = qkv_elems + a * s * keys  # Q, K, V and the softmax probabilities
    fwd: list[Kernel] = []
    bwd: list[Kernel] = []
    if cfg.rotary:
        fwd.append(Kernel(f"{name}.rotary", "activation", rotary, 2.0 * dims.rotated))
    fwd.append(Kernel(f"{name}.scores", "attention", scores, q + k + probs))
    if cfg.fused_kernels:
        fwd.append(Kernel(f"{name}.scale_mask_softmax", "activation", softmax, 2 * probs))
        bwd_softmax = [Kernel(f"{name}.scale_mask_softmax_bwd", "activation", 2 * softmax, 3 * probs)]
    else:  # PyTorch eager: x * scale, masked_fill with an s x s bool mask, softmax
        mask = float(s * keys)
        fwd += [Kernel(f"{name}.scale", "activation", probs, 2 * probs),
                Kernel(f"{name}.mask", "activation", 0.0, 2 * probs, mask),
                Kernel(f"{name}.softmax", "activation", softmax - probs, 2 * probs)]
        bwd_softmax = [Kernel(f"{name}.softmax_bwd", "activation", 2 * (softmax - probs), 3 * probs),
                       Kernel(f"{name}.mask_bwd", "activation", 0.0, 2 * probs, mask),
                       Kernel(f"{name}.scale_bwd", "activation", 2 * probs, 2 * probs)]
    if cfg.dropout > 0:
        fwd.append(Kernel(f"{name}.dropout", "activation", 0.0, 2 * probs, probs))  # memory-bound: no FLOPs counted
    fwd.append(Kernel(f"{name}.context", "attention", context, probs + v + o))
    bwd += [Kernel(f"{name}.context_dgrad", "attention", context, o + v + probs),  # dP = dO V^T
            Kernel(f"{name}.context_wgrad", "attention", context, probs + o + v)]  # dV = P^T dO
    if cfg.dropout > 0:
        bwd.append(Kernel(f"{name}.dropout_bwd", "activation", 0.0, 2 * probs, probs))
    bwd += bwd_softmax
    bwd += [Kernel(f"{name}.scores_dgrad_q", "attention", scores, probs + k + q),  # dQ = dS K
            Kernel(f"{name}.scores_dgrad_k", "attention", scores, probs + q + k)]  # dK = dS^T Q
    if cfg.rotary:
        bwd.append(Kernel(f"{name}.rotary_bwd", "activation", 2 * rotary, 2.0 * dims.rotated))
    flops = math.fsum(k.flops for k in fwd)
    return LayerSpec(name, "attention", 0, flops, qkv_elems, o, saved, (), tuple(fwd), tuple(bwd))


def residual(name: str, cfg: BlockConfig, elems: int) -> LayerSpec:
    """The residual add after a sub-layer; with hidden dropout, Megatron's fused bias+dropout+add (one kernel that
    also writes the 1-byte mask) or, unfused, a dropout kernel and an add kernel. Backward: the dropout's."""
    plain = L.add(name, elems)
    if cfg.dropout <= 0:
        return plain
    e = float(elems)
    if cfg.fused_kernels:
        fwd = (Kernel(f"{name}.bias_dropout_add", "other", plain.fwd_flops, 3 * e, e),)
    else:
        fwd = (Kernel(f"{name}.dropout", "activation", 0.0, 2 * e, e),
               Kernel(f"{name}.add", "other", plain.fwd_flops, 3 * e))
    bwd = (Kernel(f"{name}.dropout_bwd", "activation", 0.0, 2 * e, e),)  # dropout: memory-bound, no FLOPs counted
    return replace(plain, fwd_kernels=fwd, bwd_kernels=bwd)


def _attention(prefix: str, cfg: BlockConfig, s: int) -> list[LayerSpec]:
    """The attention half's layers before the residual: projections, (Qwen3's q/k norms), core, output projection;
    multi-head latent attention's own projections when the block has them (simdist.workload.mla)."""
    h, d, a = cfg.hidden, cfg.head_dim, cfg.heads
    if cfg.mla is not None:
        return [*mla.mla_projections(prefix, h, a, cfg.mla, s),
                attention_core(f"{prefix}.attn.core", cfg, s,
                               mla.mla_core_dims(a, cfg.mla, s, cfg.rotary, attended_keys(cfg, s))),
                mla.mla_output(prefix, h, a, cfg.mla, s)]
    out = [L.linear(f"{prefix}.attn.qkv", s, h, (a + 2 * cfg.kv_heads) * d, bias=cfg.bias)]
    if cfg.qk_norm:  # an RMSNorm of head width on every query and key head, each with its own weight (d,)
        elems = s * (a + cfg.kv_heads) * d
        out.append(LayerSpec(f"{prefix}.attn.qk_norm", "norm", 2 * d, L.RMSNORM_FLOPS_PER_ELEM * elems, elems, elems,
                             elems, ((d,), (d,))))
    return out + [attention_core(f"{prefix}.attn.core", cfg, s),
                  L.linear(f"{prefix}.attn.proj", s, a * d, h, bias=cfg.bias)]


def block(prefix: str, cfg: BlockConfig, s: int, moe: MoeSpec | None = None) -> list[LayerSpec]:
    """One transformer block on s tokens, in forward order; with `moe`, its MLP is a mixture of experts."""
    h, f = cfg.hidden, cfg.ffn_hidden
    attn = [*_attention(prefix, cfg, s), residual(f"{prefix}.attn.residual", cfg, s * h)]
    if moe is not None:
        if cfg.mlp != "swiglu":
            raise ValueError(f"mixture-of-experts blocks have SwiGLU experts; got mlp {cfg.mlp!r}")
        mlp = moe_mlp(prefix, h, moe, s, cfg.bias)
    elif cfg.mlp == "swiglu":
        gate_up = L.linear(f"{prefix}.mlp.gate_up", s, h, 2 * f, bias=False)
        gate_up = LayerSpec(gate_up.name, "linear", gate_up.params, gate_up.fwd_flops, gate_up.input_elems,
                            gate_up.output_elems, gate_up.saved_elems, ((f, h), (f, h)))  # w1 (gate), w3 (up)
        mlp = [gate_up,
               LayerSpec(f"{prefix}.mlp.swiglu", "activation", 0, L.SWIGLU_FLOPS_PER_ELEM * s * f, 2 * s * f, s * f, 2 * s * f, ()),
               L.linear(f"{prefix}.mlp.down", s, f, h, bias=False)]
    elif cfg.mlp in ("gelu", "squared_relu"):  # one up projection, an elementwise activation, one down
        per_elem = L.GELU_FLOPS_PER_ELEM if cfg.mlp == "gelu" else L.SQUARED_RELU_FLOPS_PER_ELEM
        mlp = [L.linear(f"{prefix}.mlp.fc1", s, h, f, bias=cfg.bias),
               L.activation(f"{prefix}.mlp.{cfg.mlp}", s * f, per_elem),
               L.linear(f"{prefix}.mlp.fc2", s, f, h, bias=cfg.bias)]
    else:
        raise ValueError(f"mlp must be 'gelu', 'swiglu' or 'squared_relu', got {cfg.mlp!r}")
    mlp.append(residual(f"{prefix}.mlp.residual", cfg, s * h))
    if cfg.pre_norm:
        return [_norm(cfg, f"{prefix}.norm1", s * h), *attn, _norm(cfg, f"{prefix}.norm2", s * h), *mlp]
    return [*attn, _norm(cfg, f"{prefix}.norm1", s * h), *mlp, _norm(cfg, f"{prefix}.norm2", s * h)]


def lm_loss(name: str, s: int, vocab: int) -> LayerSpec:
    """Softmax cross-entropy over s x vocab logits; keeps the logits (or their softmax) for backward."""
    return LayerSpec(name, "other", 0, L.SOFTMAX_FLOPS_PER_ELEM * s * vocab, s * vocab, s, s * vocab, ())


@built_once
def parametric_gpt(layers: int, hidden: int, heads: int, vocab: int, seq_len: int, ffn_hidden: int | None = None,
                   name: str | None = None, *, kv_heads: int | None = None, positions: str = "learned",
                   max_positions: int | None = None, mlp: str = "gelu", norm: str = "layernorm", bias: bool = True,
                   tied_head: bool = True, flash_attention: bool = False, dropout: float = 0.1,
                   fused_kernels: bool = True, source: str = "", head_dim: int | None = None,
                   qk_norm: bool = False, mla: MlaSpec | None = None, moe: MoeSpec | None = None,
                   mtp_layers: int = 0, sliding_window: int | None = None, sliding_window_every: int = 1,
                   causal_attention: bool = False) -> ModelSpec:
    """A GPT-style pre-norm decoder: token (+ learned position) embedding, `layers` blocks, final norm, LM head, loss.

    Defaults are GPT-2/GPT-3 (GELU MLP of 4 x hidden, LayerNorm with biases, head tied to the embedding, hidden
    and attention dropout 0.1); LLaMA uses positions='rotary', mlp='swiglu', norm='rmsnorm', bias=False,
    tied_head=False, dropout=0; Nemotron-4 positions='rotary', mlp='squared_relu', bias=False, tied_head=False.
    `head_dim` sets a head's width when it is not hidden / heads, `qk_norm` adds Qwen3's query/key norms, `mla`
    replaces attention by multi-head latent attention, `moe` makes every block from `moe.first_dense_layers` on a
    mixture of experts, `mtp_layers` appends DeepSeek-V3's multi-token-prediction modules, `sliding_window` makes
    blocks 0, every, 2 x every, ... attend to the last `sliding_window` keys only (GPT-OSS: 128, every 2nd block).
    `causal_attention`: a flash-attention core computes only the tiles its causal mask leaves (attended_keys), as
    FlashAttention-2 and cuDNN's fused attention do; its model FLOPs count that work (Megatron-LM's causal half).
    """
    if not isinstance(layers, int) or layers <= 0:
        raise ValueError(f"layers must be a positive integer, got {layers!r}")
    if not isinstance(vocab, int) or vocab <= 0:
        raise ValueError(f"vocab must be a positive integer, got {vocab!r}")
    kv = heads if kv_heads is None else kv_heads
    _check_dims(hidden, heads, kv, seq_len)
    if positions not in ("learned", "rotary"):
        raise ValueError(f"positions must be 'learned' or 'rotary', got {positions!r}")
    f = ffn_hidden if ffn_hidden is not None else 4 * hidden
    _check_kernel_options(dropout, fused_kernels)
    if not isinstance(causal_attention, bool):
        raise ValueError(f"causal_attention must be true or false, got {causal_attention!r}")
    for label, v, low in (("head_dim", head_dim, 1), ("mtp_layers", mtp_layers, 0), ("sliding_window", sliding_window, 1),
                          ("sliding_window_every", sliding_window_every, 1)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < low):
            raise ValueError(f"{label} must be an integer >= {low}, got {v!r}")
    if moe is not None and moe.first_dense_layers > layers:
        raise ValueError(f"moe.first_dense_layers ({moe.first_dense_layers}) exceeds the {layers} layers")
    cfg = BlockConfig(hidden, heads, f, kv, mlp=mlp, norm=norm, bias=bias, rotary=positions == "rotary",
                      flash_attention=flash_attention, dropout=float(dropout), fused_kernels=fused_kernels,
                      kv_channels=head_dim, qk_norm=qk_norm, mla=mla, causal=causal_attention)
    s = seq_len
    out: list[LayerSpec] = [L.embedding("embed.tokens", s, vocab, hidden)]
    if positions == "learned":
        out.append(L.embedding("embed.positions", s, max(max_positions or s, s), hidden))
        out.append(L.add("embed.add", s * hidden))
    windowed = replace(cfg, window=sliding_window) if sliding_window else cfg
    for i in range(layers):
        block_cfg = windowed if i % sliding_window_every == 0 else cfg
        out.extend(block(f"blocks.{i}", block_cfg, s, moe if moe is not None and i >= moe.first_dense_layers else None))
    out.append(_norm(cfg, "final_norm", s * hidden))
    head = L.tied_linear("lm_head", s, hidden, vocab) if tied_head else L.linear("lm_head", s, hidden, vocab, bias=False)
    out.append(replace(head, high_precision=True))  # Megatron-Core's output layer is no TE module: bf16 under fp8
    out.append(lm_loss("loss", s, vocab))
    for j in range(mtp_layers):
        out.extend(mtp_module(j, layers + j, cfg, s, vocab, moe if moe is not None and layers + j >= moe.first_dense_layers else None))
    label = name or f"gpt-{layers}l-{hidden}h"
    return ModelSpec(label, "transformer", tuple(out), tokens_per_sample=s, source=source or "parametric GPT decoder",
                     moe=moe)


def mtp_module(depth: int, index: int, cfg: BlockConfig, s: int, vocab: int, moe: MoeSpec | None) -> list[LayerSpec]:
    """One multi-token-prediction module (DeepSeek-V3, arXiv:2412.19437, section 2.2; Megatron-Core's
    MultiTokenPredictionLayer): the next token's embedding (the model's own table) and the previous depth's hidden
    states, each RMS-normed, concatenated and projected 2h -> h, one transformer block (`blocks.{index}`), a norm,
    the model's own output head and a cross-entropy loss. Shared embedding and head add FLOPs, no parameters."""
    h, p = cfg.hidden, f"mtp.{depth}"
    embed = replace(L.embedding(f"{p}.embed", s, vocab, h), params=0, grad_shapes=())
    return [embed, _norm(cfg, f"{p}.enorm", s * h), _norm(cfg, f"{p}.hnorm", s * h),
            L.linear(f"{p}.eh_proj", s, 2 * h, h, bias=False), *block(f"blocks.{index}", cfg, s, moe),
            _norm(cfg, f"{p}.norm", s * h), replace(L.tied_linear(f"{p}.head", s, h, vocab), high_precision=True),
            lm_loss(f"{p}.loss", s, vocab)]


@built_once
def parametric_bert(layers: int, hidden: int, heads: int, vocab: int = 30522, seq_len: int = 512,
                    ffn_hidden: int | None = None, name: str | None = None, *, max_positions: int = 512,
                    type_vocab: int = 2, pretraining_heads: bool = True, flash_attention: bool = False,
                    dropout: float = 0.1, fused_kernels: bool = True, source: str = "",
                    causal_attention: bool = False) -> ModelSpec:
    """A BERT post-norm encoder: word + position + segment embeddings, `layers` blocks, pooler, MLM and NSP heads."""
    _no_causal_encoder(causal_attention)
    if not isinstance(layers, int) or layers <= 0:
        raise ValueError(f"layers must be a positive integer, got {layers!r}")
    _check_dims(hidden, heads, heads, seq_len)
    h, s = hidden, seq_len
    _check_kernel_options(dropout, fused_kernels)
    cfg = BlockConfig(h, heads, ffn_hidden if ffn_hidden is not None else 4 * h, heads, pre_norm=False,
                      flash_attention=flash_attention, dropout=float(dropout), fused_kernels=fused_kernels)
    out: list[LayerSpec] = [
        L.embedding("embed.words", s, vocab, h),
        L.embedding("embed.positions", s, max(max_positions, s), h),
        L.embedding("embed.token_types", s, type_vocab, h),
        L.add("embed.add", 2 * s * h),
        L.norm("embed.norm", s * h, h),
    ]
    for i in range(layers):
        out.extend(block(f"encoder.{i}", cfg, s))
    heads_start = len(out)  # the pooler and pre-training heads are no TE modules: bf16 under fp8
    out.append(L.linear("pooler.dense", 1, h, h))
    out.append(L.activation("pooler.tanh", h, L.GELU_FLOPS_PER_ELEM))
    if pretraining_heads:
        out.append(L.linear("mlm.transform", s, h, h))
        out.append(L.activation("mlm.gelu", s * h, L.GELU_FLOPS_PER_ELEM))
        out.append(L.norm("mlm.norm", s * h, h))
        decoder = L.tied_linear("mlm.decoder", s, h, vocab)  # weight tied to embed.words; own bias
        out.append(LayerSpec(decoder.name, "linear", vocab, decoder.fwd_flops, decoder.input_elems,
                             decoder.output_elems, decoder.saved_elems, ((vocab,),)))
        out.append(lm_loss("mlm.loss", s, vocab))
        out.append(L.linear("nsp.classifier", 1, h, 2))
    out[heads_start:] = [replace(l, high_precision=True) if l.kind == "linear" else l for l in out[heads_start:]]
    label = name or f"bert-{layers}l-{hidden}h"
    return ModelSpec(label, "transformer", tuple(out), tokens_per_sample=s, source=source or "parametric BERT encoder")


@built_once
def vit(layers: int = 12, hidden: int = 768, heads: int = 12, patch: int = 16, image_size: int = 224,
        classes: int = 1000, ffn_hidden: int | None = None, name: str = "vit-b16", *,
        flash_attention: bool = False, dropout: float = 0.0, fused_kernels: bool = True,
        causal_attention: bool = False) -> ModelSpec:
    """A ViT (Dosovitskiy et al. 2020): patch-embedding conv, class token, learned positions, pre-norm GELU blocks."""
    _no_causal_encoder(causal_attention)
    if image_size % patch:
        raise ValueError(f"image_size ({image_size}) must be a multiple of the patch size ({patch})")
    h = hidden
    patches = (image_size // patch) ** 2
    s = patches + 1
    _check_dims(h, heads, heads, s)
    conv, _ = L.conv("patch_embed", L.Shape(3, image_size, image_size), h, patch, patch, 0, bias=True)
    out: list[LayerSpec] = [
        conv,
        LayerSpec("embed.cls_and_positions", "embedding", h + s * h, float(s * h), patches * h, s * h, 0,
                  ((1, 1, h), (1, s, h))),
    ]
    _check_kernel_options(dropout, fused_kernels)
    cfg = BlockConfig(h, heads, ffn_hidden if ffn_hidden is not None else 4 * h, heads,
                      flash_attention=flash_attention, dropout=float(dropout), fused_kernels=fused_kernels)
    for i in range(layers):
        out.extend(block(f"encoder.{i}", cfg, s))
    out.append(L.norm("final_norm", s * h, h))
    out.append(replace(L.linear("head", 1, h, classes), high_precision=True))
    return ModelSpec(name, "transformer", tuple(out), tokens_per_sample=s,
                     source="timm/torchvision vit_b_16; arXiv:2010.11929")


def vit_seq_to_image(seq_len: int, patch: int = 16) -> int:
    """The square image size whose patches plus the class token give `seq_len` tokens."""
    n = math.isqrt(max(seq_len - 1, 0))
    if seq_len < 2 or n * n != seq_len - 1:
        raise ValueError(f"a ViT seq_len must be 1 + n^2 (class token plus an n x n patch grid), got {seq_len}")
    return n * patch
