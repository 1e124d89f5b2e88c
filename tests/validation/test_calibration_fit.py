"""Calibration profiles (format, apply_profile), the alpha/efficiency fit on synthetic sweeps, the
scenario -> harness mapping and the validate report (no root, no torch launches)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdist.errors import ScenarioError
from simdist.io.calibration import (CalibrationProfile, ComputeEntry, LinkCalibration, apply_profile,
                                    load_profile, profile_from_dict)
from simdist.io.load import load_scenario
from simdist.validation.calibrate import coefficients, fit_alpha_beta, write_profile
from simdist.validation.cases import CaseKind, DdpHook
from simdist.validation.compare import build_report, format_validation, ranking
from simdist.validation.from_scenario import cases_for, layout_for, scale_rates

REPO = Path(__file__).resolve().parents[2]
VAL = REPO / "scenarios" / "validation"
FLAT = VAL / "flat4-ring-500m.yaml"


def _ring_points(n: int, sizes: list[float], bw: float, lat: float, eff: float, hops: int = 2):
    ka = [2 * (n - 1) * hops for _ in sizes]
    kb = [2 * (n - 1) / n * s / bw for s in sizes]
    return ka, kb, [a * lat + b / eff for a, b in zip(ka, kb)]


@given(lat=st.floats(0, 5e-3), eff=st.floats(0.3, 1.0), n=st.integers(2, 16))
@settings(max_examples=40, deadline=None)
def test_fit_recovers_latency_and_efficiency_from_exact_ring_sweep(lat: float, eff: float, n: int) -> None:
    ka, kb, m = _ring_points(n, [1e6, 4e6, 16e6, 64e6], 62.5e6, lat, eff)
    fit = fit_alpha_beta(ka, kb, m)
    assert fit["latency_s"] == pytest.approx(lat, abs=1e-9)
    assert fit["efficiency"] == pytest.approx(eff, rel=1e-9)
    assert fit["rms_rel_residual"] < 1e-9 and fit["points"] == 4


def test_fit_clamps_negative_latency_and_refits_efficiency() -> None:
    # a free burst makes small messages faster than the line rate allows: latency would fit negative
    ka, kb, m = _ring_points(4, [2e6, 4e6, 8e6, 16e6], 62.5e6, 0.0, 0.95)
    m = [t - 0.004 for t in m]
    fit = fit_alpha_beta(ka, kb, m)
    assert fit["latency_s"] == 0.0
    expected = 1 / (np.dot(kb, m) / np.dot(kb, kb))
    assert fit["efficiency"] == pytest.approx(expected)
    assert fit["max_rel_residual"] > 0


def test_fit_with_noise_stays_close() -> None:
    rng = np.random.default_rng(0)
    ka, kb, m = _ring_points(4, [2e6, 4e6, 8e6, 16e6, 32e6], 62.5e6, 1e-3, 0.956)
    noisy = [t * (1 + rng.normal(0, 0.005)) for t in m]
    fit = fit_alpha_beta(ka, kb, noisy)
    assert fit["efficiency"] == pytest.approx(0.956, rel=0.02)
    assert 0.005 / 3 < fit["rms_rel_residual"] < 0.02


def test_coefficients_equal_ring_closed_form_on_one_switch() -> None:
    s = load_scenario(FLAT)
    (ka4, kb4, alg), (ka16, kb16, _) = coefficients(s)
    assert alg == "ring"
    from simdist.collectives.host_reduce import host_reduce_s

    # ring closed form, plus gloo's CPU sums of its reduce-scatter (3/4 of 16 MB) in host memory, at the
    # emulated rank's core's declared memory bandwidth (vendor cpu, 10 GB/s)
    assert kb16 == pytest.approx(2 * 3 / 4 * 16e6 / 62.5e6 + host_reduce_s(3 / 4 * 16e6, 10e9), rel=1e-6)
    # 6 steps x 4 links (GPU-node switch and NIC, at both ends): the probe sets every link's latency
    assert ka4 == pytest.approx(ka16) and ka4 == pytest.approx(2 * 3 * 4, rel=1e-6)


def test_apply_profile_matches_links_by_transport_name_and_role_and_gpu_by_name() -> None:
    s = load_scenario(VAL / "racks2x2-hierarchical.yaml")
    p = CalibrationProfile(
        links=(LinkCalibration(transport="tcp", role="nic", latency_s=2e-3, efficiency=0.9),
               LinkCalibration(name="custom", transport="tcp", efficiency=0.8),
               LinkCalibration(transport="rdma", efficiency=0.1)),
        compute=(ComputeEntry("emulab-cpu-core", "fp32", 0.2), ComputeEntry("a100-sxm4-80gb", "fp32", 0.9)),
        source="x.json")
    c = apply_profile(s, p).cluster
    g = c.node_groups[0]
    assert (g.nic.link.latency_s, g.nic.link.efficiency) == (2e-3, 0.9)  # first match wins
    assert g.intra_node.gpu_link.efficiency == 0.8 and g.intra_node.gpu_link.latency_s == pytest.approx(50e-6)
    assert c.fabric.link.efficiency == 0.8
    assert g.gpu.compute_efficiency == {"fp32": 0.2}
    assert g.nic.link.bandwidth_Bps == s.cluster.node_groups[0].nic.link.bandwidth_Bps
    assert apply_profile(s, p).calibration == "x.json"
    assert apply_profile(s, CalibrationProfile()).cluster.node_groups[0].nic == s.cluster.node_groups[0].nic


def test_profile_round_trip_and_atomic_write(tmp_path: Path) -> None:
    p = CalibrationProfile((LinkCalibration("custom", "tcp", None, 1e-3, 0.95, {"points": 3}),), {"ring": 1.01},
                           (ComputeEntry("t4-16gb", "fp16", 0.4),), {"where": "here"})
    path = write_profile(p, tmp_path / "sub" / "profile.json")
    loaded = load_profile(path)
    assert loaded == CalibrationProfile(p.links, p.algorithms, p.compute, p.provenance, str(path))
    assert loaded.algorithm_factor("ring") == 1.01 and loaded.algorithm_factor("ps") == 1.0
    assert [f.name for f in path.parent.iterdir()] == ["profile.json"]


@pytest.mark.parametrize("data, where", [
    ({"links": [{"efficiency": 1.5}]}, "links[0].efficiency"),
    ({"links": [{"latency_s": -1}]}, "links[0].latency_s"),
    ({"links": [{"role": "uplink"}]}, "links[0].role"),
    ({"compute": [{"gpu": "x", "dtype": "fp32", "efficiency": 0}]}, "compute[0].efficiency"),
    ({"algorithms": {"ring": "fast"}}, "algorithms.ring"),
    ({"format": "other/2"}, "format"),
    ({"bogus": 1}, "bogus"),
])
def test_bad_profiles_name_the_path(data: dict, where: str) -> None:
    with pytest.raises(ScenarioError, match=where.replace("[", r"\[").replace("]", r"\]")):
        profile_from_dict(data, "p.json")


def test_load_profile_missing_or_not_json(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="readable"):
        load_profile(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ScenarioError, match="JSON"):
        load_profile(tmp_path / "bad.json")


EXPECTED = {  # file -> (hosts, racks, host Mbit/s, uplink Mbit/s or None, kind)
    "flat4-ring-500m": (4, 1, 500, None, CaseKind.ALL_REDUCE),
    "flat4-ps1-dedicated-500m": (4, 1, 500, None, CaseKind.PS),
    "flat4-ps2-sharded-500m": (4, 1, 500, None, CaseKind.PS),
    "racks2x2-ring-fattree": (4, 2, 1000, 250, CaseKind.ALL_REDUCE),
    "racks2x2-ring-nodes": (4, 2, 1000, 250, CaseKind.ALL_REDUCE),
    "racks2x2-hierarchical": (4, 2, 1000, 250, CaseKind.HIERARCHICAL),
}


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_layout_and_cases_from_scenario_files(stem: str) -> None:
    s = load_scenario(VAL / f"{stem}.yaml")
    hosts, racks, rate, up, kind = EXPECTED[stem]
    lay = layout_for(s)
    assert (lay.hosts, lay.racks, lay.host_rate_bps) == (hosts, racks, rate * 1e6)
    if up is not None:
        assert lay.effective_uplink_rate_bps == pytest.approx(up * 1e6)
    (case,) = cases_for(s, stem)
    assert case.kind is kind and case.label == stem
    assert case.sizes_bytes == s.workload.benchmark.sizes_bytes
    if kind is CaseKind.PS:
        assert (case.servers, case.placement) == (s.communication.ps_servers, s.communication.ps_placement.value)
    if kind is CaseKind.HIERARCHICAL:
        assert (case.local_size, case.scheme) == (2, "leader")
    assert layout_for(s, rate_scale=0.5).host_rate_bps == rate * 0.5e6


def test_every_validation_scenario_loads_and_maps() -> None:
    files = sorted(VAL.glob("*.yaml"))
    assert len(files) >= 12
    for f in files:
        if "ddp" in f.name:
            continue  # the torch model import is covered once below
        s = load_scenario(f)
        assert s.communication.backend.value == "gloo" and layout_for(s).hosts == 4


def test_ddp_scenario_maps_to_mlp_case_with_hook() -> None:  # needs torch (the dev extras install it)
    s = load_scenario(VAL / "ddp-mlp-powersgd-1g.yaml")
    (case,) = cases_for(s, "x")
    assert (case.kind, case.hook, case.hidden, case.depth, case.batch, case.powersgd_rank) == \
        (CaseKind.DDP, DdpHook.POWERSGD, 1024, 8, 32, 4)


def test_scale_rates_scales_every_link() -> None:
    s = load_scenario(VAL / "racks2x2-ring-fattree.yaml")
    t = scale_rates(s, 0.25)
    assert t.cluster.node_groups[0].nic.link.bandwidth_Bps == s.cluster.node_groups[0].nic.link.bandwidth_Bps / 4
    assert t.cluster.fabric.link.bandwidth_Bps == s.cluster.fabric.link.bandwidth_Bps / 4
    assert t.cluster.node_groups[0].nic.link.latency_s == s.cluster.node_groups[0].nic.link.latency_s


def _rec(name: str, medians: list[float], sizes: list[float], hosts: int = 4) -> dict:
    pts = [{"size_bytes": s, "median_s": m, "min_s": m, "max_s": m} for s, m in zip(sizes, medians)]
    return {"file": name, "name": name, "metric": "time_s", "case": {"kind": "all_reduce"},
            "result": {"points": pts}, "layout": {"hosts": hosts, "host_rate_bps": 5e8, "racks": 1}}


def test_report_errors_mape_and_ranking() -> None:
    recs = [_rec("ring", [1.0, 4.0], [4e6, 16e6]), _rec("ps", [3.3, 13.0], [4e6, 16e6])]
    preds = {"ring": {"rows": [(4e6, 1.1, "ring"), (16e6, 4.0, "ring")]},
             "ps": {"rows": [(4e6, 3.0, "ps"), (16e6, 13.0, "ps")]}}
    rep = build_report(recs, preds)
    errs = [c["error"] for c in rep["cases"]]
    assert errs == pytest.approx([0.1, 0.0, 0.3 / 3.3, 0.0])
    assert rep["mape"] == pytest.approx(sum(errs) / 4) and rep["max_error"] == pytest.approx(0.1)
    assert rep["ranking_ok"] and len(rep["ranking"]) == 2  # grouped by size
    assert set(rep["cases"][0]) >= {"name", "metric", "predicted", "measured", "error"}
    text = format_validation(rep)
    assert "ring/4MB" in text and "MAPE" in text


def test_ranking_flags_misordered_pairs_but_not_ties() -> None:
    cases = [{"name": n, "predicted": p, "measured": m, "group": ["g"], "network_bound": True}
             for n, p, m in [("a", 1.0, 2.0), ("b", 2.0, 1.0), ("c", 2.05, 0.5)]]
    (r,) = ranking(cases)
    assert not r["ok"] and r["misordered_pairs"] == [["a", "b"], ["a", "c"]]  # b vs c: a predicted tie
    cases[1]["measured"], cases[2]["measured"] = 3.0, 3.5
    assert ranking(cases)[0]["ok"]


def test_unpredicted_case_is_reported_not_dropped() -> None:
    rep = build_report([_rec("h", [1.0], [16e6])], {"h": {"error": "ValueError: unknown algorithm"}})
    (c,) = rep["cases"]
    assert c["predicted"] is None and c["error"] is None and "simulation failed" in c["note"]
    assert rep["not_predicted"] == ["h/16MB"] and rep["mape"] is None


def test_validate_with_given_records_compares_against_the_simulator(tmp_path: Path) -> None:
    from simdist.validation.commands import predict, validate

    s = load_scenario(FLAT)
    rows = predict(s, None, 1.0)["rows"]
    rec = _rec(str(FLAT.resolve()), [r[1] * 1.02 for r in rows], [r[0] for r in rows])
    rec["name"] = "flat4-ring-500m"
    rep = validate([str(FLAT)], "local", None, str(tmp_path), records=[rec])
    assert [c["error"] for c in rep["cases"]] == pytest.approx([0.02 / 1.02] * 2)
    assert json.loads((tmp_path / "validation.json").read_text())["mape"] == pytest.approx(0.02 / 1.02)
    assert (tmp_path / "measurements" / "flat4-ring-500m.json").exists()
    assert (tmp_path / "predicted_vs_measured.png").stat().st_size > 0
