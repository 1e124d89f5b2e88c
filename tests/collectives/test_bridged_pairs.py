"""NVLink-bridged PCIe boxes (intra_node nvlink-bridge-*): a pair's bridge set is its datasheet's NVLinks, and a
bridged pair beside a GPU on PCIe (an odd count) runs its rings over PCIe where the bridge ends."""
from __future__ import annotations

import pytest

from simdist.collectives.cost import busbw_Bps
from simdist.engine.context import build_context
from simdist.io.catalog import intra_nodes
from simdist.io.load import load_data
from simdist.scenario import Fidelity


def _bench(intra: str, gpu: str, gpus: int, backend: str = "nccl"):
    data = {"name": "bridge", "cluster": {"nodes": [{"count": 1, "gpu": gpu, "gpus_per_node": gpus, "intra_node": intra,
                                                     "nic": {"bandwidth": "100 Gb/s", "latency": "5 us"}}],
                                          "fabric": {"topology": "single_switch"}},
            "workload": {"benchmark": {"op": "all_reduce", "sizes": ["1 GB"]}},
            "communication": {"strategy": "ring", "backend": backend}, "run": {"fidelity": "estimate"}}
    return build_context(load_data(data), Fidelity.ESTIMATE)


@pytest.mark.parametrize("intra, gpu, per_direction_Bps", [
    ("nvlink-bridge-rtx2080ti", "rtx2080ti-11gb", 50e9),  # TU102: 2 x8 links x 25 GB/s
    ("nvlink-bridge-rtx3090", "rtx3090-24gb", 56.25e9),  # GA102: 4 x4 links x 14.0625 GB/s
    ("nvlink-bridge-h100-pcie", "h100-pcie-80gb", 300e9),  # 3 bridges, 12 NVLink4 links
])
def test_two_bridged_gpus_move_at_the_bridges_rate(intra, gpu, per_direction_Bps):
    """Hand calculation: a 2-rank ring all-reduce sends S per rank over the bridge, so its bus bandwidth
    (2(n-1)/n S / t = S / t) is the bridge's rate x the NVLink efficiency, less NCCL's per-call latency."""
    link = intra_nodes()[intra].gpu_link
    assert link.bandwidth_Bps == pytest.approx(per_direction_Bps)
    ctx = _bench(intra, gpu, 2)
    t = ctx.collective_time("all_reduce", 1e9)
    expected = link.effective_Bps
    assert busbw_Bps("all_reduce", 2, 1e9, t) == pytest.approx(expected, rel=0.03)
    assert busbw_Bps("all_reduce", 2, 1e9, t) < expected


def test_a_bridged_pair_and_a_pcie_gpu():
    """Three RTX A6000: GPUs 0-1 bridged, GPU 2 on PCIe gen4. A ring carries 2(n-1)/n S = 4/3 S over the PCIe hops
    each way, so its bus bandwidth is the PCIe rate; NCCL's one-node tree, a chain 2 - 0 - 1 or 0 - 1 - 2, carries S
    each way over its one PCIe hop, so its bus bandwidth reaches 4/3 of the PCIe rate, and the tuner takes it. Either
    way far below the pair's bridge, which the pair alone keeps."""
    three = _bench("nvlink-bridge-rtxa6000", "rtxa6000-48gb", 3)
    pcie = intra_nodes()["nvlink-bridge-rtxa6000"].pcie_link
    t = three.collective_time("all_reduce", 1e9)
    bus = busbw_Bps("all_reduce", 3, 1e9, t)
    assert three.schedule("all_reduce", 1e9).algorithm.startswith("tree/")
    assert pcie.effective_Bps < bus < pcie.effective_Bps * 4 / 3 * 1.01
    pair = _bench("nvlink-bridge-rtxa6000", "rtxa6000-48gb", 2)
    assert busbw_Bps("all_reduce", 2, 1e9, pair.collective_time("all_reduce", 1e9)) > 1.4 * bus
