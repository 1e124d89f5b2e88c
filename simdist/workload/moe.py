"""Mixture-of-experts MLPs (Megatron-Core's MoELayer): a router, routed SwiGLU experts run as grouped GEMMs,
and shared experts every token runs (docs/model.md, "Mixture of experts").

An MoE block's MLP half is `blocks.{i}.router` (the gate: a hidden x experts linear, a plain layer in the run's
high precision, as Megatron-Core's TopKRouter is no Transformer Engine module), `blocks.{i}.experts` (every
routed expert's weights; per sample the active work: s tokens x top_k experts, each a SwiGLU MLP of
expert_ffn_hidden) and `blocks.{i}.shared_experts` (a dense SwiGLU MLP of shared_experts x expert_ffn_hidden).
The experts layer lists its kernels as Megatron-Core runs them with grouped GEMMs: permute the tokens into
expert order (each token copied top_k times), the gate/up grouped GEMM, SwiGLU, the down grouped GEMM, and the
unpermute that sums each token's top_k outputs weighted by the router's probabilities.
"""
from __future__ import annotations

from simdist.workload import layers as L
from simdist.workload.specs import Kernel, LayerSpec, MoeSpec


def routed_experts(name: str, hidden: int, moe: MoeSpec, s: int, bias: bool = False) -> LayerSpec:
    """All routed experts of one MoE layer on s tokens (per sample; kind 'expert', `experts` = moe.experts);
    `bias`: each expert's two projections have biases (GPT-OSS)."""
    h, f = hidden, moe.expert_ffn_hidden
    t = moe.top_k * s  # token-expert pairs: rows of the grouped GEMMs
    gate_up = 2.0 * t * h * 2 * f
    down = 2.0 * t * f * h
    swiglu = L.SWIGLU_FLOPS_PER_ELEM * t * f
    combine = 2.0 * t * h  # each token's top_k outputs, times its probabilities, summed
    fwd = (Kernel(f"{name}.permute", "other", 0.0, s * h + t * h),
           Kernel(f"{name}.gate_up", "expert", gate_up, t * h + 2 * t * f),
           Kernel(f"{name}.swiglu", "activation", swiglu, 3 * t * f),
           Kernel(f"{name}.down", "expert", down, t * f + t * h),
           Kernel(f"{name}.unpermute", "other", combine, t * h + t + s * h))
    bwd = (Kernel(f"{name}.unpermute_bwd", "other", 2 * combine, s * h + 2 * t * h + t),  # dY -> dy_k, dprobs
           Kernel(f"{name}.down_dgrad", "expert", down, t * h + t * f),
           Kernel(f"{name}.down_wgrad", "expert", down, t * f + t * h),
           Kernel(f"{name}.swiglu_bwd", "activation", 2 * swiglu, 5 * t * f),
           Kernel(f"{name}.gate_up_dgrad", "expert", gate_up, 2 * t * f + t * h),
           Kernel(f"{name}.gate_up_wgrad", "expert", gate_up, t * h + 2 * t * f),
           Kernel(f"{name}.permute_bwd", "other", float(t * h), t * h + s * h))  # the top_k copies' gradients summed
    e = moe.experts
    shapes: tuple[tuple[int, ...], ...] = ((e, 2 * f, h), (e, h, f))  # w1 and w3 (gate, up), w2 (down) per expert
    if bias:
        shapes += ((e, 2 * f), (e, h))
    saved = t * h + 2 * t * f + t * f + t * h + t  # permuted input, gate/up output, SwiGLU output, expert outputs, probs
    params = e * 3 * h * f + (e * (2 * f + h) if bias else 0)
    return LayerSpec(name, "expert", params, gate_up + swiglu + down + combine, s * h, s * h, saved, shapes,
                     fwd, bwd, experts=e)


def shared_experts(name: str, hidden: int, ffn: int, s: int) -> LayerSpec:
    """The shared experts as one dense SwiGLU MLP of width `ffn` (shared_experts x expert_ffn_hidden) on s tokens."""
    h, f = hidden, ffn
    gate_up, down = 2.0 * s * h * 2 * f, 2.0 * s * f * h
    swiglu = L.SWIGLU_FLOPS_PER_ELEM * s * f
    fwd = (Kernel(f"{name}.gate_up", "linear", gate_up, s * h + 2 * s * f),
           Kernel(f"{name}.swiglu", "activation", swiglu, 3 * s * f),
           Kernel(f"{name}.down", "linear", down, s * f + s * h))
    bwd = (Kernel(f"{name}.down_dgrad", "linear", down, s * h + s * f),
           Kernel(f"{name}.down_wgrad", "linear", down, s * f + s * h),
           Kernel(f"{name}.swiglu_bwd", "activation", 2 * swiglu, 5 * s * f),
           Kernel(f"{name}.gate_up_dgrad", "linear", gate_up, 2 * s * f + s * h),
           Kernel(f"{name}.gate_up_wgrad", "linear", gate_up, s * h + 2 * s * f))
    return LayerSpec(name, "linear", 3 * h * f, gate_up + swiglu + down, s * h, s * h, s * h + 3 * s * f,
                     ((2 * f, h), (h, f)), fwd, bwd)


def moe_mlp(prefix: str, hidden: int, moe: MoeSpec, s: int, bias: bool = False) -> list[LayerSpec]:
    """The MLP half of an MoE block: router, routed experts, shared experts (when the model has them); `bias`: the
    router and the routed experts have biases (GPT-OSS)."""
    router = L.linear(f"{prefix}.router", s, hidden, moe.experts, bias=bias)
    out = [LayerSpec(router.name, "linear", router.params, router.fwd_flops, router.input_elems, router.output_elems,
                     router.saved_elems, router.grad_shapes, high_precision=True),
           routed_experts(f"{prefix}.experts", hidden, moe, s, bias)]
    if moe.shared_experts:
        out.append(shared_experts(f"{prefix}.shared_experts", hidden, moe.shared_experts * moe.expert_ffn_hidden, s))
    return out
