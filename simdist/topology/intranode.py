"""The inside of one machine as graph vertices and edges, from its IntraNodeSpec layout.

Vertices are "node{n}/gpu{i}", "node{n}/nvswitch", "node{n}/pcie{j}", "node{n}/cpu{k}", "node{n}/nic{m}".
GPUs sit in groups of `gpus_per_pcie_switch` under PCIe switches, PCIe switch j hangs off socket
j * sockets // n_pcie, and NIC m sits on PCIe switch m * n_pcie // nics (GPUDirect placement, as in
DGX boxes). Sockets are chained by `socket_link` (falling back to `pcie_link` when it is missing).

Rails: with g GPUs and m NICs, GPU j is bound to NIC floor(j*m/g) (the NIC under its own PCIe switch
in DGX-style boxes, as NCCL binds each GPU to its nearest NIC); the GPU vertex carries it as its
`rail` attribute, and routing leaves and enters a machine through the endpoint's rail NIC whenever
that NIC lies on a least-cost path. NVLINK_PAIRS joins GPUs 0-1, 2-3, ... with the layout's gpu_link, the whole
bridge set of a pair (its NVLinks together: 12 for the A100/H100 PCIe three-bridge set, 4 x4 links for GA102's one
bridge, 2 x8 links for TU102's); with an odd count the last GPU has no bridge (a bridged pair plus a PCIe GPU).
FULL_MESH joins every GPU pair directly by one gpu_link (AMD Instinct platforms: seven Infinity Fabric / xGMI links
per GPU to its seven peers, no switch); those edges are kind "nvlink" like every direct GPU-GPU link, as RCCL's
topology counts xGMI as an NVLink-class path (PATH_NVL).

Latency: a catalog link's latency is device to device (one hop as NCCL counts hops); the edges
either side of an NVSwitch or PCIe switch carry half of it each (`half_hop`), so a GPU-GPU or
GPU-NIC path through the switch pays it once.
"""
from __future__ import annotations

import math

from simdist.hardware.specs import IntraNodeLayout, IntraNodeSpec, LinkSpec, NodeGroupSpec
from simdist.topology.plain import LinkGraph

