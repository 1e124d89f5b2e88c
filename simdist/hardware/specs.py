"""Frozen specs of the hardware a scenario describes: GPUs, links, NICs, node interiors, fabrics.

All quantities are SI with the unit in the name (bytes, bytes/s, seconds, FLOP/s). Catalog entries
and inline scenario specs both end up as these dataclasses (io/ does the parsing).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Mapping

# Fallbacks when a GPU has no figure for a dtype: the tensor-core path it would really use.
# Block-scaled mxfp8 and nvfp4 have none: Transformer Engine refuses them on a GPU without them (io/ refuses first).
_DTYPE_FALLBACK = {"tf32": "fp32", "bf16": "fp16", "fp8": "fp16", "fp16": "fp32", "fp32": None, "mxfp8": None,
                   "nvfp4": None}


@dataclass(frozen=True, eq=False)
class GpuSpec:
    """One GPU model: peak dense FLOP/s per dtype, memory, power and an indicative price."""

    key: str
    name: str
    vendor: str
    peak_flops: Mapping[str, float]  # dtype (fp32, tf32, fp16, bf16, fp8, mxfp8, nvfp4) -> dense FLOP/s
    memory_bytes: float
    memory_bandwidth_Bps: float
    tdp_w: float
    price_per_hour_usd: float
    compute_efficiency: Mapping[str, float] = field(default_factory=dict)  # dtype -> achieved fraction of peak
    source: str = ""
    price_basis: str = ""  # where price_per_hour_usd comes from ("given" when a scenario sets the price)
    price_date: str = ""  # the month that price was read, YYYY-MM, or "unknown"
    # compute slowdown while a collective of its rank runs: collective op (or "default") -> s, compute then
    # runs at 1 / (1 + s) of its rate (NCCL's kernels take SMs and HBM bandwidth); {} = no interference
    comm_interference: Mapping[str, float] = field(default_factory=dict)
    # GPU peer-to-peer over PCIe (one GPU reading/writing another's memory through the PCIe switches).
    # False on GeForce parts whose driver disables it: NCCL then stages GPU-GPU traffic through host
    # memory (its SHM transport) and the CPUs' memory bandwidth sets the rate (host_staged_peer_link).
    pcie_p2p: bool = True

    @property
    def is_cpu(self) -> bool:
        """A 'GPU' that is a CPU core (vendor cpu): the rank's process runs on that core (its codecs run tensor
        ops on it, gloo's sums and socket copies share it)."""
        return self.vendor.strip().lower() == "cpu"

    @property
    def is_tpu(self) -> bool:
        """A Google TPU chip (vendor google): XLA's collectives and no PyTorch DDP reducer."""
        return self.vendor.strip().lower() == "google"

    def interference(self, op: str) -> float:
        """The compute slowdown s while a collective `op` of this GPU's rank runs (0: none)."""
        table = self.comm_interference
        return float(table.get(op, table.get("default", 0.0)))

    def runs_as(self, dtype: str) -> str:
        """The precision whose units compute `dtype` here: itself, or what the GPU would use instead (tf32 on a
        GPU without tf32 tensor cores is fp32; bf16 and fp8 without their units are fp16)."""
        d: str | None = dtype
        while d is not None:
            if d in self.peak_flops:
                return d
            d = _DTYPE_FALLBACK.get(d)
        raise KeyError(f"{self.key} has no FLOP/s figure for {dtype}")

    def flops(self, dtype: str) -> float:
        """Peak dense FLOP/s for `dtype`, falling back to the unit the GPU would use instead (runs_as)."""
        return self.peak_flops[self.runs_as(dtype)]


