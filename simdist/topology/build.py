"""build_topology: a ClusterSpec (plus optional dedicated server hosts) as one graph (a LinkGraph, topology.plain).

Machines are the worker nodes in ClusterSpec order, then `server_hosts` parameter servers (each a
"server{s}/cpu0" endpoint with `server_nic`, default the first node group's NIC). `host_servers` adds
parameter servers inside the worker nodes instead: endpoints at their CPU sockets' vertices (host_server_vertices). The fabric builder
is chosen from FABRIC_BUILDERS by FabricSpec.topology; structural facts go to `graph.graph["fabric"]`
(used by bisection and drawing).

The nodes of a group are alike: the first one's interior is built once and copied (NodeTemplate),
which gives the graph the very nodes, edges and insertion order that building each node would.

A Topology is never modified after it is built: the process's context cache (engine/context_cache.py) keeps
the built ones, so every run on the same cluster in one process (simulate then estimate, the cluster states of
a failure run, the load's failure-target check) shares one, with the routes and compiled steps it keeps
(Topology.shared).
"""
from __future__ import annotations

from itertools import count as count_from, takewhile
from typing import Callable

from simdist.errors import InfeasibleError
from simdist.hardware.specs import ClusterSpec, FabricSpec, NicSpec, RoutingKind, TopologyKind
from simdist.topology.custom import build_custom
from simdist.topology.direct import build_direct
from simdist.topology.fattree import build_fat_tree, build_single_switch
from simdist.topology.gcpause import gc_paused
from simdist.topology.graph import Topology
from simdist.topology.intranode import NodeTemplate, add_node_interior, add_server_interior, rail_share
from simdist.topology.machines import Machine, spread_over_nodes
from simdist.topology.plain import LinkGraph

FabricBuilder = Callable[[LinkGraph, FabricSpec, list[Machine]], str]

FABRIC_BUILDERS: dict[TopologyKind, FabricBuilder] = {
    TopologyKind.SINGLE_SWITCH: build_single_switch,
    TopologyKind.FAT_TREE: build_fat_tree,
    TopologyKind.LEAF_SPINE: build_fat_tree,
    TopologyKind.RING: build_direct,
    TopologyKind.TORUS2D: build_direct,
    TopologyKind.TORUS3D: build_direct,
    TopologyKind.CUSTOM: build_custom,
}


SWITCHED = (TopologyKind.FAT_TREE, TopologyKind.LEAF_SPINE, TopologyKind.CUSTOM)


def resolve_routing(cluster: ClusterSpec, server_nic: NicSpec | None = None) -> RoutingKind:
    """fabric.routing with `auto` decided: dmodk on a switched multi-path fabric whose NICs are all rdma
    (an InfiniBand subnet manager routes by destination), else ecmp."""
    routing = RoutingKind(cluster.fabric.routing)
    if routing is not RoutingKind.AUTO:
        return routing
    nics = [g.nic for g in cluster.node_groups] + ([server_nic] if server_nic is not None else [])
    rdma = all(n.link.transport == "rdma" for n in nics)
    return RoutingKind.DMODK if rdma and TopologyKind(cluster.fabric.topology) in SWITCHED else RoutingKind.ECMP


def build_topology(cluster: ClusterSpec, server_hosts: int = 0, server_nic: NicSpec | None = None,
                   host_servers: int = 0) -> Topology:
    """The whole cluster (node interiors, servers, fabric) as a Topology, of a cluster topology.validate passes
    (io/ refuses the rest). Each call builds anew: engine/context_cache.py's `shared_topology` keeps them."""
    with gc_paused():
        return _build(cluster, server_hosts, server_nic, host_servers)


def host_server_vertices(g: LinkGraph, cluster: ClusterSpec, count: int) -> list[tuple[str, int]]:
    """(vertex, node) of `count` parameter servers in the worker nodes' host memory: socket 0 of nodes spread
    evenly over the cluster first, then socket 1 of nodes that have one, and so on (io.rules checks the nodes have
    that many sockets in the graph: a node without a PCIe tree has none)."""
    sockets = [[(v, n) for v in takewhile(g.__contains__, (f"node{n}/cpu{k}" for k in count_from(0)))]
               for n in range(cluster.num_nodes)]  # a node's sockets are cpu0, cpu1, ... (intranode._pcie_tree)
    if count > sum(len(s) for s in sockets):  # io.rules checks the scenario's nodes; a failure state's has fewer
        raise InfeasibleError(f"{count} parameter servers in host memory, {sum(len(s) for s in sockets)} CPU "
                              "sockets in the nodes left")
    return spread_over_nodes(sockets, count)


