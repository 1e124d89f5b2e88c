"""Packed sequences: several documents in one sample, attention within each document only.

Fine-tuning data is mostly short documents; NeMo / Megatron-Bridge pack them into sequences of seq_len tokens
(`packed_sequence_specs`) and run attention per document with the sequences' boundaries (`cu_seqlens`: flash
attention's varlen kernels, Transformer Engine's THD layout), so no token attends across documents. A sample of
s tokens holding s / L documents of L tokens then costs the attention core of s / L sequences of L tokens:
its s^2 terms (Q K^T, softmax, P V) become s L, its per-token terms (rotary, the log-sum-exp, Q, K, V and the
output) stay. Every other layer sees s tokens either way. Without flash attention a packed batch runs the full
s x s attention with a block-diagonal mask: nothing changes, so io/ refuses the key there.
"""
from __future__ import annotations

from dataclasses import replace

from simdist.workload.specs import Kernel, LayerSpec, ModelSpec


def _times(layer: LayerSpec, n: int) -> LayerSpec:
    """`layer` run on n sequences (a per-document layer over the n documents of a sample)."""
    return replace(layer, fwd_flops=layer.fwd_flops * n, input_elems=layer.input_elems * n,
                   output_elems=layer.output_elems * n, saved_elems=layer.saved_elems * n,
                   fwd_kernels=tuple(Kernel.scaled(k, n) for k in layer.fwd_kernels),
                   bwd_kernels=tuple(Kernel.scaled(k, n) for k in layer.bwd_kernels))


def is_attention_core(layer: LayerSpec) -> bool:
    """The attention core of a block (the only layer whose cost is quadratic in the sequence)."""
    return layer.kind == "attention" and layer.params == 0


def pack_documents(model: ModelSpec, documents: int, document_model: ModelSpec) -> ModelSpec:
    """`model` (s tokens per sample) with each attention core replaced by `documents` copies of the core of
    `document_model`, the same model built at the document length s / documents."""
    if documents < 1:
        raise ValueError(f"documents: got {documents!r}; expected >= 1")
    cores = {x.name: x for x in document_model.layers if is_attention_core(x)}
    layers = []
    for layer in model.layers:
        if is_attention_core(layer):
            if layer.name not in cores:
                raise ValueError(f"{document_model.name} has no layer {layer.name}")
            layer = _times(cores[layer.name], documents)
        layers.append(layer)
    return replace(model, layers=tuple(layers))
