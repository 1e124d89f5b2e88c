"""Invariants of the parametric transformer generators over random shapes (hypothesis)."""
from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from simdist.workload import parametric_bert, parametric_gpt

dims = st.tuples(st.integers(1, 4), st.integers(1, 8), st.integers(1, 8), st.integers(1, 500), st.integers(1, 64))


@settings(max_examples=60, deadline=None)
@given(dims)
def test_gpt_params_and_flops_closed_forms(d: tuple[int, int, int, int, int]) -> None:
    layers, heads, head_dim, vocab, s = d
    h = heads * head_dim
    m = parametric_gpt(layers, h, heads, vocab, s)
    # 12 h^2 + 13 h per block, token + position tables, final LayerNorm (Radford et al. 2019 layout)
    assert m.params == layers * (12 * h * h + 13 * h) + (vocab + s) * h + 2 * h
    linear = sum(l.fwd_flops for l in m.layers if l.kind == "linear")
    assert linear == layers * 24 * s * h * h + 2 * s * h * vocab
    assert sum(math.prod(g) for _, g in m.gradients_backward_order()) == m.params


@settings(max_examples=40, deadline=None)
@given(dims, st.integers(1, 4), st.integers(1, 64))
def test_llama_style_gqa_params(d: tuple[int, int, int, int, int], group: int, ffn: int) -> None:
    layers, kv, head_dim, vocab, s = d
    heads = kv * group
    h = heads * head_dim
    m = parametric_gpt(layers, h, heads, vocab, s, ffn, kv_heads=kv, positions="rotary", mlp="swiglu",
                       norm="rmsnorm", bias=False, tied_head=False)
    per_block = 2 * h * h + 2 * h * kv * head_dim + 3 * h * ffn + 2 * h
    assert m.params == layers * per_block + 2 * vocab * h + h
    assert sum(math.prod(g) for l in m.layers for g in l.grad_shapes) == m.params


@settings(max_examples=30, deadline=None)
@given(dims)
def test_bert_saved_activations_scale_with_seq(d: tuple[int, int, int, int, int]) -> None:
    layers, heads, head_dim, vocab, s = d
    h = heads * head_dim
    a, b = parametric_bert(layers, h, heads, vocab, s), parametric_bert(layers, h, heads, vocab, 2 * s)
    # every layer but the pooler and NSP head (one CLS token) works on all s tokens
    saved = lambda m: sum(l.saved_elems for l in m.layers if not l.name.startswith(("pooler", "nsp")))
    assert 2 * saved(a) <= saved(b) <= 4 * saved(a)  # linear terms double, the s^2 softmax term quadruples
    assert a.params == b.params or 2 * s > 512  # the position table grows only beyond 512