# Published DGX-1 NVLink wiring (nvidia-smi topo -m). V100: 6 bricks per GPU, some pairs doubled.
DGX1_V100_BRICKS: dict[tuple[int, int], int] = {
    (0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2,
    (1, 2): 2, (1, 3): 1, (1, 5): 2,
    (2, 3): 2, (2, 6): 1,
    (3, 7): 1,
    (4, 5): 1, (4, 6): 1, (4, 7): 2,
    (5, 6): 2, (5, 7): 1,
    (6, 7): 2,
}
# P100: 4 bricks per GPU, each quad fully connected plus one link to the same slot in the other quad.
DGX1_P100_BRICKS: dict[tuple[int, int], int] = {
    **{(a + q, b + q): 1 for q in (0, 4) for a in range(4) for b in range(a + 1, 4)},
    **{(i, i + 4): 1 for i in range(4)},
}


def rail_index(local_gpu: int, gpus: int, nics: int) -> int:
    """The NIC GPU `local_gpu` of `gpus` is bound to when the node has `nics` NICs: floor(j*m/g)."""
    return local_gpu * nics // gpus


def rail_share(local_gpu: int, gpus: int, nics: int) -> range:
    """The NICs GPU `local_gpu` of `gpus` owns when the node has `nics` NICs: floor(j*m/g) up to floor((j+1)*m/g)
    (one NIC, its rail_index, when there are no more NICs than GPUs)."""
    first = rail_index(local_gpu, gpus, nics)
    return range(first, max(first + 1, (local_gpu + 1) * nics // gpus))


def host_link(link: LinkSpec, at_least_Bps: float = 0.0) -> LinkSpec:
    """A host-internal hop that never limits: the NIC's line rate (or `at_least_Bps` when more: a
    torus/ring NIC is a router whose several fabric ports the node feeds at once), zero latency,
    full efficiency."""
    return LinkSpec(bandwidth_Bps=max(link.bandwidth_Bps, at_least_Bps), latency_s=0.0, efficiency=1.0, name="host",
                    transport="pcie")


def is_p100_mesh(group: NodeGroupSpec) -> bool:
    """Cube-mesh wiring choice: P100 (4 bricks) when the GPU, the interior key or the NVLink is P100-era."""
    intra = group.intra_node
    text = f"{group.gpu.key} {group.gpu.name} {intra.key}".lower()
    return "p100" in text or intra.gpu_link.name.lower() in ("nvlink1", "nvlink-1", "nvlink_1")


SWITCHED_HOP_TRANSPORTS = ("nvlink", "pcie")


def half_hop(link: LinkSpec) -> LinkSpec:
    """One side of a switched hop: an NVLink or PCIe latency (catalog transports nvlink, pcie) is
    device to device, one hop as NCCL counts hops, and a path through an NVSwitch or PCIe switch
    crosses two edges, so each edge carries half of it (the bandwidth is the link's own on both).
    Other transports (an inline tcp 'switch', as on the emulated cluster) keep their per-edge latency."""
    if link.transport not in SWITCHED_HOP_TRANSPORTS:
        return link
    return link.with_(latency_s=link.latency_s / 2)


def _add(g: LinkGraph, u: str, v: str, link: LinkSpec, kind: str, multiplicity: int = 1) -> None:
    if multiplicity > 1:
        g.add_edge(u, v, link=link, kind=kind, multiplicity=multiplicity)
    else:
        g.add_edge(u, v, link=link, kind=kind)


def _pcie_tree(g: LinkGraph, p: str, intra: IntraNodeSpec, gpus: list[str], nics: int, path: str,
               gpus_on_pcie: bool = True) -> list[str]:
    """GPUs under PCIe switches under sockets; returns the PCIe switch vertices (NICs go on them)."""
    pcie = intra.pcie_link
    assert pcie is not None, f"{path}.intra_node.pcie_link: layout {intra.layout.value} needs one (topology.validate)"
    per = max(1, intra.gpus_per_pcie_switch)
    n_pcie = max(1, math.ceil(len(gpus) / per))
    switches = [f"{p}/pcie{j}" for j in range(n_pcie)]
    sockets = max(1, intra.sockets)
    cpus = [f"{p}/cpu{k}" for k in range(sockets)]
    for c in cpus:
        g.add_node(c)
    if gpus_on_pcie:
        for i, gpu in enumerate(gpus):
            _add(g, gpu, switches[min(i // per, n_pcie - 1)], half_hop(pcie), "pcie")
    for j, sw in enumerate(switches):
        _add(g, sw, cpus[j * sockets // n_pcie], half_hop(pcie), "pcie")
    socket = intra.socket_link or pcie
    for k in range(sockets - 1):
        _add(g, cpus[k], cpus[k + 1], socket, "socket")
    return switches


def add_node_interior(g: LinkGraph, n: int, group: NodeGroupSpec, path: str = "cluster.nodes.0") -> tuple[list[str], list[str]]:
    """Add node `n`'s GPUs, switches, sockets and NICs to `g`; return (gpu vertices, nic vertices)."""
    intra = group.intra_node
    p = f"node{n}"
    gpus = [f"{p}/gpu{i}" for i in range(group.gpus_per_node)]
    nics = [f"{p}/nic{m}" for m in range(group.nic.count)]
    for v in gpus + nics:
        g.add_node(v)
    if nics:
        for j, gpu in enumerate(gpus):
            g.nodes[gpu]["rail"] = nics[rail_index(j, len(gpus), len(nics))]
    layout = IntraNodeLayout(intra.layout)
    nvl = intra.gpu_link
    if layout is IntraNodeLayout.SWITCH:
        sw = f"{p}/nvswitch"
        g.add_node(sw)
        for gpu in gpus:
            _add(g, gpu, sw, half_hop(nvl), "nvlink")
        if intra.pcie_link is not None:
            pcie_switches = _pcie_tree(g, p, intra, gpus, len(nics), path)
            if intra.nic_attach == "pcie_switch":
                _attach_nics(g, nics, pcie_switches, intra.pcie_link)
                return gpus, nics
        for nic in nics:
            # without PCIe the NIC hangs off the node switch and may feed several fabric ports (a torus
            # router): the hop is sized by what the node's GPUs can push into the switch
            hop = half_hop(intra.pcie_link) if intra.pcie_link else host_link(
                group.nic.link, nvl.bandwidth_Bps * len(gpus))
            _add(g, nic, sw, hop, "pcie")
        return gpus, nics
    if layout is IntraNodeLayout.CUBE_MESH:
        assert len(gpus) == 8, f"{path}.gpus_per_node: a cube_mesh node has 8 GPUs (topology.validate)"
        bricks = DGX1_P100_BRICKS if is_p100_mesh(group) else DGX1_V100_BRICKS
        for (a, b), m in bricks.items():
            _add(g, gpus[a], gpus[b], nvl, "nvlink", m)
    elif layout is IntraNodeLayout.FULL_MESH:  # one link per GPU pair, no switch
        for a in range(len(gpus)):
            for b in range(a + 1, len(gpus)):
                _add(g, gpus[a], gpus[b], nvl, "nvlink")
    elif layout is IntraNodeLayout.NVLINK_PAIRS:  # gpu_link is a pair's whole bridge set; an odd last GPU has none
        for i in range(0, len(gpus) - 1, 2):
            _add(g, gpus[i], gpus[i + 1], nvl, "nvlink")
    switches = _pcie_tree(g, p, intra, gpus, len(nics), path)
    _attach_nics(g, nics, switches, intra.pcie_link)
    return gpus, nics


def _attach_nics(g: LinkGraph, nics: list[str], switches: list[str], pcie: LinkSpec | None) -> None:
    assert pcie is not None
    for m, nic in enumerate(nics):
        _add(g, nic, switches[m * len(switches) // len(nics)], half_hop(pcie), "pcie")


def add_server_interior(g: LinkGraph, s: int, nic_count: int, nic_link: LinkSpec) -> tuple[str, list[str]]:
    """A dedicated server host: endpoint "server{s}/cpu0" with non-limiting hops to its NICs."""
    cpu = f"server{s}/cpu0"
    nics = [f"server{s}/nic{m}" for m in range(nic_count)]
    g.add_node(cpu)
    for nic in nics:
        _add(g, cpu, nic, host_link(nic_link), "pcie")
    return cpu, nics


class _Recording(LinkGraph):
    """A graph that also logs its add_edge calls in order (what NodeTemplate replays)."""

    def __init__(self) -> None:
        super().__init__()
        self.edge_log: list[tuple[str, str, dict]] = []

    def add_edge(self, u_of_edge, v_of_edge, **attr) -> None:
        self.edge_log.append((u_of_edge, v_of_edge, attr))
        super().add_edge(u_of_edge, v_of_edge, **attr)


class NodeTemplate:
    """One node group's interior, built once as node 0 and stamped onto node n by renaming: its
    vertices in creation order (with their attributes, `rail` renamed too), then its add_edge calls in
    order, so the graph ends up exactly as add_node_interior(g, n, ...) leaves it, only faster."""

    _PREFIX = "node0/"

    def __init__(self, graph: _Recording, gpus: list[str], nics: list[str]) -> None:
        cut = len(self._PREFIX)
        self._nodes = [(v[cut:], {k: (x[cut:] if k == "rail" else x) for k, x in d.items()})
                       for v, d in graph.nodes(data=True)]
        self._edges = [(u[cut:], v[cut:], d) for u, v, d in graph.edge_log]
        self._gpus = [v[cut:] for v in gpus]
        self._nics = [v[cut:] for v in nics]

    @classmethod
    def record(cls, group: NodeGroupSpec, path: str) -> "NodeTemplate":
        graph = _Recording()
        gpus, nics = add_node_interior(graph, 0, group, path)
        return cls(graph, gpus, nics)

    def stamp(self, g: LinkGraph, n: int) -> tuple[list[str], list[str]]:
        """Add node n's interior to `g` (none of its vertices may exist yet); (gpu vertices, nic vertices)."""
        p = f"node{n}/"
        g.add_nodes_from((p + v, {k: (p + x if k == "rail" else x) for k, x in d.items()}) for v, d in self._nodes)
        g.add_edges_from((p + u, p + v, d) for u, v, d in self._edges)
        return [p + v for v in self._gpus], [p + v for v in self._nics]
