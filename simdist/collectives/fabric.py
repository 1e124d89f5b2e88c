"""What NCCL's tuner sees of a group's hardware: the link kind inside a node, which protocols and
in-switch algorithms it enables there, and the bandwidths its model starts from.

NCCL (src/graph/tuning.cc, src/graph/search.cc) classifies the intra-node graph as NVLink or PCI,
enables LL128 only when GPUs reach each other over NVLink (PATH_NVB or better) and reach their NIC
without crossing a CPU (PATH_PXB or better; PXN on Hopper), and only from Volta on (NVLink2 or
later: a Pascal DGX-1's NVLink1 mesh runs LL and Simple), and enables NVLS on third-generation
NVSwitch systems (H100/H200 HGX: NVLink4 to the switch) and later. `from_topology` reads these from
the built topology graph instead of assuming one machine for every cluster.

Two things outside tuning.cc change what NCCL may run:
- The net plugin. On first-generation EFA (p3dn, p4d, p4de) aws-ofi-nccl sets NCCL_PROTO=simple at
  init unless the user set it (src/platform-aws.c: LL and LL128 need 128-byte in-order aligned writes,
  which that EFA endpoint does not offer, FI_OPT_EFA_*_IN_ORDER_ALIGNED_128_BYTES), so every
  communicator of the process runs Simple only, intra-node ones included.
- RCCL on AMD Instinct nodes (their GPUs joined by xGMI links, which RCCL's topology counts as NVLink-class):
  no NVLS (no NVSwitch), and on MI300X/MI325X (gfx942) tuning.cc skips the tree with Simple when every rank
  is on one node (`if (a == NCCL_ALGO_TREE && p == NCCL_PROTO_SIMPLE && IsArchMatch(gcn, "gfx94") && ...)`).
  LL128 as NCCL's rule (RCCL enables it on gfx90a/gfx942/gfx950 over xGMI since ROCm 6.4.2).
- CollNet (NCCL_COLLNET_ENABLE=1 with a CollNet plugin over SHARP switches, collnet.py): tuning.cc
  enables CollNet Direct only on NVSwitch nodes (ncclTopoGetNvsCount > 0) and CollNet Chain where the
  plugin supports it; enqueue.cc drops both above 8 local ranks (NCCL_MAX_DIRECT_ARITY + 1).
"""
from __future__ import annotations

from dataclasses import dataclass

from simdist.collectives.protocols import NVLINK_ARCH_INDEX, HopKind
from simdist.collectives.schedule import Group
from simdist.hardware.specs import IntraNodeLayout, IntraNodeSpec

# links to a third/fourth-generation NVSwitch (catalog keys; "nvlink4x18" = 18 bricks of nvlink4)
NVLS_LINKS = frozenset({"nvlink4", "nvlink5"})
# NIC links whose net plugin forces NCCL_PROTO=simple (aws-ofi-nccl platform-aws.c: p3dn, p4d, p4de)
SIMPLE_ONLY_NICS = frozenset({"efa-100g"})
# xGMI links of gfx942 GPUs (MI300X, MI325X): RCCL's tuner skips tree/Simple on one node there
RCCL_GFX94_LINKS = frozenset({"xgmi3"})
# CollNet Direct and Chain run with at most this many GPUs per node (enqueue.cc: NCCL_MAX_DIRECT_ARITY + 1)
COLLNET_MAX_LOCAL_RANKS = 8


@dataclass(frozen=True)
class NodeFabric:
    """NCCL's view of one node and its NICs (per GPU and per node, bytes per second)."""

    intra: HopKind = HopKind.NVLINK
    ll128: bool = False
    nvls: bool = False
    simple_only: bool = False  # the net plugin forces NCCL_PROTO=simple (first-generation EFA)
    collnet: str | None = None  # "direct" | "chain" where CollNet is enabled and runs, else None
    intra_Bps: float = 24e9  # one GPU's usable bandwidth to its intra-node peers, per direction
    nic_Bps: float = 24e9  # one node's NIC bandwidth in total, per direction
    nics: int = 1
    arch_index: int | None = None  # NCCL's compCapIndex from the NVLink generation (None: not known)
    # every NIC kernel-bypass (rdma) and not Simple-only, or no NIC: NCCL's per-hop latencies apply (protocols)
    kernel_bypass: bool = True
    rccl_gfx94: bool = False  # MI300X/MI325X nodes (RCCL_GFX94_LINKS): RCCL runs no tree/Simple on one node
    socket_threads: int | None = None  # NCCL_SOCKET_NTHREADS (communication.nccl_socket_threads); None: auto (nccl.py)


