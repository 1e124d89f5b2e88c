"""Transports: inline links take the catalog's default efficiency at their own rate; without GPUDirect
RDMA a NIC leg is staged through host memory over PCIe, which is never faster, and the result says so."""
from __future__ import annotations

import copy

import pytest

from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.catalog import links, transport_default
from simdist.io.load import load_data
from simdist.units import format_bandwidth

BASE = {"cluster": {"nodes": [{"count": 4, "gpu": "v100-sxm2-16gb", "gpus_per_node": 2, "intra_node": "pcie-gen3",
                               "nic": "eth-25g"}]},
        "workload": {"model": "resnet50", "batch_per_gpu": 16}, "run": {"iterations": 3, "warmup": 1}}


def _nic_link(nic, intra="pcie-gen3"):
    d = copy.deepcopy(BASE)
    d["cluster"]["nodes"][0].update(nic=nic, intra_node=intra)
    return load_data(d).cluster.node_groups[0].nic


@pytest.mark.parametrize("key", [k for k, l in links().items() if l.transport in ("tcp", "rdma")])
def test_inline_defaults_match_the_catalog_at_the_same_rate(key):
    entry = links()[key]
    rate = format_bandwidth(entry.bandwidth_Bps)
    inline = _nic_link({"bandwidth": rate, "transport": entry.transport}).line_link
    if entry.efficiency_basis.startswith("catalog entry"):  # an entry with its own measured reason (RoCE)
        assert entry.efficiency != pytest.approx(transport_default(entry.transport).efficiency_at(entry.bandwidth_Bps)) \
            or entry.transport == "rdma"
        return
    assert inline.efficiency == pytest.approx(entry.efficiency, rel=1e-12)
    assert inline.latency_s == pytest.approx(entry.latency_s)


def test_tcp_efficiency_falls_with_rate_as_the_catalog_says():
    td = transport_default("tcp")
    assert _nic_link({"bandwidth": "100 Gb/s", "transport": "tcp"}).line_link.efficiency == pytest.approx(0.55)
    assert links()["eth-100g"].efficiency == pytest.approx(0.55)
    rates = [1e9 / 8 * g for g in (1, 10, 25, 40, 60, 100, 150, 200, 400, 800)]
    effs = [td.efficiency_at(r) for r in rates]
    assert effs == sorted(effs, reverse=True)
    assert effs[0] == effs[2] == pytest.approx(0.85) and effs[-1] == pytest.approx(0.30)
    achieved = [r * e for r, e in zip(rates, effs)]
    assert achieved == sorted(achieved)  # a faster link is never slower


def test_overridden_rate_rederives_a_default_efficiency_but_not_an_entrys():
    assert _nic_link({"link": "eth-10g", "bandwidth": "100 Gb/s"}).line_link.efficiency == pytest.approx(0.55)
    assert _nic_link({"link": "roce-100g", "bandwidth": "50 Gb/s"}).line_link.efficiency == pytest.approx(0.90)
    assert _nic_link({"bandwidth": "100 Gb/s", "transport": "tcp", "efficiency": 0.7}).line_link.efficiency == 0.7


def test_gpudirect_defaults_per_transport_and_tcp_cannot_have_it():
    assert _nic_link("ib-hdr").gpudirect is True and _nic_link("eth-100g").gpudirect is False
    assert _nic_link({"bandwidth": "100 Gb/s"}).gpudirect is True
    assert _nic_link({"bandwidth": "100 Gb/s", "transport": "tcp"}).gpudirect is False
    with pytest.raises(ScenarioError, match="cluster.nodes.0.nic.gpudirect"):
        _nic_link({"bandwidth": "100 Gb/s", "transport": "tcp", "gpudirect": True})


def test_staging_is_the_pcie_hop_folded_into_the_nic_leg():
    # 200 Gb/s HDR at 0.92 = 23 GB/s; PCIe gen3 x16 at 0.80 = 12.6 GB/s: staging caps the leg at PCIe
    nic = _nic_link({"link": "ib-hdr", "gpudirect": False})
    pcie = links()["pcie-gen3"]
    assert nic.link.effective_Bps == pytest.approx(pcie.effective_Bps)
    assert nic.link.latency_s == pytest.approx(links()["ib-hdr"].latency_s + pcie.latency_s)
    assert nic.line_link == links()["ib-hdr"] and "staged" in nic.staging
    slow = _nic_link({"link": "ib-edr", "gpudirect": False}, intra="pcie-gen4")  # 11.5 GB/s < 25.2 GB/s
    assert slow.link.effective_Bps == pytest.approx(links()["ib-edr"].effective_Bps)


@pytest.mark.parametrize("strategy", ["ring", "hierarchical", "ps"])
@pytest.mark.parametrize("nic", ["ib-edr", "ib-hdr", "roce-100g", "ib-ndr"])
@pytest.mark.parametrize("intra", ["pcie-gen3", "pcie-gen4", "nvlink-pairs-a100"])
def test_gpudirect_off_is_never_faster(strategy, nic, intra):
    times = {}
    for gdr in (True, False):
        d = copy.deepcopy(BASE)
        d["cluster"]["nodes"][0].update(nic={"link": nic, "gpudirect": gdr}, intra_node=intra)
        d["communication"] = {"strategy": strategy}
        times[gdr] = simulate(load_data(d), "estimate").iteration_time_s
    assert times[False] >= times[True] * (1 - 1e-12)


def test_result_and_summary_say_which_efficiency_and_path():
    from simdist.report import cluster_summary

    d = copy.deepcopy(BASE)
    d["cluster"]["nodes"][0]["nic"] = {"bandwidth": "100 Gb/s", "transport": "tcp"}
    s = load_data(d)
    summary, _ = cluster_summary(s)
    text = str(summary)
    assert "tcp default at 100 Gb/s" in text and "staged" in text and "pcie-gen3" in text
    links_used = simulate(s, "estimate").to_dict()["links_used"]
    nic = links_used["nic"][0]
    assert nic["gpudirect"] is False and nic["efficiency"] == pytest.approx(0.55)
    assert "staged" in nic["path"] and "tcp default at 100 Gb/s" in nic["efficiency_basis"]
