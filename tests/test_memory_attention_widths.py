"""Attention whose widths are not heads x (hidden / heads): Qwen3's 128-wide heads over a 4,096 hidden, GPT-OSS's
64 x 64 over 2,880, DeepSeek-V3's multi-head latent attention (192-wide queries and keys, 128-wide values, the
compressed latents). The shape read off the layers and the saved bytes per block against a hand count."""
from __future__ import annotations

import pytest

from simdist.memory import block_activations
from simdist.strategies.context_parallel import kv_block_bytes, q_block_bytes
from simdist.strategies.mp_plan import transformer_shape
from simdist.workload import get_model


def test_qwen3_235b_shape_and_activations_by_hand() -> None:
    s, b, t = 4096, 1, 4
    shape = transformer_shape(get_model("qwen3-235b-a22b", seq_len=s))
    assert (shape.hidden, shape.heads, shape.kv_heads) == (4096, 64, 4)
    assert shape.widths() == (64 * 128, 4 * 128, 4 * 128, 64 * 128) and shape.latent_width == 0
    h, f = 4096, 8 * 1536  # the tokens' SwiGLU activations through their top-8 experts
    whole = s * b * h * (2 * 2 + 2 * 2)  # norm inputs, QKV and MLP inputs (bf16), no dropout
    split = s * b * (2 * (8192 + 512 + 512) + 2 * 8192 + f * (2 * 2 + 2))
    core = s * b * 4 * 64  # flash: the fp32 log-sum-exp per head
    act = block_activations(shape, b, t, True, 2.0)
    assert act.kept_bytes == pytest.approx(whole / t + split / t, rel=1e-12)
    assert act.core_bytes == pytest.approx(core / t, rel=1e-12)
    # K/V per cp rank: 4 heads of 128 each for K and V (not 4 x 4096 / 64)
    assert kv_block_bytes(shape, b, 2, t, 2.0) == pytest.approx(b * s / 2 * (512 + 512) / t * 2, rel=1e-12)
    assert q_block_bytes(shape, b, 2, t, 2.0) == pytest.approx(b * s / 2 * 8192 / t * 2, rel=1e-12)


def test_deepseek_v3_mla_shape_and_activations_by_hand() -> None:
    s, b, t = 4096, 1, 2
    shape = transformer_shape(get_model("deepseek-v3", seq_len=s))
    assert (shape.hidden, shape.heads, shape.kv_heads) == (7168, 128, 128)  # one K and V per head, not 192
    q, v = 128 * (128 + 64), 128 * 128
    assert shape.widths() == (q, q, v, v)
    assert shape.latent_width == 1536 + 512  # q_lora_rank + kv_lora_rank: the norms' and up projections' inputs
    h, f = 7168, (8 + 1) * 2048  # top-8 routed and the shared expert
    whole = s * b * (h * (2 * 2 + 2 * 2) + 2048 * (2 + 2))
    split = s * b * (2 * (q + q + v) + 2 * v + f * (2 * 2 + 2))
    act = block_activations(shape, b, t, False, 2.0)
    assert act.kept_bytes == pytest.approx(whole + split / t, rel=1e-12)
    assert act.core_bytes == pytest.approx(s * b * 4 * 128 / t, rel=1e-12)
    assert kv_block_bytes(shape, b, 2, t, 2.0) == pytest.approx(b * s / 2 * (q + v) / t * 2, rel=1e-12)


def test_a_head_of_hidden_over_heads_keeps_the_default_widths() -> None:
    shape = transformer_shape(get_model("llama3.1-8b", seq_len=2048))
    assert (shape.q_width, shape.k_width, shape.v_width, shape.out_width) == (None,) * 4
    assert shape.widths() == (4096, 1024, 1024, 4096)
    oss = transformer_shape(get_model("gpt-oss-120b", seq_len=2048))
    assert oss.widths() == (64 * 64, 8 * 64, 8 * 64, 64 * 64) and oss.hidden == 2880
