"""Shortest-path routing with ECMP: equal-cost next hops are chosen per flow and per hop by a stable hash.

Edge cost (integer, so equal-cost ties are exact): 1 + round(1 TB/s / capacity), capacity = effective
bandwidth x multiplicity. One unit per hop plus the picoseconds a byte takes on the link, so a direct
NVLink (300 GB/s: 4) beats a PCIe detour (32 GB/s: 32 per hop) and among equal links fewer hops win.

Scale comes from structure (topology.routegraph): a vertex "node3/gpu5" belongs to machine "node3";
machine vertices cabled to another machine are transit routers and join the fabric in the *core* graph.
Distances are computed on the core graph once per exit vertex and inside a machine once per destination
vertex per machine template (topology.distances), and flows are walked hop by hop, hashing (src, dst,
flow_key, vertex) to pick among the equal-cost next hops (topology.walk). Paths are deterministic across
processes (no Python `hash()`). Between machines whose NICs are stubs (switched fabrics), `path` takes
the same decisions from per-class caches (topology.classroutes: the same links; `Router(...,
classes=False)` is the per-pair reference). The Router owns these pieces, and a built topology owns its
default Router (`shared_router`), so every run on one cluster shares its routes.

Routing modes (topology.graph.graph["routing"], from cluster.fabric.routing): `ecmp` picks by hash
as above; `dmodk` (InfiniBand subnet manager, D-mod-K / ftree) picks at every branching *switch* by
successive digits of the destination: the destination port index p (fabric ports numbered in graph
order: node-major, NIC by NIC) takes hops[p mod k1], then hops[(p // k1) mod k2] higher up, so the
flows of a shift or halving-doubling step climb to distinct spines and come down distinct ports;
branches inside machines still hash. `spray` routes like ecmp; the network splits each connection
over SPRAY_PATHS flow keys (simdist.network.paths).

Rails (NIC affinity, as NCCL binds GPUs to NICs): a vertex with a `rail` attribute (a GPU, set by
topology.intranode: GPU j of g uses NIC floor(j*m/g)) leaves its machine through that NIC, and a flow
to it enters through that NIC, whenever the NIC lies on a least-cost path; otherwise plain ECMP.
Rails stay apart in the fabric: a flow from a railed GPU (local index j among its machine's railed
GPUs) to another machine hashes (src machine, dst machine, key) and offsets each ECMP pick by j, so
the GPUs (rails) of one machine pair take different equal-cost paths (spines) and no two channels of
a ring collide on an uplink by chance, while machine pairs still spread by hash.
"""
from __future__ import annotations

from typing import Sequence

from simdist.topology.classroutes import ClassRoutes
from simdist.topology.distances import Distances
from simdist.topology.gcpause import gc_paused
from simdist.topology.graph import Topology
from simdist.topology.routegraph import RouteGraph
from simdist.topology.search import flow_hash
from simdist.topology.walk import Walker

SPRAY_PATHS = 4  # paths one connection is split over with routing 'spray' (NCCL queue pairs per connection)


def ring_channels(topology: Topology, nodes: Sequence[Sequence[int]]) -> int:
    """Concurrent rings worth running over a group (its endpoints by node, Group.nodes): the fewest
    distinct rail NICs the group's endpoints use on one node (C = NICs per node for whole DGX-style
    nodes; 1 with one NIC, for endpoints without rails, or for a single-node group)."""
    if len(nodes) <= 1:
        return 1
    attrs = topology.graph.nodes
    counts = [len({attrs[topology.endpoints[e]].get("rail") for e in node} - {None}) for node in nodes]
    return max(1, min(counts, default=1))


def shared_router(topology: Topology) -> "Router":
    """The one default Router of `topology`, kept by the topology (its caches serve every network model
    built on it)."""
    hit = topology.shared.router
    if hit is None:
        with gc_paused():
            hit = topology.shared.router = Router(topology)
    return hit


