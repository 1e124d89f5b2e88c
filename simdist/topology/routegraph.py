"""The facts of a topology that routing reads, found once per router: hop costs without the dead cables,
which machine each vertex belongs to, the *core* graph, gateways, rails, fabric planes and D-mod-K ports.

A vertex "node3/gpu5" belongs to machine "node3" (the text before '/'); vertices without '/' are fabric.
Machine vertices adjacent to another machine are transit routers (torus/ring NICs) and join the fabric in
the core graph; the other machine vertices are only ever a flow's first or last hops. A machine's
*gateways* are its vertices cabled outside it. Nothing here changes after construction.
"""
from __future__ import annotations

from simdist.topology.graph import Topology
from simdist.topology.search import edge_cost
from simdist.topology.torus_metric import TorusMetric


def edge_costs(graph, dead: "frozenset[tuple[str, str]]") -> dict[str, dict[str, int]]:
    """{u: {w: edge_cost}} in graph.adj order without the `dead` directions; a link class's cost is
    computed once (a 100k-GPU cluster has a handful of link classes and millions of edges)."""
    memo: dict[tuple[int, int], int] = {}
    out: dict[str, dict[str, int]] = {}
    adj = getattr(graph, "_adj", None) or graph.adj  # networkx's own dict of dicts: no view per row
    for u, nbrs in adj.items():
        row = out[u] = {}
        for w, d in nbrs.items():
            if dead and (u, w) in dead:
                continue
            link, mult = d["link"], d.get("multiplicity", 1)
            c = memo.get((id(link), mult))
            if c is None:
                c = memo[(id(link), mult)] = edge_cost(link.effective_Bps * mult)
            row[w] = c
    return out


class RouteGraph:
    """A topology as routing sees it, with the cables in `down` (both directions) left out."""

    def __init__(self, topology: Topology, down: "frozenset[tuple[str, str]]" = frozenset()) -> None:
        self.topology = topology
        self.down = frozenset(down) | frozenset((v, u) for u, v in down)
        graph = topology.graph
        self.cost: dict[str, dict[str, int]] = edge_costs(graph, self.down)
        machine = self.machine = {v: (v.split("/", 1)[0] if isinstance(v, str) and "/" in v else None)
                                  for v in graph}
        self.lname = {v: (v.split("/", 1)[1] if m is not None else v) for v, m in machine.items()}  # local name
        self.vid = {v: i for i, v in enumerate(graph)}
        self.gateways: dict[str, list[str]] = {}
        self.members: dict[str, list[str]] = {}
        core = set()
        for v, m in machine.items():
            if m is None:
                core.add(v)
                continue
            self.members.setdefault(m, []).append(v)
            outside = [w for w in self.cost[v] if machine[w] != m]
            if outside:
                self.gateways.setdefault(m, []).append(v)
                if any(machine[w] is not None for w in outside):
                    core.add(v)
        self.core = core
        self.core_adj = {u: {w: c for w, c in self.cost[u].items() if w in core} for u in core}
        steps = {c for nbrs in self.core_adj.values() for c in nbrs.values()}
        self.core_step = steps.pop() if len(steps) == 1 else None  # one cost on every core edge, or None
        self.metric = TorusMetric.verify(graph.graph.get("fabric") or {}, tuple(graph.graph.get("machines", ())),
                                         self.core_adj)
        # machines stamped from one node template (topology.build): equal values, identical interiors
        self.stamped: dict[str, int] = {} if self.down else dict(graph.graph.get("node_templates") or {})
        self.rail: dict[str, str] = {v: d["rail"] for v, d in graph.nodes(data=True) if d.get("rail") in graph}
        # GPUs owning several fabric-port NICs (direct-connect planes, topology.build): flow key k leaves through
        # rails[k mod len]; `plane_count` is how many flow keys a connection needs to use them all
        self.planes: dict[str, tuple[str, ...]] = {v: tuple(d["rails"]) for v, d in graph.nodes(data=True)
                                                   if len(d.get("rails", ())) > 1}
        self.plane_count = max((len(r) for r in self.planes.values()), default=1)
        self.routing = str(graph.graph.get("routing", "ecmp"))
        # dmodk: fabric ports (machine vertices cabled to a switch) numbered in graph order
        self.port: dict[str, int] = {}
        if self.routing == "dmodk":
            for v, m in machine.items():
                if m is not None and any(machine[w] is None for w in graph.adj[v]):
                    self.port[v] = len(self.port)
        self.lane: dict[str, int] = {}  # a railed vertex's index among its machine's railed vertices
        per_machine: dict[str, int] = {}
        for v in self.rail:
            self.lane[v] = per_machine.get(machine[v], 0)
            per_machine[machine[v]] = self.lane[v] + 1