@dataclass(frozen=True)
class LinkSpec:
    """One link class, per direction: line rate, latency, and the achieved fraction of line rate."""

    bandwidth_Bps: float
    latency_s: float
    efficiency: float = 1.0
    name: str = "custom"  # catalog key (e.g. 'ib-hdr', 'nvlink3') or 'custom'
    transport: str = ""  # nvlink | pcie | rdma | tcp | upi ...
    source: str = ""
    efficiency_basis: str = field(default="", compare=False)  # where `efficiency` comes from (transport default at a rate, entry, scenario, profile)
    # The most ONE flow (one connection: a ring neighbour, a PS worker-server pair) achieves on this link,
    # whatever the link's capacity: a TCP connection's streams are each CPU- or provider-limited
    # (cloud per-flow limits; NCCL's socket transport opens NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD
    # streams per connection, gloo one). None: no per-flow limit (flows share the link by rate only).
    flow_cap_Bps: float | None = None
    # The most ONE TCP stream achieves on this link (links.yaml transport tcp's stream_cap, or nic.stream_cap):
    # the kernel moves a stream's bytes on one core at each end, so however fast the NIC a stream reaches
    # 15-35 Gb/s. A connection of k streams (Step.streams: NCCL's doubled channels, gloo's one pair per
    # peer) moves at most k x this. None: no per-stream limit (RDMA, NVLink, PCIe).
    stream_cap_Bps: float | None = None

    @property
    def effective_Bps(self) -> float:
        """What transfers really get: bandwidth x efficiency (DESIGN.md section 3)."""
        return self.bandwidth_Bps * self.efficiency

    def with_(self, **changes: object) -> "LinkSpec":
        return replace(self, **changes)


# A parameter server's update in host memory (communication.ps.server: cpu): a memory-bound streaming update
# on a two-socket server. DDR4-2933 with 6 channels is 141 GB/s peak per socket; one server process's update
# threads reach roughly 100 GB/s across both sockets (STREAM-like, UNCERTAIN: calibrate); vector FP32 about
# 2 TFLOP/s for two 28-core AVX-512 sockets (never the limit of an optimizer update).
HOST_CPU_SERVER = GpuSpec(key="host-cpu", name="parameter-server host CPU (2 sockets, DDR4)", vendor="",
                          peak_flops={"fp32": 2.0e12}, memory_bytes=384 * 2**30, memory_bandwidth_Bps=100e9,
                          tdp_w=0.0, price_per_hour_usd=0.0,
                          source="DDR4-2933 x 6 channels x 2 sockets (JEDEC rates); achieved update bandwidth UNCERTAIN")


class IntraNodeLayout(StrEnum):
    """How GPUs inside one node are wired."""

    SWITCH = "switch"  # NVSwitch (or an inline uniform switch): one link per GPU to a central switch
    CUBE_MESH = "cube_mesh"  # DGX-1 hybrid cube-mesh of NVLinks (8 GPUs), PCIe to the NICs
    NVLINK_PAIRS = "nvlink_pairs"  # pairs bridged by NVLink, PCIe switches between pairs
    PCIE = "pcie"  # GPUs under PCIe switches under one or two CPU sockets
    FULL_MESH = "full_mesh"  # every GPU pair joined by its own link, no switch (AMD Infinity Fabric / xGMI)


@dataclass(frozen=True)
class HostCpuSpec:
    """One host CPU of the catalog (host_cpus.yaml): per_core_score = SPECrate2017_int_base / physical cores."""

    key: str
    model: str
    sockets: int
    cores: int
    threads: int
    per_core_score: float
    source: str


@dataclass(frozen=True)
class HostCpuCatalog:
    """The host CPUs a scenario's data loader may run on, the reference CPU the default cost per sample was
    measured on, and which CPU each intra-node catalog entry has (resolved by simdist.io.catalog)."""

    cpus: tuple[HostCpuSpec, ...]
    reference: str
    nodes: tuple[tuple[str, str], ...]  # (intra-node catalog key, host CPU key)

    def cpu(self, key: str) -> HostCpuSpec:
        return next(c for c in self.cpus if c.key == key)

    def keys(self) -> tuple[str, ...]:
        return tuple(c.key for c in self.cpus)

    def node_cpu(self, intra_node_key: str) -> str | None:
        return dict(self.nodes).get(intra_node_key)


