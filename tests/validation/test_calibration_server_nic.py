"""A profile's NIC figures reach every NIC of the run: host-staged worker NICs and a dedicated PS server's."""
from __future__ import annotations

import pytest

from simdist.io.calibration import CalibrationProfile, LinkCalibration, apply_profile
from simdist.io.load import load_data

PS_OVER_TCP = {
    "cluster": {"nodes": [{"count": 2, "gpu": "v100-sxm2-32gb", "gpus_per_node": 1,
                           "nic": {"bandwidth": "500 Mb/s", "latency": "50 us", "transport": "tcp"}}]},
    "workload": {"benchmark": {"op": "all_reduce", "sizes": ["16 MB"]}},
    "communication": {"strategy": "ps", "ps": {"servers": 2, "placement": "dedicated"}},
}


def test_dedicated_server_nic_takes_the_profiles_link_figures():
    s = load_data(PS_OVER_TCP)
    nic = s.cluster.node_groups[0].nic
    assert nic.wire_link is not None  # tcp: host staging folded into the worker's link
    profile = CalibrationProfile(links=(LinkCalibration(transport="tcp", role="nic", latency_s=1e-4, efficiency=0.97),))
    cal = apply_profile(s, profile).cluster.node_groups[0].nic
    server = cal.host_side().link  # what a dedicated server host's NIC achieves
    assert (cal.link.efficiency, server.efficiency) == (pytest.approx(0.97), pytest.approx(0.97))
    assert server.latency_s == pytest.approx(1e-4)
