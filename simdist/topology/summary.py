"""summary: the headline facts of a built topology, for `simdist topo` and `make demo`."""
from __future__ import annotations

from simdist.hardware.specs import ClusterSpec, LinkSpec
from simdist.topology.bisection import bisection_bandwidth_Bps, fabric_switches, link_counts, machine_of, machines
from simdist.topology.graph import Topology
from simdist.topology.routing import SPRAY_PATHS


def summary(topology: Topology) -> dict[str, object]:
    """nodes, gpus, servers, fabric switches, routing, links by kind, bisection bandwidth (effective B/s)."""
    names = machines(topology)
    servers = sum(1 for m in names if m.startswith("server"))
    node_switches = sum(1 for v in topology.graph if machine_of(v) is not None
                        and v.split("/", 1)[1].startswith(("nvswitch", "pcie")))
    return {
        "topology": topology.description,
        "nodes": len(names) - servers,
        "gpus": topology.num_gpus,
        "servers": servers,
        "fabric_switches": fabric_switches(topology),
        "routing": _routing(topology),
        "node_switches": node_switches,
        "links": link_counts(topology),
        "bisection_Bps": bisection_bandwidth_Bps(topology),
    }


def _routing(topology: Topology) -> str:
    """Which equal-cost path choice ran ('auto' already decided), as docs/network.md names it."""
    kind = str(topology.graph.graph.get("routing", "ecmp"))
    return {"dmodk": "dmodk (destination-based, InfiniBand subnet manager)", "ecmp": "ecmp (per-flow hash)",
            "spray": f"spray (each connection over {SPRAY_PATHS} hashed paths)"}.get(kind, kind)


def _link_facts(link: LinkSpec) -> dict[str, object]:
    facts: dict[str, object] = {
        "link": link.name, "transport": link.transport, "bandwidth_Bps": link.bandwidth_Bps,
        "efficiency": link.efficiency, "effective_Bps": link.effective_Bps, "latency_s": link.latency_s,
        "efficiency_basis": link.efficiency_basis or "given"}
    if link.flow_cap_Bps is not None:  # only when set (nic.flow_cap): the most one connection moves
        facts["flow_cap_Bps"] = link.flow_cap_Bps
    if link.stream_cap_Bps is not None:  # tcp above its per-stream cap (nic.stream_cap, links.yaml stream_cap)
        facts["stream_cap_Bps"] = link.stream_cap_Bps
    return facts


def link_assumptions(cluster: ClusterSpec) -> dict[str, object]:
    """Which efficiency, latency and data path each link class of a prediction used (the result's
    `links_used`): per node group its NIC (GPUDirect or host-staged) and interior, and the fabric link."""
    nics, interiors = [], []
    for i, g in enumerate(cluster.node_groups):
        path = (g.nic.staging if not g.nic.gpudirect else
                "GPUDirect RDMA: the NIC reads and writes GPU memory over the node's PCIe/NVSwitch")
        nics.append({"group": i, "count": g.nic.count, "gpudirect": g.nic.gpudirect, "path": path,
                     **_link_facts(g.nic.link)})
        interiors.append({"group": i, "intra_node": g.intra_node.key, "default": g.intra_node_default,
                          "layout": g.intra_node.layout.value, "gpu_link": _link_facts(g.intra_node.gpu_link)})
    return {"nic": nics, "intra_node": interiors, "fabric": _link_facts(cluster.fabric.link)}