@dataclass(frozen=True)
class IntraNodeSpec:
    """The inside of a node: layout, the GPU-GPU link class, PCIe, sockets and where NICs attach."""

    key: str
    layout: IntraNodeLayout
    gpu_link: LinkSpec  # SWITCH: each GPU's aggregate link to the switch; mesh: one NVLink (brick); pairs: a bridge set
    pcie_link: LinkSpec | None = None  # GPU/NIC to PCIe switch; None for SWITCH layouts whose NICs hang off the switch
    gpus_per_pcie_switch: int = 2
    sockets: int = 1
    socket_link: LinkSpec | None = None  # between CPU sockets (UPI/QPI/Infinity Fabric)
    nic_attach: str = "pcie_switch"  # pcie_switch (beside GPUs, GPUDirect) | switch (on the node switch)
    gpus: int | None = None  # the layout's fixed GPU count (cube mesh: 8), None = any
    max_gpus: int | None = None  # the most GPUs one such node holds (an NVL72 rack: 72; a job may use fewer)
    source: str = ""
    host_memory: LinkSpec | None = None  # ONE socket's DRAM: peak (channels x rate) and achieved fraction, reads + writes together
    peer_staging: str = ""  # how GPU-GPU traffic was staged through host memory (GPUs without PCIe P2P), for the result


@dataclass(frozen=True)
class NicSpec:
    """The node's network interfaces: `count` NICs each with `link`."""

    link: LinkSpec  # what a transfer through the NIC achieves (with host staging folded in when gpudirect is off)
    count: int = 1
    gpudirect: bool = True  # GPUDirect RDMA; False: GPU -> host memory -> NIC over PCIe (see staged_nic_link)
    wire_link: LinkSpec | None = None  # the NIC's own link before host staging (None: same as `link`)
    staging: str = ""  # how host staging changed `link`, for the cluster summary and the result

    @property
    def line_link(self) -> LinkSpec:
        """The NIC's own link class (before host staging): what a default fabric link copies."""
        return self.wire_link or self.link

    def host_side(self) -> "NicSpec":
        """The same NICs on a CPU host (a dedicated server): no GPU memory to stage from."""
        return NicSpec(self.line_link, self.count) if self.wire_link is not None else self


def staged_nic_link(nic: LinkSpec, pcie: LinkSpec) -> LinkSpec:
    """A NIC leg without GPUDirect RDMA: data is copied GPU -> host memory over PCIe at the sender and
    host memory -> GPU at the receiver, in chunks pipelined with the network transfer (as NCCL's net
    transport without GDR and gloo do). Modelled as each NIC leg's efficiency and latency (the path is
    not rerouted through the CPU): the leg achieves min(NIC, PCIe) effective bandwidth and pays one
    PCIe latency more per message (its end's copy), so a node-to-node path pays two."""
    effective = min(nic.effective_Bps, pcie.effective_Bps)
    return replace(nic, efficiency=effective / nic.bandwidth_Bps, latency_s=nic.latency_s + pcie.latency_s,
                   efficiency_basis=f"{nic.efficiency_basis}, staged via host memory over {pcie.name}")


