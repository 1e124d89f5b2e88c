"""Single-GPU compute calibration: layer proxies do the LayerSpec's work, and the CPU run writes a profile
that simdist loads and that moves the prediction towards the measurement."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import torch  # the dev extras install it; without it these tests fail, not skip
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from simdist.compute import layer_times  # noqa: E402
from simdist.workload import layers as L  # noqa: E402
from simdist.workload.catalog import get_model  # noqa: E402
from simdist.workload.specs import ModelSpec  # noqa: E402
from simdist.workload.transformer import parametric_gpt  # noqa: E402
from simdist.validation import gpu_calibrate as gc  # noqa: E402
from simdist.validation.layer_proxies import (ProxyPlan, attention_dims, build_proxy, infer_window,  # noqa: E402
                                      linear_dims, plan_model)

ROOT = Path(__file__).resolve().parents[2]
BATCH = 2


def _flops(proxy) -> int:
    with FlopCounterMode(display=False) as fc:
        proxy.forward()
    return fc.get_total_flops()


def _matmul_layers(model: ModelSpec, kinds=("conv", "linear", "attention")):
    return [p for p in plan_model(model) if p.layer.kind in kinds]


@pytest.mark.parametrize("model", [get_model("resnet50"), parametric_gpt(2, 128, 4, 1000, 64, name="small-gpt"),
                                   parametric_gpt(2, 128, 8, 1000, 64, 352, kv_heads=2, positions="rotary",
                                                  mlp="swiglu", norm="rmsnorm", bias=False, tied_head=False)],
                         ids=["resnet50", "small-gpt", "small-llama"])
def test_conv_and_linear_proxies_do_exactly_the_specs_flops(model):
    plans = _matmul_layers(model, ("conv", "linear"))
    assert plans
    for plan in plans:
        proxy = build_proxy(plan, BATCH, "meta")
        assert proxy.exact, plan.layer.name
        assert _flops(proxy) == pytest.approx(BATCH * plan.layer.fwd_flops, rel=1e-12), plan.layer.name


@pytest.mark.parametrize("model", [parametric_gpt(2, 128, 4, 1000, 64, name="small-gpt"),
                                   parametric_gpt(2, 128, 8, 1000, 64, kv_heads=2, positions="rotary", mlp="swiglu",
                                                  name="gqa-rotary"),
                                   get_model("bert-base", 128)], ids=["gpt", "gqa-rotary", "bert-base"])
def test_attention_proxies_do_the_matmul_flops_and_the_softmax_term_is_small(model):
    plans = _matmul_layers(model, ("attention",))
    assert plans
    for plan in plans:
        proxy = build_proxy(plan, BATCH, "meta")
        s, heads, kv, d, exact = attention_dims(plan.layer, plan.seq_len)
        assert exact and heads * d == plan.layer.output_elems / s
        # FlopCounterMode counts Q K^T and A V (4 s^2 h); simdist adds 5 a s^2 for the softmax (+ rotary)
        assert _flops(proxy) == BATCH * 4 * s * s * heads * d
        rotary = 3 * s * (heads + kv) * d if model.name == "gqa-rotary" else 0
        assert BATCH * plan.layer.fwd_flops - _flops(proxy) == BATCH * (5 * heads * s * s + rotary)


def test_attention_heads_and_kv_heads_are_recovered():
    gqa = parametric_gpt(1, 256, 8, 100, 32, kv_heads=2, positions="rotary", mlp="swiglu", norm="rmsnorm", bias=False)
    core = next(x for x in gqa.layers if x.kind == "attention")
    assert attention_dims(core, 32) == (32, 8, 2, 32, True)
    gpt = get_model("gpt2", 256)
    core = next(x for x in gpt.layers if x.kind == "attention")
    assert attention_dims(core, 256) == (256, 12, 12, 64, True)
    assert attention_dims(core, None) is None  # no sequence length, no shapes


@pytest.mark.parametrize("size_in,size_out,k,expected", [
    (224, 112, 7, (2, 3)),  # ResNet stem
    (56, 28, 1, (2, 0)),  # 1x1 downsample
    (56, 56, 3, (1, 1)),
    (56, 28, 3, (2, 1)),
    (224, 14, 16, (16, 0)),  # ViT patch embedding
    (224, 55, 11, (4, 2)),  # AlexNet conv1
    (112, 56, 3, (2, 1)),  # ResNet max pool
])
def test_infer_window_matches_the_torchvision_layers(size_in, size_out, k, expected):
    assert infer_window(size_in, size_out, k) == expected


def test_linear_dims_from_weight_and_from_counts():
    assert linear_dims(L.linear("fc", 7, 12, 5)) == (7, 12, 5, True)
    assert linear_dims(L.tied_linear("head", 16, 64, 1000)) == (16, 64, 1000, False)  # no weight: from counts
    gate_up = next(x for x in get_model("llama2-7b", 64).layers if x.name.endswith("gate_up"))
    assert linear_dims(gate_up) == (64, 4096, 2 * 11008, False)


@settings(max_examples=40, deadline=None)
@given(c=st.integers(1, 16), o=st.integers(1, 16), k=st.integers(1, 7), stride=st.integers(1, 4),
       pad=st.integers(0, 3), size=st.integers(8, 40))
def test_any_square_conv_is_rebuilt_with_its_output_size_and_flops(c, o, k, stride, pad, size):
    pad = min(pad, k // 2)
    spec, y = L.conv("c", L.Shape(c, size, size), o, k, stride, pad)
    proxy = build_proxy(ProxyPlan(spec, True, "cnn"), BATCH, "meta")
    assert proxy.exact
    assert tuple(proxy.forward().shape) == (BATCH, o, y.h, y.w)
    assert _flops(proxy) == pytest.approx(BATCH * spec.fwd_flops, rel=1e-12)


@pytest.mark.parametrize("model", [get_model("resnet50"), get_model("bert-base", 64), gc.tiny_model("tiny"),
                                   gc.tiny_model("tiny-cnn"), get_model("inception-v3")],
                         ids=["resnet50", "bert-base", "tiny", "tiny-cnn", "inception-v3"])
def test_exact_proxies_write_the_specs_output_elements(model):
    for plan in plan_model(model):
        proxy = build_proxy(plan, BATCH, "meta")
        if proxy.exact:
            assert proxy.forward().numel() == pytest.approx(BATCH * plan.layer.output_elems), (plan.layer.name, proxy.op)


def test_backward_targets_follow_the_first_trainable_layer_rule():
    model = gc.tiny_model("tiny-cnn")
    proxies = [build_proxy(p, 1, "cpu") for p in plan_model(model)]
    first = proxies[0]  # the first conv: weight gradient only, as for a network input
    assert first.grad_targets() and all(not x.requires_grad for x in first.inputs)
    assert all(any(x.requires_grad for x in p.inputs) for p in proxies[1:])


def test_decoders_run_causal_attention_and_encoders_do_not():
    assert all(p.causal for p in plan_model(gc.tiny_model("tiny")))
    assert not any(p.causal for p in plan_model(get_model("bert-base", 64)))


def test_fit_recovers_a_known_efficiency_from_synthetic_measurements():
    gpu = _gpu("a100-sxm4-80gb")
    cases = [gc.resolve_model("tiny", 4), gc.resolve_model("tiny-cnn", 8)]
    truth = gc.with_efficiency(gpu, "fp16", 0.37)
    measured = [[{"kind": layer.kind, "fwd_s": t.fwd_s, "bwd_s": t.bwd_s} for layer, t in
                 zip(c.model.layers, layer_times(c.model, truth, c.batch, "fp16"))] for c in cases]
    e, fit = gc.fit_efficiency(cases, measured, gpu, "fp16")
    assert e == pytest.approx(0.37, rel=1e-3)
    assert fit["max_rel_residual"] < 1e-3


def _gpu(key):
    from simdist.io.catalog import gpus

    return gpus()[key]


def test_cpu_run_writes_a_profile_simdist_loads_and_that_moves_predictions_towards_the_measurement(tmp_path, capsys):
    import yaml

    from simdist.engine.simulation import simulate
    from simdist.io.calibration import load_profile
    from simdist.io.load import load_data

    gpu_key = "a100-sxm4-80gb"
    profile_path, report_path = tmp_path / "cal" / "profile.json", tmp_path / "report.json"
    rc = gc.main(["--gpu", gpu_key, "--device", "cpu", "--models", "tiny", "--dtype", "fp32", "--warmup", "1",
                  "--reps", "3", "--out", str(profile_path), "--report", str(report_path)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "MAPE of model totals" in printed and "matmul sweep" in printed

    profile = load_profile(profile_path)
    (entry,) = profile.compute
    assert (entry.gpu, entry.dtype) == (gpu_key, "fp32") and 0 < entry.efficiency <= 1
    assert entry.fit["points"] == 1 and entry.fit["matmul_sweep"]
    assert profile.provenance["torch_version"] == torch.__version__ and profile.provenance["date"]

    report = json.loads(report_path.read_text())
    (before,), (after,) = report["before"], report["after"]
    measured = before["measured_s"]
    assert measured > 0 and after["error"] < before["error"]
    assert sum(len(m["layers"]) for m in report["layers"]) == len(gc.tiny_model("tiny").layers)

    # the `calibration:` key of a scenario applies it: same model on the calibrated GPU predicts closer
    data = yaml.safe_load((ROOT / "scenarios" / "default.yaml").read_text())
    data["workload"]["precision"] = "fp32"
    plain = load_data(data, base_dir=ROOT)
    calibrated = load_data({**data, "calibration": str(profile_path)}, base_dir=ROOT)
    g0, g1 = plain.cluster.node_groups[0].gpu, calibrated.cluster.node_groups[0].gpu
    assert g1.compute_efficiency["fp32"] == entry.efficiency
    # the fitted kind factors are a proper key of the entry, and reach the scenario's compute model
    assert entry.kind_factor == {k: v["factor"] for k, v in report["kind_factors"].items()} and entry.kind_factor
    assert calibrated.compute_calibration.kind_factor == entry.kind_factor and plain.compute_calibration is None
    case = gc.resolve_model("tiny")
    t0 = gc.total_s(layer_times(case.model, g0, case.batch, "fp32"))
    t1 = gc.total_s(layer_times(case.model, g1, case.batch, "fp32"))
    assert t0 == pytest.approx(before["predicted_s"]) and t1 == pytest.approx(after["predicted_s"])
    assert abs(t1 - measured) < abs(t0 - measured)
    assert simulate(calibrated, "estimate").breakdown_s.compute > simulate(plain, "estimate").breakdown_s.compute


def test_bad_gpu_key_and_model_exit_2(capsys):
    assert gc.main(["--gpu", "no-such-gpu", "--device", "cpu"]) == 2
    assert "expected a catalog key" in capsys.readouterr().err
    assert gc.main(["--gpu", "a100-sxm4-80gb", "--device", "cpu", "--models", "nope"]) == 2
    assert "--models" in capsys.readouterr().err


def test_model_defaults_follow_the_time_budget_table():
    bert = gc.resolve_model("bert-large")
    assert (bert.batch, bert.seq_len, bert.model.tokens_per_sample) == (16, 128, 128)
    assert gc.resolve_model("resnet50").batch == 64 and gc.resolve_model("resnet50").seq_len is None
    assert gc.resolve_model("gpt2", batch=4, seq_len=512).model.tokens_per_sample == 512
    assert math.isclose(gc.sweep_efficiency([{"m": n, "n": n, "k": n, "efficiency": e} for n, e in
                                             ((64, 0.1), (128, 0.2), (256, 0.4))]), 0.3)
