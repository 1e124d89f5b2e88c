"""Per-block kernels: attention without flash attention runs as its GEMMs, softmax and dropout (the s x s scores go
through HBM), hidden dropout as a fused bias+dropout+add, flash attention's backward recomputes Q K^T; the FLOP
accounting stays Megatron's (equation 3 of Narayanan et al. 2021)."""
from __future__ import annotations

import math

import pytest

from simdist.workload import get_model
from simdist.workload.transformer import parametric_gpt

S, H, A, V = 256, 512, 8, 1000
P = A * S * S  # score elements per sample


def _layer(model, suffix):
    return next(x for x in model.layers if x.name.endswith(suffix))


def test_attention_kernels_carry_the_score_traffic_and_keep_the_flop_count() -> None:
    core = _layer(parametric_gpt(1, H, A, V, S), "attn.core")
    names = [k.name.rsplit(".", 1)[1] for k in core.fwd_kernels]
    assert names == ["scores", "scale_mask_softmax", "dropout", "context"]
    assert math.isclose(sum(k.flops for k in core.fwd_kernels), core.fwd_flops)
    assert math.isclose(sum(k.flops for k in core.bwd_kernels), 2 * core.fwd_flops)  # backward = 2 x forward
    # forward: the scores written, read and written by the softmax, by the dropout, read by the second GEMM
    # plus Q and K read by the first GEMM, V read and the output written by the second
    assert math.isclose(sum(k.elems for k in core.fwd_kernels), 6 * P + 4 * S * H)
    assert sum(k.mask_bytes for k in core.fwd_kernels) == P  # the dropout's 1-byte mask
    assert sum(k.mask_bytes for k in core.bwd_kernels) == P
    # matmuls: 2 x 2 a s^2 d forward, 4 x in backward
    assert sum(k.flops for k in core.bwd_kernels if k.kind == "attention") == 8 * S * S * H


def test_without_dropout_and_unfused() -> None:
    plain = _layer(parametric_gpt(1, H, A, V, S, dropout=0.0), "attn.core")
    assert not any("dropout" in k.name for k in plain.fwd_kernels + plain.bwd_kernels)
    assert sum(k.mask_bytes for k in plain.fwd_kernels) == 0
    eager = _layer(parametric_gpt(1, H, A, V, S, dropout=0.0, fused_kernels=False), "attn.core")
    assert len(eager.fwd_kernels) == len(plain.fwd_kernels) + 2  # scale, masked_fill, softmax apart
    extra = sum(k.elems for k in eager.fwd_kernels) - sum(k.elems for k in plain.fwd_kernels)
    assert extra == 4 * P  # two more passes over the scores
    assert math.isclose(eager.fwd_flops, plain.fwd_flops)


def test_flash_attention_backward_recomputes_the_scores() -> None:
    core = _layer(parametric_gpt(1, H, A, V, S, flash_attention=True, dropout=0.0), "attn.core")
    assert core.fwd_kernels == ()  # one kernel: the layer's own roofline
    (bwd,) = core.bwd_kernels
    matmul = 2.0 * S * S * H
    assert math.isclose(bwd.flops, 5 * matmul + 2 * 5.0 * P)  # Q K^T again, dP, dS -> dQ, dK, dV (Dao 2023)
    assert bwd.elems == 8 * S * H + A * S  # Q K V O dO read, dQ dK dV written, the log-sum-exp: nothing in s^2


def test_residual_dropout_is_a_fused_bias_dropout_add() -> None:
    res = _layer(parametric_gpt(1, H, A, V, S), "mlp.residual")
    (k,) = res.fwd_kernels
    assert k.elems == 3 * S * H and k.mask_bytes == S * H
    (b,) = res.bwd_kernels
    assert b.elems == 2 * S * H and b.mask_bytes == S * H
    eager = _layer(parametric_gpt(1, H, A, V, S, fused_kernels=False), "mlp.residual")
    assert [x.name.rsplit(".", 1)[1] for x in eager.fwd_kernels] == ["dropout", "add"]
    none = _layer(parametric_gpt(1, H, A, V, S, dropout=0.0), "mlp.residual")
    assert none.fwd_kernels == () and none.bwd_kernels == ()


def test_catalog_defaults_and_options() -> None:
    gpt3 = _layer(get_model("gpt3-1.3b", 512), "attn.core")
    assert any("dropout" in k.name for k in gpt3.fwd_kernels)  # GPT-3: dropout 0.1, no flash attention
    gpt2 = get_model("gpt2", 512)  # PyTorch SDPA: a fused attention kernel, dropout 0.1 on the residuals
    assert _layer(gpt2, "attn.core").fwd_kernels == () and _layer(gpt2, "attn.residual").fwd_kernels
    llama = get_model("llama2-7b", 512)
    assert _layer(llama, "attn.core").fwd_kernels == ()  # Llama-2: flash attention, no dropout
    assert _layer(llama, "mlp.residual").fwd_kernels == ()
    unflashed = _layer(get_model("llama2-7b", 512, flash_attention=False), "attn.core")
    assert [k.name.rsplit(".", 1)[1] for k in unflashed.fwd_kernels][:2] == ["rotary", "scores"]
    with pytest.raises(ValueError, match="only transformer models"):
        get_model("resnet50", dropout=0.1)
    with pytest.raises(ValueError, match="unknown option"):
        get_model("gpt2", attention="fused")
    with pytest.raises(ValueError, match="dropout"):
        parametric_gpt(1, H, A, V, S, dropout=1.0)
    with pytest.raises(ValueError, match="fused_kernels"):
        parametric_gpt(1, H, A, V, S, fused_kernels="yes")


def test_tensor_parallel_shards_split_the_kernels() -> None:
    from simdist.strategies.tensor_parallel import TpRole, shard_layer

    core = _layer(parametric_gpt(1, H, A, V, S), "attn.core")
    part = shard_layer(core, TpRole.HEADS, 4)
    assert math.isclose(sum(k.elems for k in part.fwd_kernels), sum(k.elems for k in core.fwd_kernels) / 4)
    assert math.isclose(sum(k.flops for k in part.bwd_kernels), 2 * part.fwd_flops)