def host_staged_peer_link(intra: IntraNodeSpec, gpus: int) -> tuple[LinkSpec, str] | None:
    """The GPU link of a PCIe interior whose GPUs have no PCIe peer-to-peer: NCCL's SHM transport writes
    every byte a GPU sends into host memory and the next GPU reads it from there, so each byte moved per
    direction is one DRAM write plus one DRAM read. With g GPUs all sending and receiving at rate r (a
    ring, every channel together), the sockets holding GPUs carry 2 g r of DRAM traffic: r <= M s / (2 g)
    for s such sockets of achieved bandwidth M each. Folded into the GPU link's efficiency (paths are not
    rerouted through the CPU); returns (link, note) or None where nothing is known to stage through."""
    if intra.layout is not IntraNodeLayout.PCIE or intra.host_memory is None or gpus < 2:
        return None
    switches = -(-gpus // max(1, intra.gpus_per_pcie_switch))
    sockets = min(intra.sockets, switches)  # switch j sits on socket j * sockets // switches: one each
    per_gpu = intra.host_memory.effective_Bps * sockets / (2 * gpus)
    link = intra.gpu_link
    if per_gpu >= link.effective_Bps:
        return None
    staged = replace(link, efficiency=per_gpu / link.bandwidth_Bps,
                     efficiency_basis=f"{link.efficiency_basis}, staged via host memory (no PCIe P2P): "
                                      f"{sockets} socket(s) x {intra.host_memory.effective_Bps / 1e9:.4g} GB/s / "
                                      f"(2 x {gpus} GPUs)")
    note = (f"no PCIe P2P: GPU-GPU traffic staged through host memory, {per_gpu / 1e9:.3g} GB/s per GPU per "
            f"direction ({sockets} socket(s) of {intra.host_memory.effective_Bps / 1e9:.4g} GB/s, one write and "
            f"one read per byte), was {link.effective_Bps / 1e9:.3g} GB/s over {link.name}")
    return staged, note


@dataclass(frozen=True)
class NodeGroupSpec:
    """`count` identical nodes; several groups make a heterogeneous cluster."""

    count: int
    gpu: GpuSpec
    gpus_per_node: int
    intra_node: IntraNodeSpec
    nic: NicSpec
    intra_node_default: bool = False  # True: the scenario gave no intra_node, DEFAULT_INTRA_NODE was used


class TopologyKind(StrEnum):
    SINGLE_SWITCH = "single_switch"
    FAT_TREE = "fat_tree"
    LEAF_SPINE = "leaf_spine"  # alias of a two-level fat_tree
    RING = "ring"
    TORUS2D = "torus2d"
    TORUS3D = "torus3d"
    CUSTOM = "custom"


class RoutingKind(StrEnum):
    """How switched fabrics pick among equal-cost paths (topology.routing): see docs/network.md."""

    AUTO = "auto"  # dmodk when every NIC is rdma (InfiniBand subnet manager), else ecmp
    DMODK = "dmodk"  # destination-based (D-mod-K / ftree): the up port is a digit of the destination
    ECMP = "ecmp"  # a hash of each flow picks the next hop (Ethernet)
    SPRAY = "spray"  # ecmp, each connection split over several hashed paths (NCCL queue pairs)


ROUTING_KINDS: dict[str, RoutingKind] = {k.value: k for k in RoutingKind}


@dataclass(frozen=True)
class FabricSpec:
    """How nodes are joined: the topology and the switch-to-switch (or node-to-node) link."""

    topology: TopologyKind
    link: LinkSpec
    nodes_per_leaf: int | None = None  # fat_tree / leaf_spine
    oversubscription: float = 1.0  # leaf downlink / uplink capacity
    levels: int | None = None  # fat_tree: 2 or 3; None picks by size
    leaves_per_pod: int | None = None  # three-level fat_tree
    dims: tuple[int, ...] | None = None  # torus2d / torus3d; None picks a near-square shape
    graphml: str | None = None  # custom: path of a GraphML file
    routing: RoutingKind = RoutingKind.AUTO  # equal-cost path choice (added key)
    sharp: bool = False  # switches reduce in-network (SHARP), CollNet plugin installed (added key)


@dataclass(frozen=True)
class ClusterSpec:
    """Node groups plus the fabric between them. GPUs are numbered node-major, group by group."""

    node_groups: tuple[NodeGroupSpec, ...]
    fabric: FabricSpec

    @property
    def num_nodes(self) -> int:
        return sum(g.count for g in self.node_groups)

    @property
    def num_gpus(self) -> int:
        return sum(g.count * g.gpus_per_node for g in self.node_groups)

    def nodes(self) -> list[NodeGroupSpec]:
        """The group of each node, node by node."""
        return [g for g in self.node_groups for _ in range(g.count)]
