"""Causal flash attention (workload.causal_attention): the core computes the key tiles on and below the diagonal."""
from __future__ import annotations

import pytest

from simdist.workload import get_model, parametric_gpt
from simdist.workload.transformer import FLASH_TILE


def _cores(m):
    return [l for l in m.layers if l.kind == "attention"]


def test_causal_flash_core_computes_the_lower_tiles_by_hand() -> None:
    """s = 4096 is 32 tiles of 128: a causal kernel computes 32 x 33 / 2 of the 32 x 32 tiles, (s + 128) / 2 keys per
    query on average, for Q K^T, P V and the softmax; rotary is per token, unchanged."""
    s, a, d = 4096, 32, 128
    full, causal = (get_model("llama3.1-8b", s, causal_attention=c) for c in (False, True))
    keys = (s + FLASH_TILE) / 2
    rotary = 3 * s * (32 + 8) * 128
    assert _cores(full)[0].fwd_flops == 4 * s * s * a * d + 5 * a * s * s + rotary
    assert _cores(causal)[0].fwd_flops == pytest.approx(4 * s * keys * a * d + 5 * a * s * keys + rotary, rel=1e-12)
    bwd = _cores(causal)[0].bwd_kernels[0]  # flash backward: Q K^T recomputed, dV, dP, dQ, dK: 5 of those GEMMs
    assert bwd.flops == pytest.approx(10 * s * keys * a * d + 2 * (5 * a * s * keys + rotary), rel=1e-12)
    # nothing else changes: the projections, the saved tensors
    assert [l.fwd_flops for l in full.layers if l.kind != "attention"] == \
        [l.fwd_flops for l in causal.layers if l.kind != "attention"]
    assert _cores(full)[0].saved_elems == _cores(causal)[0].saved_elems


def test_causal_applies_to_mla_and_leaves_sliding_windows_and_short_sequences() -> None:
    s = 4096
    full, causal = (get_model("deepseek-v3", s, causal_attention=c) for c in (False, True))
    ratio = _cores(causal)[0].fwd_flops / _cores(full)[0].fwd_flops
    assert ratio == pytest.approx((s + FLASH_TILE) / 2 / s, rel=0.01)  # (rotary aside)
    oss_full, oss_causal = (get_model("gpt-oss-120b", s, causal_attention=c) for c in (False, True))
    assert _cores(oss_causal)[0].fwd_flops == _cores(oss_full)[0].fwd_flops  # the 128-token window: one tile
    assert _cores(oss_causal)[1].fwd_flops < _cores(oss_full)[1].fwd_flops
    one_tile = parametric_gpt(1, 256, 4, 100, 128, flash_attention=True, causal_attention=True)
    assert _cores(one_tile)[0].fwd_flops == _cores(parametric_gpt(1, 256, 4, 100, 128, flash_attention=True))[0].fwd_flops


def test_causal_is_refused_for_encoders_and_has_no_effect_unfused() -> None:
    with pytest.raises(ValueError, match="causal_attention"):
        get_model("bert-base", 512, causal_attention=True)
    with pytest.raises(ValueError, match="causal_attention"):
        get_model("vit-b16", causal_attention=True)
    # the unfused core computes the whole square whatever the mask (io refuses the key there)
    unfused = [get_model("gpt3-1.3b", 2048, causal_attention=c) for c in (False, True)]
    assert unfused[0].fwd_flops == unfused[1].fwd_flops


def test_scenario_key_changes_the_step_and_is_refused_where_it_cannot() -> None:
    from simdist.errors import ScenarioError
    from tests.engine.test_every_key import GPT, TRAIN
    from tests.strategies.scenario_runner import run_with
    flash = {**GPT, "workload.seq_len": 1024, "workload.flash_attention": True}
    full = run_with(TRAIN, flash).breakdown_s.compute
    assert run_with(TRAIN, {**flash, "workload.causal_attention": True}).breakdown_s.compute < full
    with pytest.raises(ScenarioError, match="workload.causal_attention") as e:
        run_with(TRAIN, {**flash, "workload.flash_attention": False, "workload.causal_attention": True})
    assert "flash-attention" in str(e.value)
    with pytest.raises(ScenarioError, match="workload.causal_attention") as e:
        run_with(TRAIN, {"workload": {"model": "bert-base", "batch_per_gpu": 4, "precision": "fp16"},
                         "workload.causal_attention": True})
    assert "encoder" in str(e.value)
