"""A profile's compute entries reach the compute model: kind factors, memory efficiency and launch overhead
become `Scenario.compute_calibration`, which `build_plan` passes to layer_times / optimizer_step_time."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from simdist.compute import ComputeCalibration, forward_backward_s, layer_times, matmul_efficiency
from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.calibration import CalibrationProfile, ComputeEntry, apply_profile, load_profile, profile_from_dict
from simdist.io.load import load_scenario
from simdist.strategies.plan import build_plan

REPO = Path(__file__).resolve().parents[2]
DEFAULT = REPO / "scenarios" / "default.yaml"  # ResNet-50, a100-sxm4-80gb, fp16


def _scenario_with(tmp_path: Path, profile: dict) -> Path:
    (tmp_path / "profile.json").write_text(json.dumps(profile))
    text = DEFAULT.read_text() + f"\ncalibration: {tmp_path / 'profile.json'}\n"
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    return path


def _entry(**extra: object) -> dict:
    s = load_scenario(DEFAULT)
    eff = matmul_efficiency(s.cluster.node_groups[0].gpu, "fp16")  # unchanged: only the extras act
    return {"format": "simdist-calibration/1",
            "compute": [{"gpu": "a100-sxm4-80gb", "dtype": "fp16", "efficiency": eff, **extra}]}


def test_kind_factors_in_a_loaded_profile_change_the_predicted_compute(tmp_path: Path) -> None:
    base = load_scenario(DEFAULT)
    cal = load_scenario(_scenario_with(tmp_path, _entry(kind_factor={"conv": 0.4, "linear": 1.2},
                                                       memory_efficiency=0.5, launch_overhead_s=1e-5)))
    assert base.compute_calibration is None
    assert cal.compute_calibration == ComputeCalibration(kind_factor={"conv": 0.4, "linear": 1.2},
                                                         memory_efficiency={"a100-sxm4-80gb": 0.5},
                                                         launch_overhead_s=1e-5)
    gpu, model = cal.cluster.node_groups[0].gpu, cal.workload.model
    fwd, bwd = forward_backward_s(layer_times(model, gpu, 256, "fp16", cal.compute_calibration))
    plan = build_plan(cal)
    assert plan.fwd_s == pytest.approx(fwd, rel=1e-12) and plan.bwd_s == pytest.approx(bwd, rel=1e-12)
    before = simulate(base, "estimate").breakdown_s.compute
    after = simulate(cal, "estimate").breakdown_s.compute
    # convs at half the default factor (0.8 -> 0.4) dominate ResNet-50: compute time grows, by less than 2x
    assert before * 1.3 < after < before * 2.0
    assert after == pytest.approx(fwd + bwd, rel=1e-9)


def test_a_kind_factor_above_one_is_capped_at_peak() -> None:
    s = load_scenario(DEFAULT)
    gpu, model = s.cluster.node_groups[0].gpu, s.workload.model
    lin = [i for i, layer in enumerate(model.layers) if layer.kind == "linear"]
    t = layer_times(model, gpu, 256, "fp16", ComputeCalibration(kind_factor={"linear": 100.0}, launch_overhead_s=0.0))
    layer = model.layers[lin[0]]
    at_peak = layer.fwd_flops * 256 / gpu.flops("fp16")
    assert t[lin[0]].fwd_s >= at_peak * (1 - 1e-12)


def test_an_empty_profile_or_one_without_extras_changes_nothing(tmp_path: Path) -> None:
    base = load_scenario(DEFAULT)
    for profile in ({"format": "simdist-calibration/1"}, _entry()):
        sub = tmp_path / str(len(profile))
        sub.mkdir()
        s = load_scenario(_scenario_with(sub, profile))
        assert s.compute_calibration is None
        assert s.cluster == base.cluster
        assert build_plan(s) == build_plan(base)
        assert simulate(s, "estimate").iteration_time_s == simulate(base, "estimate").iteration_time_s


def test_entries_of_other_gpus_or_dtypes_are_ignored() -> None:
    s = load_scenario(DEFAULT)
    p = CalibrationProfile(compute=(ComputeEntry("h100-sxm-80gb", "fp16", 0.5, kind_factor={"conv": 0.1}),
                                    ComputeEntry("a100-sxm4-80gb", "fp32", 0.5, kind_factor={"conv": 0.1})))
    assert apply_profile(s, p).compute_calibration is None


def test_compute_entry_round_trip_and_bad_values(tmp_path: Path) -> None:
    e = ComputeEntry("t4-16gb", "fp16", 0.4, {"points": 2}, {"conv": 0.7, "attention": 1.3}, 0.75, 4e-6)
    path = tmp_path / "p.json"
    path.write_text(CalibrationProfile(compute=(e,)).to_json())
    assert load_profile(path).compute == (e,)
    assert "kind_factor" not in CalibrationProfile(compute=(ComputeEntry("g", "fp32", 0.5),)).to_dict()["compute"][0]
    base = {"gpu": "g", "dtype": "fp32", "efficiency": 0.5}
    for bad, where in (({"kind_factor": {"conv": 0}}, "kind_factor.conv"), ({"kind_factor": [1]}, "kind_factor"),
                       ({"memory_efficiency": 1.5}, "memory_efficiency"),
                       ({"launch_overhead_s": -1.0}, "launch_overhead_s"), ({"kind_factor": {"conv": math.inf}}, "conv")):
        with pytest.raises(ScenarioError, match=where):
            profile_from_dict({"compute": [{**base, **bad}]}, "p.json")
