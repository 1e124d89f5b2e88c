"""The shipped catalog: every entry loads, figures are positive and consistent, spot values hold."""
from __future__ import annotations

import pytest

from simdist.hardware.specs import GpuSpec, IntraNodeLayout, LinkSpec, TopologyKind
from simdist.io import catalog

REQUIRED_GPUS = (
    "k80-12gb p100-sxm2-16gb p100-pcie-16gb v100-sxm2-16gb v100-sxm2-32gb a100-sxm4-40gb a100-sxm4-80gb "
    "a100-pcie-40gb h100-sxm5-80gb h100-pcie-80gb h200-sxm-141gb l4-24gb t4-16gb a10-24gb rtx2080ti-11gb "
    "rtx3090-24gb rtxa6000-48gb rtx4090-24gb h800-sxm5-80gb gh200-96gb mi250x-128gb mi300x-192gb mi325x-256gb "
    "mi355x-288gb b200-180gb b300-288gb gb200-186gb gb300-288gb").split()
REQUIRED_LINKS = (
    "nvlink1 nvlink2 nvlink3 nvlink4 pcie-gen3 pcie-gen4 pcie-gen5 ib-edr ib-hdr ib-ndr qpi upi infinity-fabric "
    + " ".join(f"{p}-{s}g" for p in ("roce", "eth") for s in (10, 25, 40, 100, 200, 400))).split()
REQUIRED_INTRA = ("nvswitch-v100 nvswitch-a100 nvswitch-h100 cube-mesh-p100 cube-mesh-v100 nvlink-pairs-a100 "
                  "pcie-gen3 pcie-gen4 pcie-gen5").split()
T = 1e12
GIB = 2.0**30
NO_TENSOR_CORES = {"k80-12gb", "p100-sxm2-16gb", "p100-pcie-16gb"}
BLOCK_SCALED = ("mxfp8", "nvfp4")  # Blackwell only: no fallback


def test_required_entries_present():
    assert set(REQUIRED_GPUS) <= set(catalog.gpus())
    assert set(REQUIRED_LINKS) <= set(catalog.links())
    assert set(REQUIRED_INTRA) <= set(catalog.intra_nodes())


@pytest.mark.parametrize("key", sorted(k for k, g in catalog.gpus().items() if g.vendor != "google"))
def test_gpu_figures_positive_and_consistent(key):  # TPUs (vendor google): tests/hardware/test_tpu_catalog.py
    g = catalog.gpus()[key]
    assert isinstance(g, GpuSpec) and g.key == key and g.name and g.vendor in ("nvidia", "amd")
    assert set(g.peak_flops) <= set(catalog.DTYPES) and "fp32" in g.peak_flops
    assert all(f > 0 for f in g.peak_flops.values())
    assert 1 * T <= g.peak_flops["fp32"] <= 200 * T
    for low, high in (("fp32", "tf32"), ("fp32", "fp16"), ("fp16", "fp8"), ("tf32", "fp16")):
        if low in g.peak_flops and high in g.peak_flops:
            assert g.peak_flops[high] >= g.peak_flops[low], (low, high)
    if key not in NO_TENSOR_CORES:  # tensor/matrix cores: fp16 about 2x fp32 or more
        assert g.flops("fp16") >= 1.9 * g.flops("fp32")
    if "bf16" in g.peak_flops and "fp16" in g.peak_flops:
        assert g.peak_flops["bf16"] == g.peak_flops["fp16"]
    assert 100e9 <= g.memory_bandwidth_Bps <= 10e12
    assert 8 * GIB <= g.memory_bytes <= 320 * GIB
    assert 50 <= g.tdp_w <= 1500 and 0 < g.price_per_hour_usd < 30
    assert set(g.compute_efficiency) == set(g.peak_flops)
    assert all(0.3 <= e <= 1 for e in g.compute_efficiency.values())
    assert "price:" in g.source and "efficiency:" in g.source
    for dtype in catalog.DTYPES:  # every dtype resolves, through the fallback chain if need be, except the
        if dtype in BLOCK_SCALED and dtype not in g.peak_flops:  # block-scaled ones, which have no fallback
            with pytest.raises(KeyError):
                g.flops(dtype)
            continue
        assert g.flops(dtype) > 0
    if "mxfp8" in g.peak_flops:  # block scaling runs on the fp8 tensor cores at their rate
        assert g.peak_flops["mxfp8"] == g.peak_flops["fp8"]
    if "nvfp4" in g.peak_flops:
        assert g.peak_flops["nvfp4"] >= 2 * g.peak_flops["fp8"] and "mxfp8" in g.peak_flops