def intra_node_has_nvls(intra: IntraNodeSpec, gpus: int) -> bool:
    """Whether NCCL can run NVLS inside such a node: more than two GPUs on a third-generation (NVLink4) or later
    NVSwitch, the condition from_topology reads off the built node."""
    return intra.layout is IntraNodeLayout.SWITCH and intra.gpu_link.name.split("x")[0] in NVLS_LINKS and gpus > 2


def _reachable(adj: dict[str, set[str]], start: str) -> set[str]:
    """The vertices `start` reaches over `adj` (a breadth-first search; `start` included)."""
    seen = {start}
    frontier = [start]
    while frontier:
        frontier = [w for v in frontier for w in adj.get(v, ()) if w not in seen and not seen.add(w)]
    return seen


def _node_vertices(graph, node: int) -> list[str]:
    prefix = f"node{node}/"
    return [v for v in graph.nodes if isinstance(v, str) and v.startswith(prefix)]


def from_topology(topology, group: Group, collnet: bool = False, nvls_enabled: bool = True) -> NodeFabric:
    """The NodeFabric of the node holding the group's first rank (nodes of a group are alike).
    `collnet`: NCCL_COLLNET_ENABLE=1 on SHARP switches (communication.collnet, checked against
    cluster.fabric.sharp when the scenario is read). `nvls_enabled`: NCCL_NVLS_ENABLE (communication.nvls); false
    turns NVLS and NVLSTree off even on third-generation NVSwitch nodes."""
    if not group.ranks:
        return NodeFabric()
    g = topology.graph
    gpu_vertex = topology.endpoints[group.ranks[0]]
    node = topology.endpoint_node[group.ranks[0]]
    local = _node_vertices(g, node)
    gpus = [v for v in local if "/gpu" in v]
    nvl: dict[str, set[str]] = {v: set() for v in gpus}  # the NVLink graph: vertex -> neighbours
    nvl_bw = {v: 0.0 for v in gpus}
    nvls = False
    pascal = False  # NVLink1 = Pascal (sm_60): NCCL enables LL128 from Volta (sm_70) on
    gfx94 = False  # xGMI of MI300X/MI325X: RCCL's tuner rule for gfx94
    arch: int | None = None
    for u, v, d in g.edges(local, data=True):
        if d.get("kind") != "nvlink":
            continue
        gen = d["link"].name.split("x")[0]
        pascal = pascal or gen == "nvlink1"
        gfx94 = gfx94 or d["link"].name in RCCL_GFX94_LINKS
        if gen in NVLINK_ARCH_INDEX:
            arch = NVLINK_ARCH_INDEX[gen] if arch is None else min(arch, NVLINK_ARCH_INDEX[gen])
        nvl.setdefault(u, set()).add(v)
        nvl.setdefault(v, set()).add(u)
        bw = d["link"].effective_Bps * d.get("multiplicity", 1)
        for x in (u, v):
            if x in nvl_bw:
                nvl_bw[x] += bw
        if "nvswitch" in u + v and d["link"].name.split("x")[0] in NVLS_LINKS:
            nvls = True
    all_nvlink = len(gpus) > 1 and set(gpus) <= _reachable(nvl, gpu_vertex)
    if all_nvlink:
        intra_Bps = min(nvl_bw.values())
    else:
        pcie = [d["link"].effective_Bps for _, _, d in g.edges(gpu_vertex, data=True) if d.get("kind") == "pcie"]
        intra_Bps = min(pcie) if pcie else 24e9
    nics = [v for v in local if "/nic" in v]
    nic_bw = 0.0
    cpu_path = False
    simple_only = False
    bypass = True
    for nic in nics:
        ext = [d["link"] for u, w, d in g.edges(nic, data=True) if not str(w).startswith(f"node{node}/")]
        nic_bw += max((link.effective_Bps for link in ext), default=0.0)
        simple_only = simple_only or any(link.name in SIMPLE_ONLY_NICS for link in ext)
        bypass = bypass and all(link.transport == "rdma" for link in ext)
        cpu_path = cpu_path or any(str(w).startswith(f"node{node}/cpu") for w in g.neighbors(nic))
    nvswitch = any("/nvswitch" in v for v in local)
    kind = None
    if collnet and nics and len(gpus) <= COLLNET_MAX_LOCAL_RANKS:
        kind = "direct" if nvswitch else "chain"
    return NodeFabric(
        intra=HopKind.NVLINK if all_nvlink else HopKind.PCI,
        ll128=all_nvlink and not cpu_path and not pascal and not simple_only,
        nvls=nvls and nvls_enabled and len(gpus) > 2,
        simple_only=simple_only,
        collnet=kind,
        intra_Bps=intra_Bps,
        nic_Bps=nic_bw or intra_Bps,
        nics=max(1, len(nics)),
        arch_index=arch if all_nvlink else None,
        kernel_bypass=bypass and not simple_only,
        rccl_gfx94=gfx94 and all_nvlink,
    )
