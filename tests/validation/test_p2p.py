"""Point-to-point microbenchmarks: the case, the local and emulated runs, and the alpha/beta fits."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdist.errors import ScenarioError
from simdist.io.load import load_scenario
from simdist.validation.bench import run_cases
from simdist.validation.cases import Case, CaseKind, P2pMode, p2p_case, parse_case
from tests.validation.emulab_marks import needs_emulab
from simdist.validation.emulab import EmulabLayout
from simdist.validation.p2p_fit import (efficiency_given_latency, fit_alpha_beta, fit_p2p, fit_p2p_records, link_class,
                                p2p_coefficients, p2p_times)

VAL = Path(__file__).resolve().parents[2] / "scenarios" / "validation"




def test_case_pairs_classes_and_modes() -> None:
    c = parse_case("p2p:pairs=0-1/0-2,local_size=2,sizes=1KB/16MB")
    assert c.kind is CaseKind.P2P and c.pair_list == ((0, 1), (0, 2))
    assert (c.pair_class(0, 1), c.pair_class(0, 2)) == ("same_switch", "cross_uplink")
    assert (c.p2p_mode(1e3), c.p2p_mode(16e6)) == (P2pMode.PINGPONG, P2pMode.STREAM)
    assert Case(CaseKind.P2P, mode="stream").p2p_mode(1e3) is P2pMode.STREAM
    assert Case(CaseKind.P2P).pair_list == ((0, 1),) and Case(CaseKind.P2P).pair_class(0, 3) == "same_switch"
    for bad in ("p2p:pairs=0-0", "p2p:pairs=a-1", "p2p:mode=fast"):
        with pytest.raises(ScenarioError):
            parse_case(bad)
    assert p2p_case(4).pairs == "0-1" and p2p_case(4, 2).pairs == "0-1/0-2" and p2p_case(4, 1).pairs == "0-1"
    assert p2p_case(4, 2).local_size == 2
    with pytest.raises(ScenarioError):
        p2p_case(1)


def test_p2p_on_the_local_launcher() -> None:
    case = Case(CaseKind.P2P, (1e3, 2e6), warmup=1, reps=2, pairs="0-1/1-2", local_size=2)
    res = run_cases([case], "local", world_size=3, timeout_s=120)["cases"][0]
    pts = res["points"]
    assert [(p["pair"], p["pair_class"], p["mode"], p["size_bytes"]) for p in pts] == [
        ([0, 1], "same_switch", "pingpong", 1e3), ([0, 1], "same_switch", "stream", 2e6),
        ([1, 2], "cross_uplink", "pingpong", 1e3), ([1, 2], "cross_uplink", "stream", 2e6)]
    for p in pts:
        assert len(p["times_s"]) == (15 if p["mode"] == "pingpong" else 2) and p["min_s"] <= p["median_s"] <= p["max_s"] and p["min_s"] > 0
        assert p["bandwidth_Bps"] == pytest.approx(p["size_bytes"] / p["median_s"])


@given(alpha=st.floats(0, 5e-3), bw=st.floats(1e6, 1e10))
@settings(max_examples=40, deadline=None)
def test_plain_fit_recovers_alpha_and_bandwidth(alpha: float, bw: float) -> None:
    sizes = [1e3, 8e3, 4e6, 8e6, 16e6]
    fit = fit_p2p(sizes, [alpha + s / bw for s in sizes])
    assert fit["alpha_s"] == pytest.approx(alpha, abs=1e-12 + 1e-9 * alpha)
    assert fit["bandwidth_Bps"] == pytest.approx(bw, rel=1e-7)
    assert fit["rms_rel_residual"] < 1e-8


def test_plain_fit_with_noise_and_negative_alpha() -> None:
    rng = np.random.default_rng(1)
    sizes = [1e3, 8e3, 4e6, 8e6, 16e6]
    bw = 62.5e6 * 0.956
    noisy = [(2e-4 + s / bw) * (1 + rng.normal(0, 0.01)) for s in sizes]
    fit = fit_p2p(sizes, noisy)
    assert fit["bandwidth_Bps"] == pytest.approx(bw, rel=0.03) and fit["alpha_s"] == pytest.approx(2e-4, rel=0.1)
    big = [4e6, 8e6, 16e6]
    fast = [s / bw - 5e-3 for s in big]  # tbf's free burst: streams alone extrapolate to a negative alpha
    clamped = fit_p2p(big, fast)
    assert clamped["alpha_s"] == 0.0 and clamped["stream_intercept_s"] == pytest.approx(-5e-3)
    assert clamped["bandwidth_Bps"] == pytest.approx(bw)  # the slope, untouched by the burst
    # ping-pongs inside the burst plus bonus-shortened streams: alpha from the ping-pongs, B from the slope
    both = fit_p2p([1e3, 4e3, *big], [3e-4 + 1e3 / bw, 3e-4 + 4e3 / bw, *fast])
    assert both["alpha_s"] == pytest.approx(3e-4) and both["bandwidth_Bps"] == pytest.approx(bw)
    with pytest.raises(ScenarioError):
        fit_p2p([1e3, 4e3], [1e-3, 1e-3])  # no stream point


def test_efficiency_at_a_fixed_latency() -> None:
    ka, kb = [24.0] * 3, [0.1, 0.2, 0.4]
    m = [24 * 1e-4 + b / 0.9 for b in kb]
    assert efficiency_given_latency(ka, kb, m, 1e-4)["efficiency"] == pytest.approx(0.9)
    assert fit_alpha_beta(ka, kb, m, relative=True)["latency_s"] == pytest.approx(1e-4)


def test_coefficients_of_one_transfer_and_link_classes() -> None:
    flat = load_scenario(VAL / "flat4-ring-500m.yaml")
    (ka, kb), = p2p_coefficients(flat, 0, 1, [16e6])
    assert kb == pytest.approx(16e6 / 62.5e6, rel=1e-6) and ka == pytest.approx(4, rel=1e-6)  # 4 links on the path
    racks = load_scenario(VAL / "racks2x2-ring-fattree.yaml")  # 1 Gb/s hosts, 250 Mb/s uplink
    (_, kb_same), = p2p_coefficients(racks, 0, 1, [16e6])
    (ka_x, kb_x), = p2p_coefficients(racks, 0, 2, [16e6])
    assert kb_x == pytest.approx(4 * kb_same, rel=1e-3) and ka_x > 4
    assert link_class(racks, "cross_uplink") == ("custom", "tcp", "fabric")
    assert link_class(racks, "same_switch") == ("custom", "tcp", None)
    nodes = load_scenario(VAL / "racks2x2-ring-nodes.yaml")
    assert link_class(nodes, "cross_uplink")[2] == "nic" and link_class(nodes, "same_switch")[2] == "intra_node"


def test_record_fit_recovers_link_latency_and_efficiency() -> None:
    """Synthetic p2p records made by simdist's own model with known link figures: the model fit recovers them."""
    from simdist.io.calibration import CalibrationProfile, LinkCalibration, apply_profile

    s = load_scenario(VAL / "racks2x2-ring-fattree.yaml")
    truth = apply_profile(s, CalibrationProfile(links=(LinkCalibration(latency_s=3e-4, efficiency=0.9),)))
    case = p2p_case(4, 2)
    points = [{"pair": list(pr), "pair_class": case.pair_class(*pr), "size_bytes": size, "mode": str(case.p2p_mode(size))}
              for pr in case.pair_list for size in case.sizes_bytes]
    for p, t in zip(points, p2p_times(truth, points)):
        p["median_s"] = t
    layout = EmulabLayout(4, 1e9, nodes_per_leaf=2, oversubscription=8).describe()
    fits = fit_p2p_records([{"result": {"points": points}, "layout": layout}], [s])
    assert list(fits) == [("custom", "tcp", "fabric"), ("custom", "tcp", None)]  # specific entry first
    for f in fits.values():
        assert f["model"]["latency_s"] == pytest.approx(3e-4, rel=1e-6)
        assert f["model"]["efficiency"] == pytest.approx(0.9, rel=1e-6)
    same = fits[("custom", "tcp", None)]["plain"][0]
    assert same["nominal_Bps"] == 125e6 and same["efficiency_vs_nominal"] == pytest.approx(0.9, rel=1e-3)
    assert same["alpha_s"] == pytest.approx(4 * 3e-4, rel=1e-3)