def _assert_derived_from_a_validated_cluster(cluster: ClusterSpec, server_hosts: int, server_nic: NicSpec | None) -> None:
    """What a built cluster must be: the scenario's, which io.resolve_cluster ran topology.validate on, or a failure
    state's, the same with node counts lowered (engine.composite's shrunk cluster). validate's rules bound the
    machine count from above or check a node's own figures, so a shrunk cluster passes them too
    (tests/io/test_shrunk_cluster.py): invariants here, not a second run of the rules."""
    assert cluster.node_groups and all(g.count >= 1 for g in cluster.node_groups), "no node left to build"
    assert server_hosts >= 0 and (server_nic is None or server_nic.count >= 1), "io.rules: servers and their NICs"


def _build(cluster: ClusterSpec, server_hosts: int, server_nic: NicSpec | None, host_servers: int = 0) -> Topology:
    _assert_derived_from_a_validated_cluster(cluster, server_hosts, server_nic)
    g = LinkGraph()
    endpoints: list[str] = []
    endpoint_node: list[int] = []
    machines: list[Machine] = []
    n = 0
    stamped: dict[str, int] = {}  # machine prefix -> node group whose template it was stamped from
    for gi, group in enumerate(cluster.node_groups):
        template = NodeTemplate.record(group, f"cluster.nodes.{gi}") if group.count > 1 else None
        for _ in range(group.count):
            if template is None:
                gpus, nics = add_node_interior(g, n, group, f"cluster.nodes.{gi}")
            else:
                gpus, nics = template.stamp(g, n)
                stamped[f"node{n}"] = gi
            endpoints.extend(gpus)
            endpoint_node.extend([n] * len(gpus))
            machines.append(Machine(f"node{n}", tuple(nics), group.nic.link))
            n += 1
    for vertex, node in host_server_vertices(g, cluster, host_servers):
        endpoints.append(vertex)
        endpoint_node.append(node)
    nic = server_nic or cluster.node_groups[0].nic
    for s in range(server_hosts):
        cpu, nics = add_server_interior(g, s, nic.count, nic.link)
        endpoints.append(cpu)
        endpoint_node.append(n + s)
        machines.append(Machine(f"server{s}", tuple(nics), nic.link))
    kind = TopologyKind(cluster.fabric.topology)
    description = FABRIC_BUILDERS[kind](g, cluster.fabric, machines)
    g.graph["topology"] = kind.value
    g.graph["routing"] = resolve_routing(cluster, nic if server_hosts else None).value
    g.graph["machines"] = tuple(m.prefix for m in machines)
    g.graph["workers"] = n
    for m in machines:  # a fabric edge between two vertices of one machine would change its interior
        if m.prefix in stamped and any(w.startswith(m.prefix + "/") and d.get("kind") in ("fabric", "nic")
                                       for nic in m.nics for w, d in g._adj[nic].items()):
            del stamped[m.prefix]
    g.graph["node_templates"] = stamped  # machines with equal values have identical interiors (routing)
    _add_fabric_planes(g, machines[:n])
    return Topology(g, tuple(endpoints), tuple(endpoint_node), cluster.num_gpus, description)


def _add_fabric_planes(g: LinkGraph, machines: "list[Machine]") -> None:
    """On a direct-connect fabric (torus, ring, or a custom graph cabling NICs to other machines' NICs) each NIC
    is a port of the fabric, one plane of it, as a TPU's ICI links are its chip's own: a GPU drives every NIC it
    owns (intranode.rail_share) at once, so it gets them all as `rails` and topology.routing spreads its flows
    over them. On switched fabrics a GPU keeps its one rail NIC (NCCL binds a GPU to its nearest NIC)."""
    def cabled_to_machines(m: Machine) -> bool:
        return any("/" in w and not w.startswith(m.prefix + "/") for nic in m.nics for w in g._adj[nic])

    planed = {m.prefix: m for m in machines if len(m.nics) > 1 and cabled_to_machines(m)}
    if not planed:
        return
    gpus: dict[str, list[tuple[int, str]]] = {}
    for v, d in g.nodes(data=True):
        prefix = v.split("/", 1)[0]
        if prefix in planed and d.get("rail") is not None and "/gpu" in v:
            gpus.setdefault(prefix, []).append((int(v.rsplit("gpu", 1)[1]), v))
    for prefix, found in gpus.items():
        nics = planed[prefix].nics
        for j, (_, gpu) in enumerate(sorted(found)):
            share = rail_share(j, len(found), len(nics))
            if len(share) > 1:
                g.nodes[gpu]["rails"] = tuple(nics[i] for i in share)
