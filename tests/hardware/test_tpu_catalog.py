"""The Google TPU v4 and v5p entries: the figures of Google's TPU documentation, their ICI links and their
one-chip node interiors (the chip's ICI router as the node's NIC of a torus3d fabric)."""
from __future__ import annotations

import pytest

from simdist.io import catalog

T = 1e12
GIB = 2.0**30


@pytest.mark.parametrize("key,bf16,memory_gib,hbm_Bps", [("tpu-v4", 275 * T, 32, 1200e9),
                                                          ("tpu-v5p", 459 * T, 95, 2765e9)])
def test_chip_figures_are_googles(key, bf16, memory_gib, hbm_Bps):
    g = catalog.gpus()[key]
    assert g.vendor == "google"
    assert g.peak_flops["bf16"] == bf16
    assert g.memory_bytes == memory_gib * GIB and g.memory_bandwidth_Bps == hbm_Bps
    # full-precision f32 matmuls: six bf16 passes of the MXUs
    assert g.peak_flops["fp32"] == pytest.approx(bf16 / 6, rel=2e-3)
    assert not {"fp16", "tf32", "mxfp8", "nvfp4"} & set(g.peak_flops)  # no such units: io refuses them
    assert set(g.compute_efficiency) == set(g.peak_flops)
    assert "price:" in g.source and "efficiency:" in g.source and "UNCERTAIN" in g.price_basis


def test_v4_has_no_fp8_and_v5p_runs_fp8_at_the_bf16_rate():
    v4, v5p = catalog.gpus()["tpu-v4"], catalog.gpus()["tpu-v5p"]
    assert "fp8" not in v4.peak_flops
    assert v5p.peak_flops["fp8"] == v5p.peak_flops["bf16"]


def test_v4_power_is_the_measured_maximum_and_v5p_has_none_published():
    assert catalog.gpus()["tpu-v4"].tdp_w == 192
    assert catalog.gpus()["tpu-v5p"].tdp_w == 0.0
    row = next(r for r in catalog.catalog_table("gpus")[1] if r[0] == "tpu-v5p")
    assert "-" in row and "0 W" not in row


@pytest.mark.parametrize("key,per_link_Bps", [("ici-v4", 45e9), ("ici-v5p", 100e9)])
def test_ici_links_per_direction(key, per_link_Bps):
    link = catalog.links()[key]
    assert link.bandwidth_Bps == per_link_Bps and link.transport == "rdma"
    assert "UNCERTAIN" in link.source  # efficiency and latency: no public measurement


def test_v5p_link_is_the_documented_per_chip_ici_over_six_links():
    """Google: 1200 GBps bidirectional ICI per chip; six links, two directions each."""
    assert catalog.links()["ici-v5p"].bandwidth_Bps == 1200e9 / 6 / 2


def test_v4_links_add_up_to_the_documented_pod_all_reduce_bandwidth():
    """Google: 'all-reduce bandwidth per Pod 1.1 PB/s' = 4096 chips x 6 links x 45 GB/s."""
    assert 4096 * 6 * catalog.links()["ici-v4"].bandwidth_Bps == pytest.approx(1.1e15, rel=0.01)


@pytest.mark.parametrize("key,link", [("tpu-v4", "ici-v4"), ("tpu-v5p", "ici-v5p")])
def test_chip_interiors(key, link):
    s = catalog.intra_nodes()[key]
    assert s.gpus == 1 and s.pcie_link is None and s.nic_attach == "switch"
    # the TensorCores' path to the on-die router: six links' worth, no latency of its own
    assert s.gpu_link.bandwidth_Bps == 6 * catalog.links()[link].bandwidth_Bps and s.gpu_link.latency_s == 0
