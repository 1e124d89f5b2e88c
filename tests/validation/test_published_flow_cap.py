"""`cluster.nodes.N.nic.flow_cap`: the most one connection moves through the NIC; it reaches the link
the topology is built from, and a cap above the line rate is refused naming key, value and bound."""
from __future__ import annotations

import pytest

from simdist.errors import ScenarioError
from simdist.io.load import load_scenario
from validation.published.cases import HERE

FILE = HERE / "scenarios" / "horovod-tf-pcie.yaml"
NIC = "cluster.nodes.0.nic={bandwidth: 25 Gb/s, latency: 25 us, count: 1, transport: tcp%s}"


def test_flow_cap_reaches_the_nic_link():
    sc = load_scenario(FILE, [NIC % ", flow_cap: 13.7 Gb/s"])
    nic = sc.cluster.node_groups[0].nic
    assert nic.link.flow_cap_Bps == pytest.approx(13.7e9 / 8)
    assert nic.line_link.flow_cap_Bps == pytest.approx(13.7e9 / 8)


def test_no_flow_cap_by_default():
    sc = load_scenario(FILE, [NIC % ""])
    assert sc.cluster.node_groups[0].nic.link.flow_cap_Bps is None


def test_flow_cap_above_line_rate_is_refused():
    with pytest.raises(ScenarioError, match=r"flow_cap.*30 Gb/s.*line rate \(25 Gb/s\)"):
        load_scenario(FILE, [NIC % ", flow_cap: 30 Gb/s"])