def test_calibrate_takes_link_figures_from_p2p_records(tmp_path: Path) -> None:
    """A run folder with only a p2p record (made by simdist's model with known link figures): the profile's
    link entries carry that latency and efficiency, say they come from p2p, and the cross-uplink entry is first."""
    import json

    from simdist.io.calibration import CalibrationProfile, LinkCalibration, apply_profile
    from simdist.validation.calibrate import calibrate

    f = VAL / "racks2x2-ring-fattree.yaml"
    truth = apply_profile(load_scenario(f), CalibrationProfile(links=(LinkCalibration(latency_s=2e-4, efficiency=0.95),)))
    case = p2p_case(4, 2)
    points = [{"pair": list(pr), "pair_class": case.pair_class(*pr), "size_bytes": size, "mode": str(case.p2p_mode(size))}
              for pr in case.pair_list for size in case.sizes_bytes]
    for p, t in zip(points, p2p_times(truth, points)):
        p |= {"median_s": t, "min_s": t, "max_s": t}
    rec = {"file": str(f), "name": "p2p-x", "metric": "p2p", "case": case.to_dict(), "result": {"points": points},
           "layout": EmulabLayout(4, 1e9, nodes_per_leaf=2, oversubscription=8).describe(), "rate_scale": 1.0}
    (tmp_path / "measurements").mkdir()
    (tmp_path / "measurements" / "p2p-x.json").write_text(json.dumps(rec))
    prof = calibrate(tmp_path)
    assert [c.role for c in prof.links] == ["fabric", None]
    for c in prof.links:
        assert c.latency_s == pytest.approx(2e-4, rel=1e-6) and c.efficiency == pytest.approx(0.95, rel=1e-6)
        assert c.fit["used"] == {"latency_s": "p2p", "efficiency": "p2p"}
    assert prof.algorithms == {} and prof.compute == ()


