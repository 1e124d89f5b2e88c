"""Activation and weight memory as the frameworks hold it: the per-block saved tensors (Korthikanti et al.'s
GPT table, flash attention, GQA with SwiGLU, squared ReLU), Transformer Engine's quantized GEMM inputs and its
cached quantized weights beside the bf16 ones, each against a hand count."""
from __future__ import annotations

import pytest

from simdist.hardware.specs import GpuSpec
from simdist.memory import (TransformerShape, block_activations, layer_activation_bytes, model_state_bytes,
                            quantized_copy_bytes, saved_gemm_input_bytes)
from simdist.strategies.mp_plan import transformer_shape
from simdist.strategies.sharding import model_parallel_memory
from simdist.workload import get_model
from tests.compute.gpus import A100_80GB

GiB = 2 ** 30
H100 = GpuSpec("h100", "H100 SXM5", "nvidia", {"fp32": 67e12, "bf16": 989e12, "fp16": 989e12, "fp8": 1979e12},
               80e9, 3.35e12, 700.0, 1.0)
B200 = GpuSpec("b200", "B200", "nvidia", {"fp32": 80e12, "bf16": 2.25e15, "fp16": 2.25e15, "fp8": 4.5e15,
                                         "mxfp8": 4.5e15, "nvfp4": 9e15}, 180e9, 8e12, 1000.0, 1.0)
GPT3 = TransformerShape(hidden=12288, heads=96, seq_len=2048)
GPT3_FLASH = TransformerShape(hidden=12288, heads=96, seq_len=2048, flash_attention=True)
LLAMA3_70B = TransformerShape(hidden=8192, heads=64, seq_len=8192, kv_heads=8, ffn_hidden=28672, mlp="swiglu",
                              dropout=False, flash_attention=True)


@pytest.mark.parametrize("t", [1, 4, 8])
def test_gpt_without_flash_is_korthikanti_table2(t: int) -> None:
    s, b, h, a = 2048, 2, 12288, 96
    sbh = s * b * h
    f = lambda **k: layer_activation_bytes(GPT3, b, tp=t, **k)  # noqa: E731
    assert f() == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert f(sequence_parallel=True) == pytest.approx(sbh / t * 34 + 5 * a * s * s * b / t)
    assert f(sequence_parallel=True, recompute="selective") == pytest.approx(34 * sbh / t)
    assert f(sequence_parallel=True, recompute="full") == pytest.approx(2 * sbh / t)


@pytest.mark.parametrize("t,sp", [(1, False), (8, False), (8, True)])
def test_flash_attention_keeps_the_log_sum_exp_not_the_scores(t: int, sp: bool) -> None:
    """34 sbh as Korthikanti splits it over tp, plus the fp32 log-sum-exp per head and token (4 a s b / t)."""
    s, b, h, a = 2048, 1, 12288, 96
    sbh = s * b * h
    replicated = 10 * sbh / (t if sp else 1)
    assert layer_activation_bytes(GPT3_FLASH, b, t, sp) == pytest.approx(replicated + 24 * sbh / t + 4 * a * s * b / t)
    assert layer_activation_bytes(GPT3_FLASH, b, t, sp, "selective") == pytest.approx(replicated + 24 * sbh / t)


def test_llama_block_gqa_swiglu_no_dropout() -> None:
    """Per token (x2 bytes): norms' inputs 2h, QKV and gate/up inputs 2h, Q h, K and V 2h x 8/64, attention output
    h, SwiGLU's gate and up 2f, down input f: 8.5h + 3f = 33.5h with f = 3.5h; the log-sum-exp 4a bytes."""
    s, h, a, t = 8192, 8192, 64, 4
    x = block_activations(LLAMA3_70B, 1, t, sequence_parallel=True)
    assert x.kept_bytes == pytest.approx(s * h * 33.5 / t)
    assert x.core_bytes == pytest.approx(4 * a * s / t)
    assert x.under("none") / GiB == pytest.approx(0.5239, abs=1e-4)  # Korthikanti's formula: 5.53 GiB
    assert layer_activation_bytes(LLAMA3_70B.__class__(8192, 64, 8192), 1, t, True) / GiB == pytest.approx(5.53, abs=0.01)


def test_squared_relu_block() -> None:
    """Nemotron-4 340B's block (GQA 8 of 96 heads, squared-ReLU MLP of 4h, no dropout): 8h + 2h(1 + 2/12) + 2h
    + 4f per token in bytes = 12.33h + 16h."""
    shape = TransformerShape(18432, 96, 4096, kv_heads=8, ffn_hidden=73728, mlp="squared_relu", dropout=False,
                             flash_attention=True)
    s, h = 4096, 18432
    assert block_activations(shape, 1).kept_bytes == pytest.approx(s * h * (8 + 2 * (1 + 2 / 12) + 2 + 16))


def test_transformer_shape_reads_the_block_off_the_model() -> None:
    assert transformer_shape(get_model("llama3-70b")) == LLAMA3_70B
    assert transformer_shape(get_model("gpt3-175b")) == TransformerShape(12288, 96, 2048, 96, 49152)
    nemotron = transformer_shape(get_model("nemotron4-340b"))
    assert (nemotron.kv_heads, nemotron.mlp, nemotron.ffn_hidden, nemotron.dropout) == (8, "squared_relu", 73728, False)