@pytest.mark.parametrize("key", sorted(catalog.links()))
def test_link_figures(key):
    link = catalog.links()[key]
    assert isinstance(link, LinkSpec) and link.name == key and link.transport in catalog.TRANSPORTS
    assert 1e8 <= link.bandwidth_Bps <= 1e12 and 0 < link.latency_s <= 1e-4
    assert 0 < link.efficiency <= 1 and link.effective_Bps == pytest.approx(link.bandwidth_Bps * link.efficiency)
    assert "Efficiency" in link.source


@pytest.mark.parametrize("key", sorted(k for k in catalog.intra_nodes() if not k.startswith("tpu-")))
def test_intra_node_entries(key):  # TPU chips as one-chip torus nodes: tests/hardware/test_tpu_catalog.py
    s = catalog.intra_nodes()[key]
    assert s.key == key and s.source
    assert s.pcie_link is not None and s.pcie_link.transport == "pcie"
    if key.startswith("nvl72-"):  # a rack as one node: its Grace CPUs are one host vertex, no socket link
        assert s.sockets == 1 and s.socket_link is None and s.gpus is None and s.max_gpus == 72
    else:
        assert s.sockets == 2 and s.socket_link is not None and s.socket_link.transport == "socket"
    assert s.nic_attach in catalog.NIC_ATTACH
    if s.layout is IntraNodeLayout.PCIE:
        assert s.gpu_link.transport == "pcie"
    else:
        assert s.gpu_link.transport == "nvlink"


def test_gpu_spot_values():
    g = catalog.gpus()
    a100 = g["a100-sxm4-80gb"]
    assert a100.peak_flops["fp16"] == a100.peak_flops["bf16"] == 312 * T
    assert a100.peak_flops["fp32"] == 19.5 * T and a100.peak_flops["tf32"] == 156 * T
    assert a100.memory_bandwidth_Bps == 2039e9 and a100.memory_bytes == 80 * GIB
    assert g["a100-sxm4-40gb"].memory_bandwidth_Bps == 1555e9
    assert g["v100-sxm2-16gb"].peak_flops["fp16"] == 125 * T
    assert g["v100-sxm2-16gb"].flops("bf16") == 125 * T  # no bf16 on Volta: falls back to the fp16 path
    h100 = g["h100-sxm5-80gb"]
    assert h100.peak_flops["bf16"] == pytest.approx(989 * T, rel=0.01)
    assert h100.peak_flops["fp8"] == pytest.approx(1979 * T, rel=0.01)
    assert h100.memory_bandwidth_Bps == 3350e9 and h100.tdp_w == 700
    assert g["h200-sxm-141gb"].peak_flops == h100.peak_flops
    assert g["h200-sxm-141gb"].memory_bandwidth_Bps == 4800e9
    assert g["t4-16gb"].flops("tf32") == 8.1 * T  # Turing has no tf32
    assert g["k80-12gb"].flops("fp16") == 4.37 * T
    assert g["mi300x-192gb"].peak_flops["bf16"] == pytest.approx(1307.4 * T)


