"""Parsing: malformed catalog files name the file and entry; inline specs name their YAML path."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from simdist.errors import ScenarioError
from simdist.hardware.specs import GpuSpec, IntraNodeLayout, LinkSpec
from simdist.io import catalog
from simdist.io.load import load_data

DEFAULT_SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "default.yaml"

GOOD_GPU = {
    "name": "Test GPU", "vendor": "nvidia", "peak_flops": {"fp32": "10 TFLOP/s", "fp16": "100 TFLOP/s"},
    "memory": "16 GiB", "memory_bandwidth": "900 GB/s", "tdp_w": 300, "price_per_hour_usd": 1.0,
    "price_basis": "made up", "price_date": "unknown", "compute_efficiency": {"fp32": 0.9, "fp16": 0.8},
    "efficiency_source": "made up",
    "source": "test",
}
GOOD_LINKS = {
    "transport_defaults": {t: {"efficiency": 0.9, "latency": "1 us", "reason": "r", "source": "s"}
                           for t in catalog.TRANSPORTS},
    "links": {"fast": {"bandwidth": "100 Gb/s", "latency": "2 us", "transport": "rdma", "source": "s"}},
}


def inline_gpu(d: dict) -> GpuSpec:
    """A scenario's inline GPU, read as a scenario reads it: the schema's GPU model, then io.catalog.gpu_spec."""
    data = yaml.safe_load(DEFAULT_SCENARIO.read_text())
    data["cluster"]["nodes"][0]["gpu"] = d
    return load_data(data).cluster.node_groups[0].gpu


def issue_paths(excinfo) -> list[str]:
    return [i.path for i in excinfo.value.issues]


def test_good_gpu_file_parses():
    g = catalog.parse_gpu_catalog({"x": GOOD_GPU}, "gpus.yaml")["x"]
    assert g.peak_flops == {"fp32": 10e12, "fp16": 100e12} and g.memory_bytes == 16 * 2**30
    assert g.memory_bandwidth_Bps == 900e9 and g.compute_efficiency == {"fp32": 0.9, "fp16": 0.8}
    assert g.source == "test. price: made up. efficiency: made up"


@pytest.mark.parametrize("field, value, where", [
    ("memory", 16, "memory"),  # a bare number: the unit is missing
    ("memory_bandwidth", "900 GBps", "memory_bandwidth"),
    ("peak_flops", {"fp32": "10 TFLOP/s", "int4": "1 TFLOP/s"}, "peak_flops.int4"),
    ("peak_flops", {"fp32": "-1 TFLOP/s"}, "peak_flops.fp32"),
    ("compute_efficiency", {"fp32": 1.5}, "compute_efficiency.fp32"),
    ("compute_efficiency", {"fp32": 0.5, "fp8": 0.5}, "compute_efficiency.fp8"),
    ("tdp_w", "300 W", "tdp_w"),
    ("price_per_hour_usd", -1, "price_per_hour_usd"),
    ("price_date", "2024", "price_date"),  # a month, not a year
    ("price_date", "2024-13", "price_date"),
    ("price_date", "last year", "price_date"),
    ("colour", "green", "colour"),
])
def test_malformed_gpu_entry_names_file_entry_and_field(field, value, where):
    entry = {**copy.deepcopy(GOOD_GPU), field: value}
    with pytest.raises(ScenarioError) as e:
        catalog.parse_gpu_catalog({"ok": GOOD_GPU, "bad-gpu": entry}, "data/gpus.yaml")
    assert issue_paths(e) == [f"data/gpus.yaml:bad-gpu.{where}"]


def test_all_problems_of_a_file_reported_at_once():
    bad1 = {k: v for k, v in GOOD_GPU.items() if k != "memory"}
    bad2 = {**GOOD_GPU, "memory": "lots", "tdp_w": 0}
    with pytest.raises(ScenarioError) as e:
        catalog.parse_gpu_catalog({"a": bad1, "b": bad2}, "g.yaml")
    assert sorted(issue_paths(e)) == ["g.yaml:a.memory", "g.yaml:b.memory", "g.yaml:b.tdp_w"]
    assert "required" in str(e.value)


def test_gpu_file_not_a_mapping():
    with pytest.raises(ScenarioError, match="g.yaml"):
        catalog.parse_gpu_catalog(["a", "b"], "g.yaml")


def test_link_file_parses_and_inherits_transport_default():
    links, tds = catalog.parse_link_catalog(GOOD_LINKS, "links.yaml")
    assert links["fast"] == LinkSpec(12.5e9, 2e-6, 0.9, "fast", "rdma", links["fast"].source)
    assert tds["tcp"].latency_s == 1e-6


@pytest.mark.parametrize("change, where", [
    ({"bandwidth": "100 Gbit"}, "links.fast.bandwidth"),
    ({"transport": "carrier-pigeon"}, "links.fast.transport"),
    ({"efficiency": 0.5}, "links.fast.efficiency_reason"),  # an override needs its reason
    ({"efficiency": 0, "efficiency_reason": "r"}, "links.fast.efficiency"),
    ({"latency": "soon"}, "links.fast.latency"),
])
def test_malformed_link_entry(change, where):
    data = copy.deepcopy(GOOD_LINKS)
    data["links"]["fast"].update(change)
    with pytest.raises(ScenarioError) as e:
        catalog.parse_link_catalog(data, "links.yaml")
    assert issue_paths(e) == [f"links.yaml:{where}"]


def test_missing_transport_default():
    data = copy.deepcopy(GOOD_LINKS)
    del data["transport_defaults"]["socket"]
    with pytest.raises(ScenarioError) as e:
        catalog.parse_link_catalog(data, "links.yaml")
    assert issue_paths(e) == ["links.yaml:transport_defaults.socket"]


def test_intra_node_file_errors():
    links, tds = catalog.parse_link_catalog(GOOD_LINKS, "links.yaml")
    entry = {"description": "d", "layout": "switch", "gpu_link": {"link": "fast", "bricks": 4},
             "pcie_link": "fast", "gpus_per_pcie_switch": 2, "sockets": 1, "socket_link": None,
             "nic_attach": "pcie_switch", "gpus": 8, "source": "s"}
    specs, desc = catalog.parse_intra_node_catalog({"n": entry}, "in.yaml", links, tds)
    assert specs["n"].gpu_link.bandwidth_Bps == 50e9 and specs["n"].gpu_link.name == "fastx4"
    assert desc == {"n": "d"}
    bad = {**entry, "layout": "hypercube", "pcie_link": "slow", "sockets": 2}
    with pytest.raises(ScenarioError) as e:
        catalog.parse_intra_node_catalog({"n": entry, "m": bad}, "in.yaml", links, tds)
    assert issue_paths(e) == ["in.yaml:m.layout", "in.yaml:m.pcie_link"]
    with pytest.raises(ScenarioError) as e:
        catalog.parse_intra_node_catalog({"m": {**entry, "sockets": 2}}, "in.yaml", links, tds)
    assert issue_paths(e) == ["in.yaml:m.socket_link"]


# ---- inline specs in scenarios -------------------------------------------------------------------

def test_inline_link_with_transport_defaults():
    link = catalog.parse_link_inline({"bandwidth": "200 Gb/s", "transport": "rdma"}, "cluster.nodes.0.nic")
    rdma = catalog.transport_default("rdma")
    assert (link.bandwidth_Bps, link.latency_s, link.efficiency) == (25e9, rdma.latency_s, rdma.efficiency)
    assert link.name == "custom" and "cluster.nodes.0.nic" in link.source


def test_inline_link_explicit_values_win():
    d = {"bandwidth": "300 GB/s", "latency": "2 us", "efficiency": 0.9}
    link = catalog.parse_link_inline(d, "cluster.nodes.0.intra_node")
    assert (link.bandwidth_Bps, link.latency_s, link.efficiency, link.transport) == (300e9, 2e-6, 0.9, "")


def test_inline_link_without_transport_or_latency_is_an_error():
    with pytest.raises(ScenarioError) as e:
        catalog.parse_link_inline({"bandwidth": "1 Gb/s"}, "cluster.fabric.link")
    assert issue_paths(e) == ["cluster.fabric.link.latency"]


def test_inline_link_from_catalog_key_with_override():
    link = catalog.parse_link_inline({"link": "ib-hdr", "efficiency": 0.8}, "cluster.nodes.1.nic")
    hdr = catalog.links()["ib-hdr"]
    assert link == hdr.with_(efficiency=0.8)


def test_inline_link_default_and_changed_transport():
    default = catalog.links()["ib-hdr"]
    assert catalog.parse_link_inline({}, "nic", default) == default
    tcp = catalog.parse_link_inline({"transport": "tcp"}, "nic", default)
    td = catalog.transport_default("tcp")
    assert (tcp.bandwidth_Bps, tcp.efficiency, tcp.latency_s) == (25e9, td.efficiency_at(25e9), td.latency_s)
    faster = catalog.parse_link_inline({"bandwidth": "400 Gb/s"}, "nic", default)
    assert faster.bandwidth_Bps == 50e9 and faster.efficiency == default.efficiency and faster.name == "custom"


@pytest.mark.parametrize("d, where, text", [
    ({"bandwidth": 200, "transport": "rdma"}, "nic.bandwidth", "no unit"),
    ({"bandwidth": "200 Gbps", "transport": "rdma"}, "nic.bandwidth", "Gb/s"),
    ({"bandwidth": "200 Gb/s", "transport": "infiniband"}, "nic.transport", "rdma"),
    ({"bandwidth": "200 Gb/s", "latency": "3 us", "efficiency": 1.2}, "nic.efficiency", "0 < e <= 1"),
    ({"bandwidth": "200 Gb/s", "latency": "3 us", "speed": 1}, "nic.speed", "unknown key"),
    ({"link": "ib-hrd"}, "nic.link", "ib-hdr"),
    ({"latency": "3 us", "transport": "rdma"}, "nic.bandwidth", "missing"),
])
def test_inline_link_errors_name_the_path(d, where, text):
    with pytest.raises(ScenarioError) as e:
        catalog.parse_link_inline(d, "nic")
    assert issue_paths(e) == [where] and text in str(e.value)


def test_inline_link_ignore_keys():
    d = {"bandwidth": "100 Gb/s", "transport": "rdma", "count": 4}
    assert catalog.parse_link_inline(d, "nic", ignore=("count",)).bandwidth_Bps == 12.5e9
    with pytest.raises(ScenarioError):
        catalog.parse_link_inline(d, "nic")


@settings(max_examples=60, deadline=None)
@given(gbps=st.floats(0.001, 1e4), lat_us=st.floats(0, 1e3), eff=st.floats(0.01, 1.0))
def test_inline_link_round_trip(gbps, lat_us, eff):
    d = {"bandwidth": f"{gbps!r} Gb/s", "latency": f"{lat_us!r} us", "efficiency": eff}
    link = catalog.parse_link_inline(d, "p")
    assert link.bandwidth_Bps == pytest.approx(gbps * 1e9 / 8, rel=1e-12)
    assert link.latency_s == pytest.approx(lat_us * 1e-6, rel=1e-12, abs=1e-18)
    assert link.effective_Bps == pytest.approx(link.bandwidth_Bps * eff, rel=1e-12)


def test_inline_gpu_full_and_with_base():
    g = inline_gpu({"peak_flops": {"fp16": "100 TFLOP/s"}, "memory": "24 GB",
                                  "memory_bandwidth": "1 TB/s", "compute_efficiency": 0.5})
    assert g.key == "custom" and g.flops("bf16") == 100e12 and g.memory_bytes == 24e9
    assert g.compute_efficiency == {"fp16": 0.5} and g.price_per_hour_usd == 0.0
    base = catalog.gpus()["a100-sxm4-80gb"]
    cheap = inline_gpu({"base": "a100-sxm4-80gb", "price_per_hour_usd": 1.5,
                                      "peak_flops": {"fp8": "600 TFLOP/s"}})
    assert cheap.price_per_hour_usd == 1.5 and cheap.key == base.key
    assert cheap.peak_flops == {**base.peak_flops, "fp8": 600e12} and base.flops("fp8") == 312e12


@pytest.mark.parametrize("d, where", [
    ({"peak_flops": {"fp16": "100 TFLOPS!"}, "memory": "24 GB", "memory_bandwidth": "1 TB/s"},
     "cluster.nodes.0.gpu.peak_flops.fp16"),
    ({"peak_flops": {"fp16": "100 TFLOP/s"}, "memory_bandwidth": "1 TB/s"}, "cluster.nodes.0.gpu.memory"),
    ({"base": "a100", "tdp_w": 10}, "cluster.nodes.0.gpu.base"),
    ({"base": "a100-sxm4-80gb", "memory": 80}, "cluster.nodes.0.gpu.memory"),
])
def test_inline_gpu_errors_name_the_path(d, where):
    with pytest.raises(ScenarioError) as e:
        inline_gpu(d)
    assert issue_paths(e) == [where]


def test_unknown_keys_suggest_close_matches():
    with pytest.raises(ScenarioError) as e:
        inline_gpu({"base": "a100-sxm4-80", "tdp_w": 10})
    assert issue_paths(e) == ["cluster.nodes.0.gpu.base"] and "a100-sxm4-80gb" in str(e.value)
    with pytest.raises(ScenarioError) as e:
        catalog.parse_link_inline({"bandwidth": "1 Gb/s", "latncy": "2 us"}, "cluster.fabric.link")
    assert issue_paths(e) == ["cluster.fabric.link.latncy"] and "did you mean 'latency'" in str(e.value)
    with pytest.raises(ScenarioError, match="transport"):
        catalog.transport_default("udp", "transport")


def test_inline_intra_node():
    s = catalog.parse_intra_node_inline({"bandwidth": "300 GB/s", "latency": "2 us"}, "cluster.nodes.0.intra_node")
    assert s.layout is IntraNodeLayout.SWITCH and s.gpu_link.bandwidth_Bps == 300e9
    assert s.gpu_link.transport == "nvlink" and s.gpu_link.efficiency == catalog.transport_default("nvlink").efficiency
    full = catalog.parse_intra_node_inline({"layout": "pcie", "gpu_link": "pcie-gen4", "pcie_link": "pcie-gen4",
                                       "gpus_per_pcie_switch": 4}, "n")
    assert full.layout is IntraNodeLayout.PCIE and full.sockets == 1 and full.gpus_per_pcie_switch == 4
    with pytest.raises(ScenarioError) as e:
        catalog.parse_intra_node_inline({"layout": "pcie", "gpu_link": {"link": "pcie-gen4", "bricks": 0}}, "n")
    assert issue_paths(e) == ["n.gpu_link.bricks"]


def test_price_basis_and_date_are_kept_and_a_given_price_drops_the_catalog_basis():
    g = catalog.parse_gpu_catalog({"x": {**GOOD_GPU, "price_date": "2024-06"}}, "gpus.yaml")["x"]
    assert (g.price_basis, g.price_date) == ("made up", "2024-06")
    assert catalog.parse_gpu_catalog({"x": {**GOOD_GPU, "price_date": "unknown"}}, "g")["x"].price_date == "unknown"
    mine = inline_gpu({"base": "a100-sxm4-80gb", "price_per_hour_usd": 1.5})
    assert (mine.price_per_hour_usd, mine.price_basis, mine.price_date) == (1.5, "given", "")


def test_every_catalog_price_has_a_basis_and_an_honest_date():
    head, rows = catalog.catalog_table("gpus")
    basis, date = head.index("price basis"), head.index("price date")
    for row in rows:
        assert row[basis] not in ("", "-")
        assert row[date] == "unknown" or len(row[date]) == 7
