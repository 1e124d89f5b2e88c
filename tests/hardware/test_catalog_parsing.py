"""Parsing: malformed catalog files name the file and entry; inline GPUs name their YAML path."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from simdist.errors import ScenarioError
from simdist.hardware.specs import GpuSpec, LinkSpec
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


# ---- inline GPUs in scenarios (inline links: tests/io/test_inline_links.py) ----------------------------

def test_inline_gpu_full_and_with_base():
    g = inline_gpu({"peak_flops": {"fp32": "10 TFLOP/s", "fp16": "100 TFLOP/s"}, "memory": "24 GB",
                                  "memory_bandwidth": "1 TB/s", "compute_efficiency": 0.5})
    assert g.key == "custom" and g.flops("bf16") == 100e12 and g.memory_bytes == 24e9
    assert g.compute_efficiency == {"fp32": 0.5, "fp16": 0.5} and g.price_per_hour_usd == 0.0
    base = catalog.gpus()["a100-sxm4-80gb"]
    cheap = inline_gpu({"base": "a100-sxm4-80gb", "price_per_hour_usd": 1.5,
                                      "peak_flops": {"fp8": "600 TFLOP/s"}})
    assert cheap.price_per_hour_usd == 1.5 and cheap.key == base.key
    assert cheap.peak_flops == {**base.peak_flops, "fp8": 600e12} and base.flops("fp8") == 312e12


@pytest.mark.parametrize("d, where", [
    ({"peak_flops": {"fp32": "10 TFLOP/s", "fp16": "100 TFLOPS!"}, "memory": "24 GB", "memory_bandwidth": "1 TB/s"},
     "cluster.nodes.0.gpu.peak_flops.fp16"),
    ({"peak_flops": {"fp32": "10 TFLOP/s", "fp16": "100 TFLOP/s"}, "memory_bandwidth": "1 TB/s"},
     "cluster.nodes.0.gpu.memory"),
    ({"base": "a100", "memory": "40 GB"}, "cluster.nodes.0.gpu.base"),
    ({"base": "a100-sxm4-80gb", "memory": 80}, "cluster.nodes.0.gpu.memory"),
])
def test_inline_gpu_errors_name_the_path(d, where):
    with pytest.raises(ScenarioError) as e:
        inline_gpu(d)
    assert issue_paths(e) == [where]


def test_unknown_keys_suggest_close_matches():
    with pytest.raises(ScenarioError) as e:
        inline_gpu({"base": "a100-sxm4-80", "memory": "40 GB"})
    assert issue_paths(e) == ["cluster.nodes.0.gpu.base"] and "a100-sxm4-80gb" in str(e.value)
    with pytest.raises(ScenarioError, match="transport"):
        catalog.transport_default("udp", "transport")


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
