"""`cluster.nodes.N.nic.flow_cap`: the most one connection moves through the NIC; it reaches the link
the topology is built from, and a cap above the line rate is refused naming key, value and bound."""
from __future__ import annotations

import pytest

from simdist.errors import ScenarioError
from simdist.io.load import load_scenario
from simdist.validation.published.cases import HERE

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


# ---- GPUs without PCIe peer-to-peer: GPU-GPU traffic staged through host memory ------------------------
BOX = HERE / "scenarios" / "nccl-pcie-box.yaml"
SPR_SOCKET = 307.2e9 * 0.80  # pcie-gen5's host_memory: 8 x DDR5-4800 per socket, achieved 0.80


def _busbw(overrides: list[str]) -> float:
    from simdist.validation.published.runner import _run
    from simdist.validation.published.cases import ScenarioRef

    rows = _run(ScenarioRef(BOX, ("cluster.nodes.0.intra_node=pcie-gen5", *overrides)),
                ["workload.benchmark.sizes=['1 GB']"])["collectives"]
    return rows[0]["busbw_GBps"] * 1e9


@pytest.mark.parametrize("gpus, sockets", [(8, 2), (4, 1)])
def test_no_p2p_ring_is_bound_by_host_memory(gpus, sockets):
    """Every byte a GPU sends is written to and read from DRAM once: r <= M s / (2 g) per GPU."""
    busbw = _busbw([f"cluster.nodes.0.gpus_per_node={gpus}"])
    assert busbw == pytest.approx(SPR_SOCKET * sockets / (2 * gpus), rel=0.02)  # 30.7 GB/s both ways


def test_p2p_capable_gpus_keep_the_pcie_path():
    busbw = _busbw(["cluster.nodes.0.gpu=rtxa6000-48gb"])
    assert busbw == pytest.approx(63e9 * 0.80, rel=0.02)  # switch-local P2P at the PCIe default 0.80


def test_the_staging_is_reported():
    sc = load_scenario(BOX, ["cluster.nodes.0.intra_node=pcie-gen5"])
    intra = sc.cluster.node_groups[0].intra_node
    assert "staged through host memory" in intra.peer_staging
    assert "staged via host memory" in intra.gpu_link.efficiency_basis


def test_the_flow_cap_is_reported_in_links_used():
    from simdist.topology.summary import link_assumptions

    sc = load_scenario(FILE, [NIC % ", flow_cap: 13.7 Gb/s"])
    nic = link_assumptions(sc.cluster)["nic"][0]
    assert nic["flow_cap_Bps"] == pytest.approx(13.7e9 / 8)
    assert "flow_cap_Bps" not in link_assumptions(load_scenario(FILE, [NIC % ""]).cluster)["nic"][0]
