"""Codec cost calibration: the codec probe's split, the measured/predicted factor `calibrate` fits, and the
profile's `codecs` entries reaching the simulator's encode/decode times (validation/codec_fit.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from simdist.compression import make_codec
from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.calibration import CalibrationProfile, CodecEntry, apply_profile, profile_from_dict
from simdist.io.load import load_scenario
from simdist.scenario import CompressionMethod, CompressionSpec
from simdist.validation.cases import CaseKind, DdpHook, codec_case, parse_case, split_launches
from simdist.validation.codec_fit import fit_codecs, mlp_shapes, predicted_codec_s, probe_rows
from simdist.validation.compare import build_report, format_validation

VAL = Path(__file__).resolve().parents[2] / "scenarios" / "validation"
POWERSGD = VAL / "ddp-mlp-powersgd-1g.yaml"


def _probe_record(fp16_s: float, powersgd_s: float, hidden: int = 768, depth: int = 8) -> dict:
    case = codec_case(hidden, depth)
    local = {h: {"median_s": 0.2 + t} for h, t in (("none", 0.0), ("fp16", fp16_s), ("powersgd", powersgd_s))}
    return {"file": str(POWERSGD), "name": "codec-x", "metric": "codec", "case": case.to_dict(),
            "layout": {"hosts": 4}, "result": {"params": case.ddp_params, "compute": {"median_s": 0.19},
                                               "local": local, "codec_s": {"none": 0.0, "fp16": fp16_s,
                                                                           "powersgd": powersgd_s}}}


def test_make_codec_cost_factor_scales_encode_and_decode_exactly() -> None:
    shapes = mlp_shapes(256, 3)
    gpu = load_scenario(POWERSGD).cluster.node_groups[0].gpu
    for method in (CompressionMethod.FP16, CompressionMethod.POWERSGD):
        spec = CompressionSpec(method, rank=4 if method is CompressionMethod.POWERSGD else None)
        plain, slow = make_codec(spec), make_codec(spec, 3.0)
        assert slow.encode_time_s(shapes, gpu, 4, 4) == pytest.approx(3 * plain.encode_time_s(shapes, gpu, 4, 4))
        assert slow.decode_time_s(shapes, gpu, 4) == pytest.approx(3 * plain.decode_time_s(shapes, gpu, 4))
        assert slow.wire_bytes(shapes, 4, 4) == plain.wire_bytes(shapes, 4, 4)  # cost only, never bytes
    assert make_codec(CompressionSpec()).encode_time_s(shapes, gpu) == 0.0


def test_predicted_codec_is_priced_where_the_simulator_runs_the_hook() -> None:
    """The emulated cluster's ranks are `vendor: cpu`: the hook's ops are priced on that CPU share
    (compression.placement), not as GPU roofline kernels, so a fitted factor divides by the simulator's own cost."""
    from simdist.compression.cpu import REFERENCE_CORE, CpuProcessor

    s = load_scenario(POWERSGD)
    device = s.cluster.node_groups[0].gpu
    cpu = CpuProcessor(REFERENCE_CORE, min(1.0, device.memory_bandwidth_Bps / REFERENCE_CORE.stream_Bps))
    shapes = mlp_shapes(768, 8)
    for hook, spec in (("int8", CompressionSpec(CompressionMethod.INT8)),
                       ("powersgd", CompressionSpec(CompressionMethod.POWERSGD, rank=4))):
        codec = make_codec(spec)
        by_hand = cpu.time_s(codec.encode_kernels(shapes, 4, 4)) + cpu.time_s(codec.decode_kernels(shapes, 4, 4))
        gpu_roofline = codec.encode_time_s(shapes, device, 4, 4) + codec.decode_time_s(shapes, device, 4, 4)
        assert predicted_codec_s(s, hook, 768, 8, 4, 4) == pytest.approx(by_hand, rel=1e-12)
        assert by_hand != pytest.approx(gpu_roofline, rel=0.05)  # the old GPU pricing would mislead the fit
    step = simulate(s, "estimate").breakdown_s.compression  # the simulated step charges the same hook cost
    assert step == pytest.approx(predicted_codec_s(s, "powersgd", 1024, 8, 4, 4), rel=1e-9)  # the MLP: 8 x 1024


def test_fit_codecs_is_measured_over_predicted_and_the_profile_applies_it() -> None:
    s = load_scenario(POWERSGD)
    pred_fp16 = predicted_codec_s(s, "fp16", 768, 8, 4, 1)  # the probe: one-rank groups
    pred_psgd = predicted_codec_s(s, "powersgd", 768, 8, 4, 1)
    assert 0 < pred_fp16 < pred_psgd
    entries = fit_codecs([(_probe_record(2 * pred_fp16, 5 * pred_psgd), s),
                          (_probe_record(4 * pred_fp16, 5 * pred_psgd), s)], "emulab-cpu-core")
    factors = {e.method: e.factor for e in entries}
    assert factors == pytest.approx({"fp16": 3.0, "powersgd": 5.0})  # medians of the two probes
    profile = profile_from_dict(CalibrationProfile(codecs=entries).to_dict())  # JSON round trip
    assert profile.codecs == tuple(CodecEntry(e.gpu, e.method, e.factor, json.loads(json.dumps(e.fit))) for e in entries)
    cal = apply_profile(s, profile)
    assert cal.compute_calibration.codec_factor == pytest.approx(factors)
    assert predicted_codec_s(cal, "powersgd", 768, 8, 4, 1) == pytest.approx(5 * pred_psgd)
    base, slow = simulate(s, "estimate").breakdown_s, simulate(cal, "estimate").breakdown_s
    assert slow.compression == pytest.approx(5 * base.compression)  # the simulator charges the measured cost
    assert slow.compute == pytest.approx(base.compute)  # and nothing else moves
    other = CalibrationProfile(codecs=(CodecEntry("h100-sxm-80gb", "powersgd", 9.0),))
    assert apply_profile(s, other).compute_calibration is None  # entries of other GPUs are ignored