def test_fp8_saves_the_linear_inputs_quantized() -> None:
    """GPT with flash under fp8: 14 of the 34 sbh are linear inputs and halve (7), but the attention output the
    flash backward reads stays bf16 beside the projection's fp8 copy (+2): 29 sbh; log-sum-exp as before."""
    s, h, a = 2048, 12288, 96
    x = block_activations(GPT3_FLASH, 1, gemm_input_bytes=saved_gemm_input_bytes("fp8", 2))
    assert x.kept_bytes + x.core_bytes == pytest.approx(s * h * 29 + 4 * a * s)
    assert saved_gemm_input_bytes("fp8", 2) == 1.0
    assert saved_gemm_input_bytes("mxfp8", 2) == pytest.approx(1 + 1 / 32)
    assert saved_gemm_input_bytes("nvfp4", 2) == pytest.approx(0.5 + 1 / 16)
    assert saved_gemm_input_bytes("bf16", 2) == 2.0


def test_recipe_weights_stay_bf16_beside_their_cached_quantized_copies() -> None:
    model = get_model("llama3-8b")
    linear = sum(x.params for x in model.layers if x.kind == "linear" and not x.high_precision)
    p = model.params
    assert quantized_copy_bytes(model.layers, "fp8", H100) == pytest.approx(2 * linear)  # rowwise + transpose
    assert quantized_copy_bytes(model.layers, "fp8", B200) == pytest.approx(linear)  # any-layout FP8 GEMMs
    assert quantized_copy_bytes(model.layers, "mxfp8", B200) == pytest.approx(2 * (1 + 1 / 32) * linear)
    assert quantized_copy_bytes(model.layers, "nvfp4", B200) == pytest.approx(2 * (0.5 + 1 / 16) * linear)
    assert quantized_copy_bytes(model.layers, "bf16", H100) == 0.0
    copies = quantized_copy_bytes(model.layers, "fp8", H100)
    w, g, o = model_state_bytes(p, "fp8", "adam", "fp32", quantized_copy_bytes=copies)
    assert (w, g, o) == pytest.approx((2 * p + 2 * linear, 4 * p, 12 * p))
    assert model_state_bytes(p, "fp8", "adam", "fp32", zero=3, dp=8, quantized_copy_bytes=copies)[0] == \
        pytest.approx(2 * p / 8)  # ZeRO-3: copies cast from the gathered unit, none kept


def test_fp8_on_a_gpu_without_fp8_counts_its_fp16_fallback() -> None:
    model = get_model("gpt2")
    (est,) = model_parallel_memory(model, A100_80GB, micro_batch=1, micro_batches=1, precision="fp8",
                                   optimizer="adam", shape=transformer_shape(model))
    (fp16,) = model_parallel_memory(model, A100_80GB, micro_batch=1, micro_batches=1, precision="fp16",
                                    optimizer="adam", shape=transformer_shape(model))
    assert est.parts_bytes == fp16.parts_bytes


def test_recomputed_layer_transient_drops_with_flash() -> None:
    """Full recomputation re-runs one layer at a time: its transient is that layer's no-recompute bytes less its
    checkpoint, which flash attention shrinks by the scores it never stores."""
    model = get_model("llama3-8b")
    shape = transformer_shape(model)
    kw = dict(micro_batch=1, micro_batches=8, precision="bf16", optimizer="adam", tp=2, pp=2,
              sequence_parallel=True, shape=shape)
    full = model_parallel_memory(model, H100, recompute="full", **kw)[0]
    none = model_parallel_memory(model, H100, recompute="none", **kw)[0]
    x = block_activations(shape, 1, 2, True)
    assert full.workspace_bytes - none.workspace_bytes == pytest.approx(x.under("none") - x.under("full"))
    s, h, a = 8192, 4096, 32  # GQA 8 of 32 heads, f = 3.5h: 8 + 3 + 2 + 21 = 34 sbh kept, no s x s term
    assert x.under("none") - x.under("full") == pytest.approx((34 - 2) * s * h / 2 + 4 * a * s / 2)


@pytest.mark.parametrize("cp", [2, 4])
def test_context_parallelism_divides_the_sequence(cp: int) -> None:
    """Megatron-Core's cp holds s / cp tokens per rank: the Llama 3 70B block's 33.5 sbh/t and its
    log-sum-exp 4as/t both divide by cp (attention activations halve at cp 2); selective and full too."""
    from dataclasses import replace
    s, h, a, t = 8192, 8192, 64, 8
    x = block_activations(replace(LLAMA3_70B, cp=cp), 1, t, sequence_parallel=True)
    assert x.kept_bytes == pytest.approx(s / cp * h * 33.5 / t)
    assert x.core_bytes == pytest.approx(4 * a * s / cp / t)
    for rc in ("none", "selective", "full"):
        assert layer_activation_bytes(replace(LLAMA3_70B, cp=cp), 1, t, True, rc) == pytest.approx(
            layer_activation_bytes(LLAMA3_70B, 1, t, True, rc) / cp)
    with pytest.raises(ValueError, match="cp"):
        replace(LLAMA3_70B, cp=3)  # 8192 tokens do not split over 3 ranks
