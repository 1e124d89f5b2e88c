"""Bisection bandwidth: the capacity (one direction, effective bytes/s) between two halves of the machines.

Builders' fabrics use closed forms (the worst balanced cut of the structure):
- single switch: the NICs of the smaller half, sum of the floor(N/2) smallest machine NIC capacities;
- fat tree: min(that host bound, floor(leaves/2) x leaf uplink capacity, floor(pods/2) x pod uplink capacity),
  a level with a single leaf or pod not being crossed;
- ring: 2 links (cut in two places) x planes; complete torus whose first side is the longest and even:
  2 x (N / that side) links x planes.
Custom graphs, incomplete tori and hand-built graphs fall back to max-flow between the first and the
second half of the machines (in machine order), which is exact for that cut.
"""
from __future__ import annotations

from simdist.topology.graph import Topology


def machine_of(vertex: object) -> str | None:
    """"node3" for "node3/gpu1"; None for fabric vertices."""
    return vertex.split("/", 1)[0] if isinstance(vertex, str) and "/" in vertex else None


def machines(topology: Topology) -> list[str]:
    """Machine prefixes in order (workers, then servers)."""
    known = topology.graph.graph.get("machines")
    if known is not None:
        return list(known)
    seen: dict[str, None] = {}
    for v in topology.endpoints:
        seen.setdefault(machine_of(v) or v, None)
    return list(seen)


def _nic_capacity(topology: Topology) -> dict[str, float]:
    """Effective capacity of each machine's links to the outside."""
    cap: dict[str, float] = {}
    for u, v, data in topology.graph.edges(data=True):
        mu, mv = machine_of(u), machine_of(v)
        if mu != mv and data.get("kind") == "nic":
            m = mu or mv
            cap[m] = cap.get(m, 0.0) + data["link"].effective_Bps * data.get("multiplicity", 1)
    return cap


def _fabric_link_Bps(topology: Topology) -> float:
    for _, _, data in topology.graph.edges(data=True):
        if data.get("kind") == "fabric":
            return data["link"].effective_Bps
    return 0.0


def max_flow_bisection_Bps(topology: Topology) -> float:
    """Max-flow between the first and second half of the machines (each edge both ways at capacity)."""
    names = machines(topology)
    half = len(names) // 2
    if half == 0:
        return 0.0
    side = {m: (0 if i < half else 1) for i, m in enumerate(names)}
    import networkx as nx  # only here: the closed forms above cover the built-in fabrics

    g = topology.graph
    d = nx.DiGraph()
    for u, v, data in g.edges(data=True):
        cap = data["link"].effective_Bps * data.get("multiplicity", 1)
        d.add_edge(u, v, capacity=cap)
        d.add_edge(v, u, capacity=cap)
    for v in g:
        m = machine_of(v) or (v if v in side else None)
        if m in side:
            d.add_edge("__src__" if side[m] == 0 else v, v if side[m] == 0 else "__dst__")  # no capacity = infinite
    return float(nx.maximum_flow_value(d, "__src__", "__dst__"))


def bisection_bandwidth_Bps(topology: Topology) -> float:
    """Bisection bandwidth of the topology (see the module docstring for the rules)."""
    meta = topology.graph.graph.get("fabric", {})
    kind = meta.get("kind")
    names = machines(topology)
    n = len(names)
    if n < 2:
        return 0.0
    nic = _nic_capacity(topology)  # once: it walks every edge
    caps = sorted(nic.get(m, 0.0) for m in names)
    hosts = sum(caps[: n // 2])
    if kind == "single_switch":
        return hosts
    if kind == "fat_tree":  # a level with one switch (one leaf, one pod) is not crossed by the cut
        out = hosts
        if meta["leaves"] >= 2:
            out = min(out, (meta["leaves"] // 2) * meta["leaf_uplink_Bps"])
        if meta.get("levels") == 3 and meta["pods"] >= 2:
            out = min(out, (meta["pods"] // 2) * meta["pod_uplink_Bps"])
        return out
    link = _fabric_link_Bps(topology)
    if kind == "ring" and n > 2:
        return 2 * link * meta["planes"]
    dims = meta.get("dims", ())
    if kind in ("torus2d", "torus3d") and meta.get("complete") and dims[0] == max(dims) > 2 and dims[0] % 2 == 0:
        return 2 * (n // dims[0]) * link * meta["planes"]
    return max_flow_bisection_Bps(topology)


def _link_count(data: dict) -> int:
    return int(data.get("multiplicity", 1))


def link_counts(topology: Topology) -> dict[str, int]:
    """Cables by kind (nvlink, pcie, socket, nic, fabric), parallel cables counted."""
    out: dict[str, int] = {}
    for _, _, data in topology.graph.edges(data=True):
        kind = data.get("kind", "other")
        out[kind] = out.get(kind, 0) + _link_count(data)
    return dict(sorted(out.items()))


def fabric_switches(topology: Topology) -> int:
    """Vertices outside every machine (switches, routers)."""
    return sum(1 for v in topology.graph if machine_of(v) is None)

