"""The CI test of prediction error: calibrate on the emulated cluster, then validate a reduced matrix.

Flat 4 hosts on one switch (ring at 2 sizes, PS with 1 server, sharded over 2 dedicated servers, and over all 4 hosts (reported, excluded: see docs)),
2 x 2 racks with an 8:1 uplink (flat ring as fat_tree and as 2-GPU nodes, hierarchical), and the
DDP MLP with fp16 compression. Collectives: within 10 % per case, network-bound MAPE <= 5 %, ranking
as measured. DDP steps are checked loosely (docs/validation.md: CPU compute and codec time).
"""
from __future__ import annotations

from pathlib import Path

from tests.validation.emulab_marks import needs_emulab

VAL = Path(__file__).resolve().parents[2] / "scenarios" / "validation"
MATRIX = ["flat4-ring-500m", "flat4-ps1-colocated-500m", "flat4-ps2-dedicated-500m", "flat4-ps4-sharded-500m",
          "racks2x2-ring-fattree", "racks2x2-ring-nodes", "racks2x2-hierarchical", "ddp-mlp-fp16-1g"]


@needs_emulab
def test_calibrated_predictions_match_the_emulated_cluster(tmp_path: Path) -> None:
    from validation.commands import calibrate_command, validate

    cal_dir, profile = tmp_path / "cal", tmp_path / "profile.json"
    validate([str(VAL / "calib-flat4-ring-500m.yaml"), str(VAL / "ddp-mlp-none-1g.yaml")], "emulab", None, str(cal_dir))
    assert "efficiency" in calibrate_command(str(cal_dir), str(profile))
    rep = validate([str(VAL / f"{m}.yaml") for m in MATRIX], "emulab", str(profile), str(tmp_path / "val"))
    net = [c for c in rep["cases"] if c["network_bound"] and c["predicted"] is not None and not c["out_of_envelope"]]
    assert len(net) >= 7
    bad = {c["name"]: round(c["error"], 3) for c in net if c["error"] > 0.10}
    assert not bad, bad
    assert rep["mape_network_bound"] <= 0.05
    assert "flat4-ps4-sharded-500m/16MB" in rep["excluded_from_network_bound"]  # explicit, with its reason
    assert rep["ranking_ok_network_bound"], rep["ranking"]
    (ddp,) = [c for c in rep["cases"] if c["metric"] == "iteration_time_s"]
    assert ddp["measured"] > ddp["compute_measured"] and ddp["predicted"] > 0