class Router:
    """Routes endpoint-to-endpoint flows onto directed link ids. It owns the routing facts of its topology
    without the `down` cables (`graph`), their distances and next hops (`distances`), the walks over them
    (`walker`) and, unless `classes` is False, the per-class routes between machines (`classes`); each
    keeps what it computes, so a route is found once."""

    def __init__(self, topology: Topology, down: "frozenset[tuple[str, str]]" = frozenset(),
                 classes: bool = True) -> None:
        self.topology = topology
        self.graph = RouteGraph(topology, down)
        self.routing = self.graph.routing  # ecmp | dmodk | spray (network.paths splits connections for spray)
        self.planes = self.graph.plane_count  # flow keys a connection needs to use all of a GPU's planes
        self.distances = Distances(self.graph)
        self.walker = Walker(self.graph, self.distances)
        # cross-machine routes from per-class caches (the same paths); None: the general walk for every pair
        # (the reference the tests compare against)
        self.classes = ClassRoutes(self.graph, self.distances, self.walker) if classes else None
        self._machine, self._lane, self._planes = self.graph.machine, self.graph.lane, self.graph.planes

    def without(self, down: "frozenset[tuple[str, str]]") -> "Router":
        """A router like this one that never uses the cables in `down` (vertex pairs, either direction)."""
        return Router(self.topology, down, classes=self.classes is not None)

    def distance(self, src_vertex: str, dst_vertex: str) -> float:
        """The routing cost between two vertices (inf when unreachable)."""
        return self.distances.distance(src_vertex, dst_vertex)

    def waypoints(self, src_vertex: str, dst_vertex: str) -> tuple[str, ...]:
        """The rail NICs a flow between two machines is pinned to: the source's rail NIC, then the
        destination's, each kept only when it lies on a least-cost path (so paths stay least-cost)."""
        return self.walker.waypoints(src_vertex, dst_vertex)

    def vertex_path(self, src_vertex: str, dst_vertex: str, flow_hash_: int = 0, offset: int = 0) -> list[str]:
        """One least-cost vertex path; at each branching hop the next vertex is picked by `flow_hash_`
        (through the rail NICs of `waypoints`; `offset` shifts every ECMP pick)."""
        return self.walker.vertex_path(src_vertex, dst_vertex, flow_hash_, offset)

    def equal_cost_paths(self, src_vertex: str, dst_vertex: str) -> list[tuple[int, ...]]:
        """All least-cost paths between two vertices, as directed link id tuples, sorted by vertex names
        (every path: meant for small cases and tests; flows use `path`)."""
        return self.walker.equal_cost_paths(src_vertex, dst_vertex)

    def paths_flat(self, pairs) -> tuple[list[int], list[int]]:
        """path(src, dst, 0) of every (src, dst) pair, in order: (all their link ids, one path after
        another; each path's number of links). A whole step's routes without a tuple per pair."""
        if self.classes is not None:  # a pair the class routes decline takes the rest of path() at once
            return self.classes.paths_flat(pairs, self._path_unclassed)
        flat: list[int] = []
        lengths: list[int] = []
        for src, dst in pairs:
            p = self.path(src, dst, 0)
            flat.extend(p)
            lengths.append(len(p))
        return flat, lengths

    def path(self, src: int, dst: int, flow_key: int = 0) -> tuple[int, ...]:
        """Directed link ids from endpoint `src` to endpoint `dst`; ECMP per hop by hash of (src, dst, key),
        or from a railed GPU to another machine by hash of the machine pair, offset by the GPU's lane."""
        if src == dst:
            return ()
        if self.classes is not None:
            hit = self.classes.pair(src, dst, flow_key)
            if hit is not None:
                return hit
        return self._path_unclassed(src, dst, flow_key)

    def _path_unclassed(self, src: int, dst: int, flow_key: int) -> tuple[int, ...]:
        """path(src, dst, flow_key) for src != dst once the class routes (if any) have declined the pair."""
        eps = self.topology.endpoints
        s, t = eps[src], eps[dst]
        m = self._machine[s]
        if m is not None and m == self._machine[t]:
            fixed = self.distances.fixed_local(m, s, t)
            if fixed is not None:
                return fixed
        elif self._planes and (s in self._planes or t in self._planes):
            return self._plane_path(src, dst, s, t, flow_key)
        links = self.walker.links if self.classes is None or m == self._machine[t] else self.classes.links
        if s in self._lane and m != self._machine[t]:
            return tuple(links(s, t, self._machine_pair_hash(src, dst, flow_key), self._lane[s]))
        return tuple(links(s, t, flow_hash(src, dst, flow_key), 0))

    def _machine_pair_hash(self, src: int, dst: int, flow_key: int) -> int:
        """A railed GPU's flow hash: one per (source machine, destination machine, key), whichever rail."""
        nodes = self.topology.endpoint_node
        return self.walker.machine_pair_hash(nodes[src], nodes[dst], flow_key)

    def _plane_path(self, src: int, dst: int, s: str, t: str, flow_key: int) -> tuple[int, ...]:
        """path() between machines for a GPU that owns several fabric planes: through plane flow_key mod its
        planes (Walker.plane_waypoints), hashed as any railed pair (per machine pair, offset by the GPU's lane)."""
        via = self.walker.plane_waypoints(s, t, flow_key)
        if s in self._lane:
            return tuple(self.walker.links(s, t, self._machine_pair_hash(src, dst, flow_key), self._lane[s], via))
        return tuple(self.walker.links(s, t, flow_hash(src, dst, flow_key), 0, via))