def test_blackwell_and_cdna_spot_values():
    """Dense figures: the datasheets' 'with sparsity' tensor figures halved; HBM and power as stated."""
    g = catalog.gpus()
    b200, gb200, b300, gb300 = g["b200-180gb"], g["gb200-186gb"], g["b300-288gb"], g["gb300-288gb"]
    assert b200.peak_flops["bf16"] == 2250 * T and b200.peak_flops["fp8"] == 4500 * T  # 4.5 / 9 PF sparse
    assert b200.memory_bytes == 180 * GIB and b200.memory_bandwidth_Bps == 7.7e12 and b200.tdp_w == 1000
    assert gb200.peak_flops["bf16"] == 2500 * T and gb200.peak_flops["fp8"] == 5000 * T  # 360 / 720 PF per 72
    assert gb200.memory_bytes == 186 * GIB and gb200.memory_bandwidth_Bps == 8e12 and gb200.tdp_w == 1200
    assert b300.peak_flops["fp8"] == 4500 * T and b300.memory_bytes == 288 * GIB
    assert gb300.peak_flops["fp8"] == 5000 * T and gb300.memory_bytes == 288 * GIB and gb300.tdp_w == 1400
    mi325, mi355 = g["mi325x-256gb"], g["mi355x-288gb"]
    assert mi325.peak_flops == g["mi300x-192gb"].peak_flops  # the same CDNA 3 compute dies
    assert mi325.memory_bytes == 256 * GIB and mi325.memory_bandwidth_Bps == 6e12
    assert mi355.peak_flops["fp8"] == pytest.approx(5033.2 * T) and mi355.peak_flops["bf16"] == pytest.approx(2516.6 * T)
    assert mi355.memory_bytes == 288 * GIB and mi355.memory_bandwidth_Bps == 8e12 and mi355.tdp_w == 1400
    assert b200.peak_flops["nvfp4"] == 9000 * T and gb200.peak_flops["nvfp4"] == 10000 * T  # 18 / 20 PF sparse
    assert gb300.peak_flops["nvfp4"] == 15000 * T  # 1,080 PF dense per 72 GPUs
    assert {k for k, v in g.items() if "mxfp8" in v.peak_flops} == {"b200-180gb", "b300-288gb", "gb200-186gb",
                                                                    "gb300-288gb"}
    # efficiencies from public cuBLAS GEMM benchmarks at 8192^3 (B200 bf16 1.42, mxfp8 2.85, nvfp4 5.59 PFLOP/s;
    # GB300 bf16 1.72 PFLOP/s), as fractions of the dense peaks above
    assert b200.compute_efficiency["bf16"] == pytest.approx(1.42e15 / b200.peak_flops["bf16"], abs=0.005)
    assert b200.compute_efficiency["mxfp8"] == pytest.approx(2.85e15 / b200.peak_flops["mxfp8"], abs=0.005)
    assert b200.compute_efficiency["nvfp4"] == pytest.approx(5.59e15 / b200.peak_flops["nvfp4"], abs=0.005)
    assert gb300.compute_efficiency["bf16"] == pytest.approx(1.72e15 / gb300.peak_flops["bf16"], abs=0.005)
    for key in ("b200-180gb", "b300-288gb", "gb200-186gb", "gb300-288gb", "mi325x-256gb"):
        assert g[key].price_date not in ("", "unknown"), key  # a dated public price


def test_link_spot_values():
    ln = catalog.links()
    assert ln["ib-hdr"].bandwidth_Bps == 25e9 and ln["ib-hdr"].transport == "rdma"
    assert ln["ib-edr"].bandwidth_Bps == 12.5e9 and ln["ib-ndr"].bandwidth_Bps == 50e9
    assert [ln[f"nvlink{i}"].bandwidth_Bps for i in range(1, 6)] == [20e9, 25e9, 25e9, 25e9, 50e9]
    assert ln["pcie-gen3"].bandwidth_Bps == pytest.approx(16 * 8e9 / 8 * 128 / 130, rel=1e-3)
    assert ln["pcie-gen4"].bandwidth_Bps == 2 * ln["pcie-gen3"].bandwidth_Bps
    assert ln["pcie-gen5"].bandwidth_Bps == 2 * ln["pcie-gen4"].bandwidth_Bps
    for speed in (10, 25, 40, 100, 200, 400):
        assert ln[f"eth-{speed}g"].bandwidth_Bps == ln[f"roce-{speed}g"].bandwidth_Bps == speed * 1e9 / 8
        assert ln[f"eth-{speed}g"].transport == "tcp" and ln[f"roce-{speed}g"].transport == "rdma"
    eth = [ln[f"eth-{s}g"].efficiency for s in (10, 25, 40, 100, 200, 400)]
    assert eth == sorted(eth, reverse=True)  # TCP reaches a smaller fraction of faster links
    assert ln["ib-hdr"].efficiency == catalog.transport_default("rdma").efficiency  # inherits the default


def test_transport_defaults():
    for t in catalog.TRANSPORTS:
        td = catalog.transport_default(t)
        assert td.transport == t and 0 < td.efficiency <= 1 and td.latency_s > 0 and td.reason and td.source
    assert catalog.transport_default("rdma").efficiency > catalog.transport_default("tcp").efficiency
    assert catalog.transport_default("rdma").latency_s < catalog.transport_default("tcp").latency_s


