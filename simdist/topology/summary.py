"""summary: the headline facts of a built topology, for `simdist topo` and `make demo`."""
from __future__ import annotations

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