@needs_emulab
def test_p2p_on_the_emulated_racks() -> None:
    """2 racks x 2 hosts, 500 Mb/s hosts, 250 Mb/s uplink: streams >= 4 MB run at 0.956 x the bottleneck
    rate (within 10 %), and the fitted latency is small and non-negative."""
    layout = EmulabLayout(4, 500e6, nodes_per_leaf=2, uplink_rate_bps=250e6)
    case = p2p_case(4, 2, sizes_bytes=(1e3, 8e3, 4e6, 8e6), reps=3)
    pts = run_cases([case], "emulab", layout, timeout_s=240)["cases"][0]["points"]
    for p in pts:
        if p["size_bytes"] >= 4e6:
            rate = 500e6 if p["pair_class"] == "same_switch" else 250e6
            assert p["bandwidth_Bps"] == pytest.approx(0.956 * rate / 8, rel=0.10), p
    for cls in ("same_switch", "cross_uplink"):
        sel = [p for p in pts if p["pair_class"] == cls]
        fit = fit_p2p([p["size_bytes"] for p in sel], [p["median_s"] for p in sel])
        assert 0 <= fit["alpha_s"] < 5e-3, fit  # software latency of gloo on 2 shared cores
        assert fit["bandwidth_Bps"] == pytest.approx(0.956 * (500e6 if cls == "same_switch" else 250e6) / 8, rel=0.10)