def test_intra_node_spot_values():
    s = catalog.intra_nodes()
    assert s["nvswitch-a100"].layout is IntraNodeLayout.SWITCH and s["nvswitch-a100"].gpus == 8
    assert s["nvswitch-a100"].gpu_link.bandwidth_Bps == 300e9  # aggregate per GPU, per direction
    assert s["nvswitch-h100"].gpu_link.bandwidth_Bps == 450e9
    assert s["nvswitch-v100"].gpu_link.bandwidth_Bps == 150e9 and s["nvswitch-v100"].gpus == 16
    assert s["cube-mesh-v100"].layout is IntraNodeLayout.CUBE_MESH
    assert s["cube-mesh-v100"].gpu_link == catalog.links()["nvlink2"]  # one brick
    assert s["cube-mesh-p100"].gpu_link.bandwidth_Bps == 20e9 and s["cube-mesh-p100"].gpus == 8
    assert s["nvlink-pairs-a100"].layout is IntraNodeLayout.NVLINK_PAIRS
    assert s["nvlink-pairs-a100"].gpu_link.bandwidth_Bps == 300e9 and s["nvlink-pairs-a100"].gpus is None
    # a pair's whole bridge set, per direction, from each part's datasheet (600 / 112.5 / 100 GB/s bidirectional)
    assert s["nvlink-bridge-h100-pcie"].gpu_link.bandwidth_Bps == 300e9
    assert s["nvlink-bridge-rtx3090"].gpu_link.bandwidth_Bps == s["nvlink-bridge-rtxa6000"].gpu_link.bandwidth_Bps \
        == pytest.approx(56.25e9)
    assert s["nvlink-bridge-rtx2080ti"].gpu_link.bandwidth_Bps == 50e9
    for gen in (3, 4, 5):
        assert s[f"pcie-gen{gen}"].layout is IntraNodeLayout.PCIE
        assert s[f"pcie-gen{gen}"].gpu_link == catalog.links()[f"pcie-gen{gen}"]
    # aggregated links keep the class's efficiency and latency
    assert s["nvswitch-a100"].gpu_link.efficiency == catalog.links()["nvlink3"].efficiency


def test_lookups_return_fresh_dicts_of_shared_specs():
    g = catalog.gpus()
    g.pop("a100-sxm4-80gb")
    assert "a100-sxm4-80gb" in catalog.gpus()
    assert catalog.gpus()["t4-16gb"] is catalog.gpus()["t4-16gb"]


@pytest.mark.parametrize("kind", catalog.CATALOG_KINDS)
def test_catalog_tables_are_rectangular(kind):
    head, rows = catalog.catalog_table(kind)
    assert head and rows
    assert all(len(r) == len(head) and all(isinstance(c, str) and c for c in r) for r in rows)


def test_catalog_table_contents():
    _, rows = catalog.catalog_table("gpus")
    assert len(rows) == len(catalog.gpus())
    a100 = next(r for r in rows if r[0] == "a100-sxm4-80gb")
    assert a100[2:7] == ["19.5", "156", "312", "312", "-"] and "80 GiB" in a100 and "2.039 TB/s" in a100
    _, rows = catalog.catalog_table("links")
    hdr = next(r for r in rows if r[0] == "ib-hdr")
    assert hdr[:5] == ["ib-hdr", "rdma", "200 Gb/s", "2 us", "0.92"] and hdr[5] == "184 Gb/s"
    _, rows = catalog.catalog_table("topologies")
    values = [r[1] for r in rows]
    assert all(k.value in values for k in TopologyKind) and all(k in values for k in catalog.intra_nodes())
    assert all(k in catalog.TOPOLOGY_DESCRIPTIONS for k in TopologyKind)


def test_catalog_table_unknown_kind():
    with pytest.raises(catalog.ScenarioError, match="gpus, links, topologies, intra_node"):
        catalog.catalog_table("nics")


def test_docs_list_every_catalog_entry():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "catalog.md").read_text(encoding="utf-8")
    keys = [*catalog.gpus(), *catalog.links(), *catalog.intra_nodes(), *catalog.TRANSPORTS]
    assert [k for k in keys if f"| {k} |" not in doc] == []