def test_bad_codec_entries_are_scenario_errors() -> None:
    for bad, where in (({"gpu": "g", "method": "fp16", "factor": 0}, "factor"),
                       ({"gpu": "g", "method": 3, "factor": 1.0}, "method"),
                       ({"gpu": "g", "method": "fp16", "factor": 1.0, "speed": 2}, r"codecs\[0\]"),
                       ({"gpu": "g", "method": "fp8", "factor": 1.0}, "fp8")):
        with pytest.raises(ScenarioError, match=where):
            profile_from_dict({"codecs": [bad]})


def test_codec_probe_case_and_report_rows() -> None:
    c = codec_case()
    assert c.kind is CaseKind.CODEC and c.warmup >= 2 and c.batch == 1  # batch 1: little compute jitter
    assert parse_case("codec:hidden=64,depth=2").kind is CaseKind.CODEC
    assert split_launches([c, parse_case("ddp:hook=fp16")]) == [[c], [parse_case("ddp:hook=fp16")]]
    s = load_scenario(POWERSGD)
    rec = _probe_record(0.03, 0.15)
    rows = probe_rows(rec, s)
    assert [r["hook"] for r in rows] == ["fp16", "powersgd"]
    assert rows[1]["ratio"] == pytest.approx(0.15 / predicted_codec_s(s, "powersgd", 768, 8, 4, 1))
    report = build_report([rec], {"codec:codec-x": {"rows": rows}})
    assert report["cases"] == [] and len(report["codec"]) == 2
    assert "codec probe" in format_validation(report)


def test_ddp_rows_carry_the_measured_and_predicted_split() -> None:
    phase = {"median_s": 0.1}
    rec = {"file": "f.yaml", "name": "ddp-x", "metric": "iteration_time_s", "case": {"kind": "ddp", "hook": "fp16"},
           "layout": {"hosts": 4, "host_rate_bps": 1e9, "racks": 1},
           "result": {"params": 10, "grad_bytes": 40, "step": {"median_s": 0.5, "min_s": 0.4, "max_s": 0.6},
                      "compute": {"median_s": 0.2}, "local": {"median_s": 0.25}, "codec_s": 0.05,
                      "phases": {"forward": phase, "backward": phase, "optimizer": phase,
                                 "buckets": [{"index": 0, "start_s": 0.01, "comm": {"median_s": 0.07}}]}}}
    pred = {"iteration_time_s": 0.45, "breakdown_s": {"compute": 0.2, "compression": 0.04, "exposed_communication": 0.21}}
    report = build_report([rec], {"f.yaml": pred})
    (row,) = report["cases"]
    assert row["communication_measured"] == pytest.approx(0.25) and row["codec_measured"] == 0.05
    assert row["codec_predicted"] == 0.04 and not row["network_bound"]
    assert row["phases_measured"] == {"forward": 0.1, "backward": 0.1, "optimizer": 0.1, "bucket_comm": [0.07]}
    assert report["mape_steps"] == pytest.approx(0.1) and report["mape_network_bound"] is None


@pytest.mark.slow
def test_codec_probe_and_ddp_split_on_the_local_launcher() -> None:
    from simdist.validation.bench import run_cases
    from simdist.validation.emulab.cluster import machine_lock

    probe = parse_case("codec:hidden=64,depth=2,reps=2")
    ddp = parse_case("ddp:hook=powersgd,hidden=64,depth=2,reps=2")
    with machine_lock():
        probe_res, ddp_res = run_cases([probe, ddp], "local", world_size=2, timeout_s=180)["cases"]
    assert set(probe_res["local"]) == {h.value for h in DdpHook}  # every codec's hook
    assert all(v >= 0 for v in probe_res["codec_s"].values()) and probe_res["codec_s"]["none"] == 0.0
    assert len(ddp_res["local"]["times_s"]) == 2 and ddp_res["codec_s"] >= 0
    ph = ddp_res["phases"]  # forward, backward (incl. the bucket's reduction), optimizer, the bucket's comm
    assert all(ph[k]["median_s"] > 0 and len(ph[k]["times_s"]) == 2 for k in ("forward", "backward", "optimizer"))
    (bucket,) = ph["buckets"]
    assert bucket["index"] == 0 and 0 < bucket["comm"]["median_s"] < ph["backward"]["max_s"]
    assert sum(ph[k]["min_s"] for k in ("forward", "backward", "optimizer")) <= ddp_res["step"]["max_s"]
