"""Memory per GPU under tp / pp / ZeRO / recomputation: Korthikanti et al.'s per-layer formula, schedules'
in-flight micro-batches, ZeRO stages, infeasibility with the numbers."""
from __future__ import annotations

import pytest

from simdist.errors import InfeasibleError
from simdist.memory import (TransformerShape, check_fits, estimate_memory, in_flight_micro_batches,
                            layer_activation_bytes)
from simdist.strategies.pipeline_schedule import schedule_order, time_orders
from simdist.strategies.sharding import check_stages_fit, model_parallel_memory
from simdist.workload import get_model
from tests.compute.gpus import A100_80GB

GPT3 = TransformerShape(hidden=12288, heads=96, seq_len=2048)


@pytest.mark.parametrize("t", [1, 2, 8])
@pytest.mark.parametrize("b", [1, 4])
def test_korthikanti_table2(t: int, b: int) -> None:
    s, h, a = 2048, 12288, 96
    sbh = s * b * h
    f = lambda **k: layer_activation_bytes(GPT3, b, tp=t, **k)  # noqa: E731
    assert f() == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert f(sequence_parallel=True) == pytest.approx(sbh / t * (34 + 5 * a * s / h))
    assert f(recompute="selective") == pytest.approx(sbh * (10 + 24 / t))
    assert f(sequence_parallel=True, recompute="selective") == pytest.approx(34 * sbh / t)
    assert f(recompute="full") == pytest.approx(2 * sbh)
    if t == 1:  # no parallelism: 34 sbh + 5 a s^2 b
        assert f() == pytest.approx(34 * sbh + 5 * a * s * s * b)


@pytest.mark.parametrize("t,sp", [(1, False), (4, False), (8, True)])
def test_recompute_full_below_selective_below_none(t: int, sp: bool) -> None:
    x = [layer_activation_bytes(GPT3, 1, t, sp, rc) for rc in ("full", "selective", "none")]
    assert x[0] < x[1] < x[2]


def test_in_flight_closed_forms_match_the_scheduled_orders() -> None:
    p, m, v = 4, 8, 2
    for kind, vv in (("gpipe", 1), ("1f1b", 1), ("interleaved", v)):
        timing = time_orders(schedule_order(kind, p, m, vv), 1.0 / vv, 2.0 / vv, virtual_stages=vv)
        for r in range(p):
            assert in_flight_micro_batches(kind, p, m, r, vv) == pytest.approx(timing.peak_in_flight(r) / vv)
    assert in_flight_micro_batches("interleaved", p, m, 0, v) == pytest.approx(p + (p - 1) / v)
    assert in_flight_micro_batches("1f1b", 1, m, 0) == 1.0


def _gpt3(**kw):
    args = dict(micro_batch=1, micro_batches=16, precision="fp16", optimizer="adam", grad_dtype="fp16",
                dp=8, tp=8, pp=16, shape=GPT3)
    args.update(kw)
    return model_parallel_memory(get_model("gpt3-175b", seq_len=2048), A100_80GB, **args)


def test_gpt3_175b_tp8_pp16_fits_an_a100_80gb_and_stage0_is_the_tightest() -> None:
    est = _gpt3(sequence_parallel=True, recompute="selective")
    assert len(est) == 16
    assert check_stages_fit(est) is est[0]
    # 175 B params / 128 model-parallel GPUs ~ 1.37 B each; 16 bytes each = ~22 GB of model state
    state = est[1].weights_bytes + est[1].gradients_bytes + est[1].optimizer_states_bytes
    assert 18e9 < state < 26e9
    assert max(est[1:-1], key=lambda e: e.activations_bytes) is est[1]  # 1F1B: p - stage micro-batches
    assert est[0].activations_bytes > est[8].activations_bytes > est[14].activations_bytes


def test_gpt3_without_recompute_or_sp_does_not_fit_and_says_why() -> None:
    est = _gpt3(tp=8, pp=8, dp=16, micro_batch=4)
    with pytest.raises(InfeasibleError) as info:
        check_stages_fit(est)
    msg = str(info.value)
    assert "(pipeline stage 0) has 74.5 GiB" in msg and "activations" in msg and info.value.exit_code == 3


def test_recompute_and_sp_order_the_peak() -> None:
    peaks = [max(e.total_bytes for e in _gpt3(recompute=rc)) for rc in ("none", "selective", "full")]
    assert peaks[0] > peaks[1] > peaks[2]
    assert max(e.total_bytes for e in _gpt3(sequence_parallel=True)) < peaks[0]


def test_zero_stages_monotone_under_model_parallelism() -> None:
    totals = [_gpt3(zero=z, recompute="full")[1].total_bytes for z in range(4)]
    assert totals[0] > totals[1] > totals[2] > totals[3]


def test_gpipe_holds_all_micro_batches() -> None:
    g = _gpt3(schedule="gpipe", recompute="full")
    f = _gpt3(schedule="1f1b", recompute="full")
    assert g[15].activations_bytes == pytest.approx(16 * f[15].activations_bytes)


def test_tied_head_keeps_an_embedding_copy_on_the_last_stage() -> None:
    m = get_model("gpt2", seq_len=1024)
    est = model_parallel_memory(m, A100_80GB, micro_batch=1, micro_batches=4, precision="fp16", optimizer="adam",
                                pp=2, shape=TransformerShape(768, 12, 1024))
    vocab_embed = 50257 * 768
    w = [e.weights_bytes / 2 for e in est]
    assert sum(w) == pytest.approx(m.params + vocab_embed)


def test_single_gpu_layout_without_shape_matches_the_data_parallel_estimate() -> None:
    m = get_model("gpt2", seq_len=1024)
    (e,) = model_parallel_memory(m, A100_80GB, micro_batch=2, micro_batches=1, precision="fp16",
                                 optimizer="adam", grad_dtype="fp16")
    d = estimate_memory(m, A100_80GB, 2, "fp16", "adam", "fp16")
    assert (e.weights_bytes, e.gradients_bytes, e.optimizer_states_bytes) == \
        (d.weights_bytes, d.gradients_bytes, d.optimizer_states_bytes)
    assert e.activations_bytes == pytest.approx(d.activations_bytes)
    assert e.workspace_bytes == pytest.approx(d.workspace_bytes)


def test_zero3_workspace_holds_two_gathered_units() -> None:
    from simdist.strategies.sharding import fsdp_units, zero3_live_param_bytes
    from simdist.strategies.tensor_parallel import shard_model

    m = get_model("gpt2", seq_len=1024)
    kw = dict(micro_batch=1, micro_batches=1, precision="bf16", optimizer="adam", dp=8, tp=2,
              shape=TransformerShape(768, 12, 1024))
    (z2,), (z3,) = (model_parallel_memory(m, A100_80GB, zero=z, **kw) for z in (2, 3))
    live = zero3_live_param_bytes(fsdp_units(shard_model(m, 2)), 2)
    assert z3.workspace_bytes - z2.workspace_bytes == pytest.approx(live)
    assert z3.weights_bytes == pytest.approx(z2.weights_bytes / 8)
