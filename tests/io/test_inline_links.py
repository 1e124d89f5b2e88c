"""Inline links and node interiors in a scenario, read as a scenario reads them (the schema's LinkModel /
IntraNodeModel, then io.resolve_cluster.build_link): transport defaults, catalog bases, errors at their key."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from simdist.errors import ScenarioError
from simdist.hardware.specs import IntraNodeLayout
from simdist.io import catalog
from simdist.io.load import load_data

REAL_CATALOGS = True
BASE = yaml.safe_load((Path(__file__).resolve().parents[2] / "scenarios" / "default.yaml").read_text())


def _fabric_link(link: dict):
    data = copy.deepcopy(BASE)
    data["cluster"]["fabric"]["link"] = link
    return load_data(data).cluster.fabric.link


def test_a_link_given_its_rate_takes_its_transport_defaults():
    link = _fabric_link({"bandwidth": "200 Gb/s", "transport": "rdma"})
    rdma = catalog.transport_default("rdma")
    assert (link.bandwidth_Bps, link.latency_s, link.efficiency) == (25e9, rdma.latency_s, rdma.efficiency_at(25e9))
    assert link.name == "custom" and link.efficiency_basis == rdma.basis_at(25e9)


def test_explicit_values_win():
    link = _fabric_link({"bandwidth": "300 GB/s", "latency": "2 us", "efficiency": 0.9})
    assert (link.bandwidth_Bps, link.latency_s, link.efficiency) == (300e9, 2e-6, 0.9)
    assert link.efficiency_basis == "given at cluster.fabric.link.efficiency"


def test_a_catalog_base_with_an_override_and_a_changed_transport():
    hdr = catalog.links()["ib-hdr"]
    link = _fabric_link({"link": "ib-hdr", "efficiency": 0.8})
    assert (link.bandwidth_Bps, link.latency_s, link.efficiency, link.name) == (hdr.bandwidth_Bps, hdr.latency_s, 0.8,
                                                                                "ib-hdr")
    tcp = _fabric_link({"link": "ib-hdr", "transport": "tcp"})
    td = catalog.transport_default("tcp")
    assert (tcp.bandwidth_Bps, tcp.efficiency, tcp.latency_s) == (25e9, td.efficiency_at(25e9), td.latency_s)


@pytest.mark.parametrize("link, where, text", [
    ({"bandwidth": 200, "transport": "rdma"}, "bandwidth", "no unit"),
    ({"bandwidth": "200 Gbps", "transport": "rdma"}, "bandwidth", "did you mean '200 Gb/s'"),
    ({"bandwidth": "200 Gb/s", "transport": "infiniband"}, "transport", "'rdma'"),
    ({"bandwidth": "200 Gb/s", "latency": "3 us", "efficiency": 1.2}, "efficiency", "expected a number <= 1"),
    ({"bandwidth": "200 Gb/s", "latncy": "3 us"}, "latncy", "did you mean 'latency'"),
    ({"link": "ib-hrd"}, "link", "'ib-hdr'"),
    ({"latency": "3 us", "transport": "rdma"}, "bandwidth", "required key is missing"),
])
def test_a_bad_inline_link_is_reported_at_its_key(link, where, text):
    with pytest.raises(ScenarioError) as e:
        _fabric_link(link)
    assert [i.path for i in e.value.issues] == [f"cluster.fabric.link.{where}"] and text in str(e.value)


@settings(max_examples=40, deadline=None)
@given(gbps=st.floats(0.001, 1e4), lat_us=st.floats(0, 1e3), eff=st.floats(0.01, 1.0))
def test_inline_link_round_trip(gbps, lat_us, eff):
    link = _fabric_link({"bandwidth": f"{gbps!r} Gb/s", "latency": f"{lat_us!r} us", "efficiency": eff})
    assert link.bandwidth_Bps == pytest.approx(gbps * 1e9 / 8, rel=1e-12)
    assert link.latency_s == pytest.approx(lat_us * 1e-6, rel=1e-12, abs=1e-18)
    assert link.effective_Bps == pytest.approx(link.bandwidth_Bps * eff, rel=1e-12)


def test_an_inline_node_interior_is_one_nvlink_switch():
    data = copy.deepcopy(BASE)
    data["cluster"]["nodes"][0]["intra_node"] = {"bandwidth": "300 GB/s", "latency": "2 us"}
    s = load_data(data).cluster.node_groups[0].intra_node
    assert s.layout is IntraNodeLayout.SWITCH and s.gpu_link.bandwidth_Bps == 300e9
    assert s.gpu_link.transport == "nvlink" and s.gpu_link.efficiency == catalog.transport_default("nvlink").efficiency
    data["cluster"]["nodes"][0]["intra_node"] = {"layout": "pcie", "bandwidth": "300 GB/s"}
    with pytest.raises(ScenarioError) as e:  # the other layouts are catalog keys
        load_data(data)
    assert [i.path for i in e.value.issues] == ["cluster.nodes.0.intra_node.layout"]
