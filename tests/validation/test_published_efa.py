"""The EFA link class (catalog `efa-100g`) and the published cases that use it.

The efficiency is read from ONE published figure (NVIDIA/nccl-tests #22: a 2-node p3dn ring at 60 Gb/s
busbw on a 100 Gb/s EFA), which the suite tags `fit`; the p4d cases (NVIDIA/nccl #527) are held out.
"""
from __future__ import annotations

import pytest

from simdist.engine.simulation import simulate
from simdist.io import catalog
from simdist.io.load import load_scenario
from simdist.validation.published.cases import HERE, load_cases

EFA_SCENARIO = HERE / "scenarios" / "nccl-aws-efa.yaml"


def _busbw(overrides: list[str], size: str = "1 GB") -> tuple[float, str]:
    result = simulate(load_scenario(EFA_SCENARIO, [*overrides, f"workload.benchmark.sizes=['{size}']"])).to_dict()
    (row,) = result["collectives"]
    return float(row["busbw_GBps"]), str(row["algorithm"])


def test_efa_entry_is_sourced_and_distinct_from_infiniband():
    efa, edr = catalog.links()["efa-100g"], catalog.links()["ib-edr"]
    assert efa.bandwidth_Bps == edr.bandwidth_Bps == 12.5e9
    assert efa.efficiency == pytest.approx(0.60) and edr.efficiency == pytest.approx(0.92)
    assert efa.efficiency_basis == "catalog entry efa-100g"
    assert "nccl-tests #22" in efa.source and "aws-ofi-nccl" in efa.source


def test_fit_subset_is_the_one_case_the_efficiency_was_read_from():
    data = load_cases()
    fitted = [c.name for c in data.cases if data.fit_subset in c.tags]
    assert fitted == ["nccl-p3dn-2node-efa-ring"]
    assert "efa-100g" in data.fitted
    p4d = [c for c in data.cases if c.name.startswith("nccl-p4d-") and c.name.endswith("efa")]
    assert len(p4d) == 3 and all(c.scenario.file == EFA_SCENARIO for c in p4d)
    assert all(data.fit_subset not in c.tags for c in p4d)


def test_p3dn_ring_is_nic_bound_at_the_efa_rate_even_host_staged():
    """One EFA per node, no GPUDirect RDMA (p3dn): staging over PCIe gen3 (12.6 GB/s) does not bind, the
    ring's busbw equals the NIC's 12.5 GB/s x 0.60."""
    bw, alg = _busbw(["cluster.nodes.0.gpu=v100-sxm2-32gb", "cluster.nodes.0.intra_node=cube-mesh-v100",
                      "cluster.nodes.0.nic.count=1", "cluster.nodes.0.nic.gpudirect=false",
                      "communication.backend=textbook", "communication.strategy=ring"])
    assert alg == "ring"
    assert bw == pytest.approx(12.5 * 0.60, rel=0.01)


@pytest.mark.parametrize("nodes,measured", [(2, 57.17), (3, 31.77), (4, 29.61)])
def test_p4d_over_efa_out_of_sample_within_15_percent(nodes, measured):
    """NVIDIA/nccl #527 (2 x .. 4 x p4d.24xlarge, NCCL 2.9.9): held out, predicted from the catalog alone."""
    bw, _ = _busbw([f"cluster.nodes.0.count={nodes}"])
    assert abs(bw - measured) / measured < 0.15


def test_efa_is_slower_than_the_generic_rdma_nic_it_replaced():
    efa, _ = _busbw(["cluster.nodes.0.count=4"])
    ib, _ = _busbw(["cluster.nodes.0.count=4", "cluster.nodes.0.nic.link=ib-edr"])
    assert efa == pytest.approx(ib * 0.60 / 0.92, rel=0.02)
