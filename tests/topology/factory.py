"""Hand-built hardware specs for topology tests (the YAML catalog is not needed here)."""
from __future__ import annotations

from simdist.hardware.specs import (ClusterSpec, FabricSpec, GpuSpec, IntraNodeLayout, IntraNodeSpec, LinkSpec,
                                    NicSpec, NodeGroupSpec, TopologyKind)

GBps = 1e9
NVLINK3 = LinkSpec(300 * GBps, 2e-6, name="nvlink3", transport="nvlink")
NVLINK2 = LinkSpec(25 * GBps, 2e-6, name="nvlink2", transport="nvlink")
NVLINK1 = LinkSpec(20 * GBps, 2e-6, name="nvlink1", transport="nvlink")
PCIE4 = LinkSpec(32 * GBps, 1e-6, name="pcie4", transport="pcie")
PCIE3 = LinkSpec(16 * GBps, 1e-6, name="pcie3", transport="pcie")
UPI = LinkSpec(40 * GBps, 1e-7, name="upi", transport="upi")
IB200 = LinkSpec(25 * GBps, 3e-6, efficiency=0.9, name="ib-hdr", transport="rdma")
IB100 = LinkSpec(12.5 * GBps, 3e-6, name="ib-edr", transport="rdma")


def gpu(key: str = "a100-sxm4-80gb") -> GpuSpec:
    return GpuSpec(key, key, "nvidia", {"fp32": 19.5e12, "fp16": 312e12}, 80e9, 2e12, 400, 2.0)


DGX_A100 = IntraNodeSpec("nvswitch-a100", IntraNodeLayout.SWITCH, NVLINK3, PCIE4, 2, 2, UPI, "pcie_switch", 8)
UNIFORM = IntraNodeSpec("inline", IntraNodeLayout.SWITCH, NVLINK3)
DGX1_V100 = IntraNodeSpec("dgx1-v100", IntraNodeLayout.CUBE_MESH, NVLINK2, PCIE3, 2, 2, UPI, "pcie_switch", 8)
DGX1_P100 = IntraNodeSpec("dgx1-p100", IntraNodeLayout.CUBE_MESH, NVLINK1, PCIE3, 2, 2, UPI, "pcie_switch", 8)
PAIRS = IntraNodeSpec("pairs", IntraNodeLayout.NVLINK_PAIRS, NVLINK2, PCIE3, 2, 1)
PCIE_BOX = IntraNodeSpec("pcie-box", IntraNodeLayout.PCIE, PCIE3, PCIE3, 2, 2, UPI)


def group(count: int, intra: IntraNodeSpec = UNIFORM, gpus: int = 8, nics: int = 1,
          nic: LinkSpec = IB200, gpu_key: str = "a100-sxm4-80gb") -> NodeGroupSpec:
    return NodeGroupSpec(count, gpu(gpu_key), gpus, intra, NicSpec(nic, nics))


def cluster(nodes: int = 4, topology: str = "single_switch", intra: IntraNodeSpec = UNIFORM, gpus: int = 8,
            nics: int = 1, link: LinkSpec = IB200, **fabric) -> ClusterSpec:
    return ClusterSpec((group(nodes, intra, gpus, nics),), FabricSpec(TopologyKind(topology), link, **fabric))
