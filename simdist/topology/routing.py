"""Shortest-path routing with ECMP: equal-cost next hops are chosen per flow and per hop by a stable hash.

Edge cost (integer, so equal-cost ties are exact): 1 + round(1 TB/s / capacity), capacity = effective
bandwidth x multiplicity. One unit per hop plus the picoseconds a byte takes on the link, so a direct
NVLink (300 GB/s: 4) beats a PCIe detour (32 GB/s: 32 per hop) and among equal links fewer hops win.

Scale comes from structure. A vertex "node3/gpu5" belongs to machine "node3" (the text before '/');
vertices without '/' are fabric. Machine vertices adjacent to another machine are transit routers
(torus/ring NICs) and join the fabric in the *core* graph; the other machine vertices are only ever
a flow's first or last hops. Distances are computed by Dijkstra on the core graph once per exit vertex
(a leaf switch, a torus NIC), inside a machine once per destination vertex, and flows are walked
hop by hop, hashing (src, dst, flow_key, vertex) to pick among the equal-cost next hops.
Paths are deterministic across processes (no Python `hash()`). Between machines whose NICs are
stubs (switched fabrics), `path` takes the same decisions from per-class caches (simdist.topology.
classroutes: the same links; `Router(..., classes=False)` is the per-pair reference).

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

from simdist.errors import InfeasibleError
from simdist.topology.gcpause import gc_paused
from simdist.topology.classroutes import ClassRoutes
from simdist.topology.graph import Topology
from simdist.topology.search import INF, REFERENCE_Bps, _bfs, _dijkstra, _mix, edge_cost, flow_hash  # noqa: F401
from simdist.topology.torus_metric import TorusMetric
from simdist.topology.twins import TwinMetric

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


def _edge_costs(graph, dead: "frozenset[tuple[str, str]]") -> dict[str, dict[str, int]]:
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


def shared_router(topology: Topology) -> "Router":
    """The one default Router of `topology`, kept by the topology (its caches serve every network model
    built on it)."""
    hit = topology.shared.router
    if hit is None:
        with gc_paused():
            hit = topology.shared.router = Router(topology)
    return hit


class Router:
    """Routes endpoint-to-endpoint flows onto directed link ids; per-pair results are cached."""

    def __init__(self, topology: Topology, down: "frozenset[tuple[str, str]]" = frozenset(),
                 classes: bool = True) -> None:
        self.topology = topology
        # cross-machine routes from per-class caches (topology.classroutes: the same paths); False: the
        # general walk for every pair (the reference the tests compare against)
        self._classes = ClassRoutes(self) if classes else None
        self._mhash: dict[tuple[int, int, int], int] = {}  # (src node, dst node, key) -> flow hash
        self.down = frozenset(down) | frozenset((v, u) for u, v in down)
        self._paths: dict[tuple[str, str], list[tuple[int, ...]]] = {}
        graph = topology.graph
        dead = self.down
        self._cost: dict[str, dict[str, int]] = _edge_costs(graph, dead)
        machine = self._machine = {v: (v.split("/", 1)[0] if isinstance(v, str) and "/" in v else None) for v in graph}
        self._lname = {v: (v.split("/", 1)[1] if m is not None else v) for v, m in machine.items()}
        self._vid = {v: i for i, v in enumerate(graph)}
        self._gateways: dict[str, list[str]] = {}
        self._members: dict[str, list[str]] = {}
        core = set()
        for v, m in machine.items():
            if m is None:
                core.add(v)
                continue
            self._members.setdefault(m, []).append(v)
            outside = [w for w in self._cost[v] if machine[w] != m]
            if outside:
                self._gateways.setdefault(m, []).append(v)
                if any(machine[w] is not None for w in outside):
                    core.add(v)
        self._core = core
        self._core_adj = {u: {w: c for w, c in self._cost[u].items() if w in core} for u in core}
        steps = {c for nbrs in self._core_adj.values() for c in nbrs.values()}
        self._core_step = steps.pop() if len(steps) == 1 else None
        self._metric = TorusMetric.verify(graph.graph.get("fabric") or {}, tuple(graph.graph.get("machines", ())),
                                          self._core_adj)
        self._twins: TwinMetric | None = None  # uniform-cost cores: built on first use
        self._tmpl_of: dict[str, int] = {}
        self._tmpl_hint: dict[tuple, int] = {}
        self._stamped: dict[str, int] = {} if dead else dict(graph.graph.get("node_templates") or {})
        self._tmpl_ids: dict[tuple, int] = {}
        self._tmpl_adj: list[dict[str, dict[str, int]]] = []
        self._tmpl_gw: list[frozenset[str]] = []
        self._tlocal: dict[tuple[int, str], dict[str, int]] = {}
        self._tsrc: dict[tuple, dict[str, int]] = {}
        self._exits: dict[str, tuple[dict[str, tuple[int, tuple[str, ...]]], tuple]] = {}
        self._gw_exits: dict[str, list] = {}
        self._gw_sigs: dict[str, tuple | None] = {}
        self._src_shapes: dict[tuple, tuple] = {}  # (template, gateway hops, exits id) -> _source_dist's answer
        self._exit_shapes: dict[tuple, tuple] = {}  # (template, local name, gateway hops) -> exits by local name
        self._srckey: dict[tuple[str, int], tuple[tuple, int, dict]] = {}
        self._ekey_ids: dict[tuple, int] = {}
        self._dcore: dict[str, dict[str, int]] = {}
        self._nh: dict[str, dict[str, tuple[str, ...]]] = {}
        self._nh_twin: dict[tuple[int, str], tuple[str, ...]] = {}  # (twin class of a, v) -> _core_next(a, v)
        self._nh_local: dict[tuple, tuple[str, ...]] = {}
        self._nh_core: dict[tuple, tuple[str, ...]] = {}
        self._dag: dict[tuple[str, str], dict[str, tuple[str, ...]]] = {}
        self._rail: dict[str, str] = {v: d["rail"] for v, d in graph.nodes(data=True) if d.get("rail") in graph}
        # GPUs owning several fabric-port NICs (direct-connect planes, topology.build): flow key k leaves through
        # rails[k mod len]; `planes` is how many flow keys a connection needs to use them all (PathTable.spread)
        self._planes: dict[str, tuple[str, ...]] = {v: tuple(d["rails"]) for v, d in graph.nodes(data=True)
                                                    if len(d.get("rails", ())) > 1}
        self.planes = max((len(r) for r in self._planes.values()), default=1)
        self._via: dict[tuple[str, str], tuple[str, ...]] = {}
        self._fixed: dict[tuple[int, str, str], tuple[str, ...] | None] = {}
        self.routing = str(graph.graph.get("routing", "ecmp"))
        # dmodk: fabric ports (machine vertices cabled to a switch) numbered in graph order
        self._port: dict[str, int] = {}
        if self.routing == "dmodk":
            for v, m in machine.items():
                if m is not None and any(machine[w] is None for w in graph.adj[v]):
                    self._port[v] = len(self._port)
        self._lane: dict[str, int] = {}  # a railed vertex's index among its machine's railed vertices
        per_machine: dict[str, int] = {}
        for v in self._rail:
            self._lane[v] = per_machine.get(machine[v], 0)
            per_machine[machine[v]] = self._lane[v] + 1

    def without(self, down: "frozenset[tuple[str, str]]") -> "Router":
        """A router like this one that never uses the cables in `down` (vertex pairs, either direction)."""
        return Router(self.topology, down, classes=self._classes is not None)

    # -- machine templates: isomorphic machines share their local computations -------------------
    def _tmpl(self, m: str) -> int:
        tid = self._tmpl_of.get(m)
        if tid is not None:
            return tid
        # machines stamped from one node template (topology.build) have identical interiors: with no
        # dead links, one with the same gateways shares the template found for the first of them
        hint = self._stamped.get(m)
        if hint is not None:
            hint_key = (hint, tuple(self._lname[h] for h in self._gateways.get(m, ())))
            tid = self._tmpl_hint.get(hint_key)
            if tid is not None:
                self._tmpl_of[m] = tid
                return tid
        if tid is None:
            ln, machine = self._lname, self._machine
            adj = {ln[v]: {ln[w]: c for w, c in self._cost[v].items() if machine[w] == m} for v in self._members[m]}
            gw = frozenset(ln[h] for h in self._gateways.get(m, ()))
            key = (tuple(sorted((u, w, c) for u, nb in adj.items() for w, c in nb.items())), tuple(sorted(gw)))
            tid = self._tmpl_ids.get(key)
            if tid is None:
                tid = self._tmpl_ids[key] = len(self._tmpl_adj)
                self._tmpl_adj.append(adj)
                self._tmpl_gw.append(gw)
            self._tmpl_of[m] = tid
            if hint is not None:
                self._tmpl_hint[hint_key] = tid
        return tid

    def _local(self, t: str) -> dict[str, int]:
        """Distances to `t` inside t's machine, keyed by local vertex name."""
        key = (self._tmpl(self._machine[t]), self._lname[t])
        hit = self._tlocal.get(key)
        if hit is None:
            hit = self._tlocal[key] = _dijkstra(self._tmpl_adj[key[0]], {key[1]: 0})
        return hit

    # -- distances -------------------------------------------------------------------------------
    def _exits_of(self, t: str) -> tuple[dict[str, tuple[int, tuple[str, ...]]], tuple]:
        """Core vertices a flow to `t` leaves the core at: a -> (remaining cost, entry vertices); and a key."""
        hit = self._exits.get(t)
        if hit is not None:
            return hit
        m = self._machine[t]
        shape_key = None
        if m is not None and t not in self._core:
            sig = self._gw_sig(m)
            if sig is not None:  # the same template, vertex and gateway hops give the same exits
                shape_key = (self._tmpl(m), self._lname[t], sig)
                shape = self._exit_shapes.get(shape_key)
                if shape is not None:
                    prefix = m + "/"
                    exits = {a: (c, tuple(prefix + n for n in names)) for a, c, names in shape[0]}
                    hit = self._exits[t] = (exits, shape[1])
                    return hit
        hit = self._exits[t] = self._compute_exits(t)
        if shape_key is not None:
            ln = self._lname
            self._exit_shapes[shape_key] = (tuple((a, c, tuple(ln[h] for h in hs)) for a, (c, hs) in hit[0].items()),
                                            hit[1])
        return hit

    def _gw_sig(self, m: str) -> "tuple | None":
        """Machine m's gateways as (local name, fabric hops), or None when one is a core vertex (its
        exits are then named by the machine's own vertices)."""
        hit = self._gw_sigs.get(m, False)
        if hit is False:
            gws = self._gateway_exits(m)
            hit = None if any(outs is None for _, _, outs in gws) else tuple((ln, outs) for _, ln, outs in gws)
            self._gw_sigs[m] = hit
        return hit

    def _compute_exits(self, t: str) -> tuple[dict[str, tuple[int, tuple[str, ...]]], int]:
        exits: dict[str, tuple[int, tuple[str, ...]]] = {}
        if t in self._core:
            exits[t] = (0, ())
        m = self._machine[t]
        if m is not None:
            local = self._local(t)
            offers: dict[str, list[tuple[int, str]]] = {}
            for h, lname, outs in self._gateway_exits(m):
                lh = local.get(lname)
                if lh is None:
                    continue
                if outs is None:  # h is itself a core vertex
                    offers.setdefault(h, []).append((lh, ""))
                else:
                    for a, c in outs:
                        offers.setdefault(a, []).append((c + lh, h))
            for a, opts in offers.items():
                best = min(o[0] for o in opts)
                if a in exits and exits[a][0] <= best:
                    continue
                exits[a] = (best, tuple(sorted(h for d, h in opts if d == best and h)))
        ekey = tuple(sorted((a, c) for a, (c, _) in exits.items()))
        return exits, self._ekey_ids.setdefault(ekey, len(self._ekey_ids))  # equal exits, one id

    def _gateway_exits(self, m: str) -> "list[tuple[str, str, tuple[tuple[str, int], ...] | None]]":
        """Machine m's gateways: (vertex, local name, its (fabric vertex, cost) hops, or None for a core
        gateway), computed once per machine (every destination in m starts from them)."""
        hit = self._gw_exits.get(m)
        if hit is None:
            machine, core = self._machine, self._core
            hit = self._gw_exits[m] = [
                (h, self._lname[h],
                 None if h in core else tuple((a, c) for a, c in self._cost[h].items() if machine[a] is None))
                for h in self._gateways.get(m, ())]
        return hit

    def _core_dist(self, a: str) -> dict[str, int]:
        hit = self._dcore.get(a)
        if hit is None:
            if self._metric is not None:  # ring/torus: closed form, nothing stored per vertex
                hit = self._metric.from_vertex(a)
            elif self._core_step is not None:  # twin classes: the same integers as _bfs(core_adj, a, step)
                if self._twins is None:
                    self._twins = TwinMetric(self._core_adj, self._core_step)
                hit = self._twins.from_vertex(a)
            else:
                hit = _dijkstra(self._core_adj, {a: 0})
            self._dcore[a] = hit
        return hit

    def _d_core(self, v: str, t: str) -> float:
        best = INF
        for a, (cost, _) in self._exits_of(t)[0].items():
            d = self._core_dist(a).get(v)
            if d is not None and d + cost < best:
                best = d + cost
        return best

    def _source_dist(self, m: str, t: str) -> tuple[tuple, int, dict]:
        """(template key, base, distances): source machine m's distance to t is distances[local name] + base."""
        ekey = self._exits_of(t)[1]
        hit = self._srckey.get((m, ekey))
        if hit is not None:
            return hit
        sig = self._gw_sig(m)
        if sig is not None:  # no core gateway: the seeds depend on the template, its gateway hops and t's exits only
            shape_key = (self._tmpl(m), sig, ekey)
            hit = self._src_shapes.get(shape_key)
            if hit is not None:
                self._srckey[(m, ekey)] = hit
                return hit
        seeds = {}
        for h in self._gateways.get(m, ()):
            if h in self._core:
                d = self._d_core(h, t)
            else:
                d = min((c + self._d_core(a, t) for a, c in self._cost[h].items() if self._machine[a] != m), default=INF)
            if d < INF:
                seeds[self._lname[h]] = d
        base = min(seeds.values(), default=0)
        tid = self._tmpl(m)
        key = (tid, tuple(sorted((h, d - base) for h, d in seeds.items())))
        if key not in self._tsrc:
            self._tsrc[key] = _dijkstra(self._tmpl_adj[tid], dict(key[1]), fixed=self._tmpl_gw[tid])
        hit = self._srckey[(m, ekey)] = (key, base, self._tsrc[key])
        if sig is not None:
            self._src_shapes[shape_key] = hit
        return hit

    # -- next hops -------------------------------------------------------------------------------
    def _core_next(self, a: str, v: str) -> tuple[str, ...]:
        """v's core neighbours one step closer to core vertex a (sorted)."""
        table = self._nh.setdefault(a, {})
        hit = table.get(v)
        if hit is None:
            dist = self._core_dist(a)
            key = self._twin_key(a, v)
            hit = self._nh_twin.get(key) if key is not None else None
            if hit is None:
                dv = dist[v]
                hit = tuple(sorted(w for w, c in self._core_adj[v].items() if dist.get(w, INF) + c == dv))
                if key is not None:
                    self._nh_twin[key] = hit
            table[v] = hit
        return hit

    def _twin_key(self, a: str, v: str) -> "tuple[int, str] | None":
        """(a's twin class, v) when _core_next(a, v) is the same for every twin of a, else None.

        Twins (topology.twins: equal core neighbour sets) are at equal distances from every other
        vertex; when v is not adjacent to a (so to none of a's twins) and not one of them, neither v
        nor any neighbour of v is a or a twin of a, so every distance the answer compares is the same
        from each twin (on a fat tree: the leaves of a pod share their next hops from each core switch)."""
        tw = self._twins
        if tw is None or self._metric is not None or self._core_step is None:
            return None
        ca, cv = tw.cls.get(a), tw.cls.get(v)
        if ca is None or cv is None or ca == cv or a in self._core_adj[v]:
            return None
        return (ca, v)

    def _local_next(self, tid: int, dist: dict[str, int], key: tuple, lv: str) -> tuple[str, ...]:
        """Local names of v's in-machine neighbours one cost step closer (cached by template)."""
        hit = self._nh_local.get(key)
        if hit is None:
            dv = dist[lv]
            hit = tuple(sorted(w for w, c in self._tmpl_adj[tid][lv].items() if dist.get(w, INF) + c == dv))
            self._nh_local[key] = hit
        return hit

    def _next_hops(self, s: str, t: str, v: str) -> tuple[str, ...]:
        mt, ms, mv = self._machine[t], self._machine[s], self._machine[v]
        ln = self._lname
        if mv is not None and mv == mt and (ms == mt or v not in self._core):  # inside t's machine
            tid = self._tmpl(mt)
            local = self._local(t)
            names = self._local_next(tid, local, ("t", tid, ln[t], ln[v]), ln[v])
            return tuple(f"{mt}/{w}" for w in names)
        if v in self._core:
            exits, ekey = self._exits_of(t)
            ck = (ekey, v)
            hit = self._nh_core.get(ck)
            if hit is None:
                dv = self._d_core(v, t)
                out: set[str] = set()
                here = False
                for a, (ca, _) in exits.items():
                    da = self._core_dist(a).get(v)
                    if da is not None and da + ca == dv:
                        if a == v:
                            here = True
                        else:
                            out.update(self._core_next(a, v))
                hit = self._nh_core[ck] = (tuple(sorted(out)), here)
            hops, here = hit
            if not here:
                return hops
            entries = exits[v][1]
            if not entries and v != t:  # v is a gateway of t's machine: go inside
                local = self._local(t)
                entries = tuple(w for w, c in self._cost[v].items() if self._machine[w] == mt and w not in self._core
                                and local.get(ln[w], INF) + c == local[ln[v]])
            return tuple(sorted(set(hops) | set(entries)))
        key, base, dist = self._source_dist(mv, t)
        tid = key[0]
        lv = ln[v]
        if lv in self._tmpl_gw[tid]:  # a stub NIC: out to the fabric
            dv = dist.get(lv, INF) + base
            return tuple(sorted(a for a, c in self._cost[v].items() if self._machine[a] != mv and self._d_core(a, t) + c == dv))
        return tuple(f"{mv}/{w}" for w in self._local_next(tid, dist, ("s", key, lv), lv))

    def _hops(self, dag: dict, s: str, t: str, v: str) -> tuple[str, ...]:
        hops = dag.get(v)
        if hops is None:
            hops = dag[v] = self._next_hops(s, t, v)
            if not hops:
                raise InfeasibleError(f"no route from {s} to {t} (stuck at {v})")
        return hops

    # -- public ----------------------------------------------------------------------------------
    def distance(self, src_vertex: str, dst_vertex: str) -> float:
        """The routing cost between two vertices (inf when unreachable)."""
        if src_vertex == dst_vertex:
            return 0
        mt, ms = self._machine[dst_vertex], self._machine[src_vertex]
        if mt is not None and ms == mt:
            return self._local(dst_vertex).get(self._lname[src_vertex], INF)
        if src_vertex in self._core:
            return self._d_core(src_vertex, dst_vertex)
        _, base, dist = self._source_dist(ms, dst_vertex)
        return dist.get(self._lname[src_vertex], INF) + base

    def waypoints(self, src_vertex: str, dst_vertex: str) -> tuple[str, ...]:
        """The rail NICs a flow between two machines is pinned to: the source's rail NIC, then the
        destination's, each kept only when it lies on a least-cost path (so paths stay least-cost)."""
        key = (src_vertex, dst_vertex)
        hit = self._via.get(key)
        if hit is not None:
            return hit
        hit = self._via[key] = self._least_cost_via(src_vertex, dst_vertex, self._rail.get(src_vertex),
                                                    self._rail.get(dst_vertex))
        return hit

    def _least_cost_via(self, src_vertex: str, dst_vertex: str, src_rail: "str | None",
                        dst_rail: "str | None") -> tuple[str, ...]:
        """The NICs `src_rail`, then `dst_rail`, each kept only when it lies on a least-cost path."""
        via: list[str] = []
        if src_vertex != dst_vertex and self._machine[dst_vertex] != self._machine[src_vertex]:
            here = src_vertex
            total = None  # distance(here, dst_vertex), carried over when `here` moves to a rail
            for rail in (src_rail, dst_rail):
                if rail is not None and rail != here:
                    if total is None:
                        total = self.distance(here, dst_vertex)
                    if total < INF:
                        rest = self.distance(rail, dst_vertex)
                        if self.distance(here, rail) + rest == total:
                            via.append(rail)
                            here, total = rail, rest
        return tuple(via)

    def _plane_via(self, src_vertex: str, dst_vertex: str, flow_key: int) -> tuple[str, ...]:
        """waypoints for flow key `flow_key` of a connection whose GPU owns several fabric planes: it leaves
        (enters) through plane flow_key mod its planes, so a connection split over `planes` keys uses each."""
        rails = []
        for v in (src_vertex, dst_vertex):
            planes = self._planes.get(v)
            rails.append(planes[flow_key % len(planes)] if planes else self._rail.get(v))
        key = (src_vertex, dst_vertex, rails[0], rails[1])
        hit = self._via.get(key)
        if hit is None:
            hit = self._via[key] = self._least_cost_via(src_vertex, dst_vertex, rails[0], rails[1])
        return hit

    def vertex_path(self, src_vertex: str, dst_vertex: str, flow_hash_: int = 0, offset: int = 0) -> list[str]:
        """One least-cost vertex path; at each branching hop the next vertex is picked by `flow_hash_`.

        Between machines the path goes through the rail NICs of `waypoints` (NIC affinity); `offset`
        shifts every ECMP pick (rails of one machine pair apart)."""
        path = [src_vertex]
        via = self.waypoints(src_vertex, dst_vertex)
        for v in via + (dst_vertex,):
            path.extend(self._walk(path[-1], v, flow_hash_, offset, reachable=bool(via))[1:])
        return path

    def _links(self, src_vertex: str, dst_vertex: str, flow_hash_: int, offset: int,
               via: "tuple[str, ...] | None" = None) -> list[int]:
        """vertex_path as directed link ids; a stretch inside one machine without an equal-cost branch
        (GPU to its rail NIC) is its machine template's fixed path, which the walk would follow too."""
        index = self.topology.links.index
        machine = self._machine
        out: list[int] = []
        here = src_vertex
        if via is None:
            via = self.waypoints(src_vertex, dst_vertex)
        for v in via + (dst_vertex,):
            m = machine[here]
            fixed = self._fixed_local(m, here, v) if m is not None and m == machine[v] else None
            if fixed is not None:
                out.extend(fixed)
            else:
                p = self._walk(here, v, flow_hash_, offset, reachable=bool(via))
                out.extend(index[(p[i], p[i + 1])] for i in range(len(p) - 1))
            here = v
        return out

    def _walk(self, src_vertex: str, dst_vertex: str, flow_hash_: int, offset: int = 0,
              reachable: bool = False) -> list[str]:
        """One least-cost vertex path by per-hop hashing; `reachable`: the caller checked the distance."""
        path = [src_vertex]
        if src_vertex == dst_vertex:
            return path
        dag = self._dag.get((src_vertex, dst_vertex))
        if dag is None:
            if not reachable and self.distance(src_vertex, dst_vertex) == INF:
                raise InfeasibleError(f"no route from {src_vertex} to {dst_vertex}")
            dag = self._dag[(src_vertex, dst_vertex)] = {}
        v = src_vertex
        if self._port:  # dmodk: at switches, successive digits of the destination port pick the next hop
            digits = self._port.get(dst_vertex, self._vid[dst_vertex])
            machine = self._machine
            while v != dst_vertex:
                hops = dag.get(v) or self._hops(dag, src_vertex, dst_vertex, v)
                if len(hops) == 1:
                    v = hops[0]
                elif machine[v] is None:
                    v = hops[digits % len(hops)]
                    digits //= len(hops)
                else:
                    v = hops[(_mix(flow_hash_ ^ self._vid[v]) + offset) % len(hops)]
                path.append(v)
            return path
        while v != dst_vertex:
            hops = dag.get(v) or self._hops(dag, src_vertex, dst_vertex, v)
            v = hops[0] if len(hops) == 1 else hops[(_mix(flow_hash_ ^ self._vid[v]) + offset) % len(hops)]
            path.append(v)
        return path

    def _fixed_local(self, m: str, s: str, t: str) -> tuple[int, ...] | None:
        """The path between two vertices of machine m when it has no equal-cost branch (so no hash can
        change it): found once per machine template and local pair, then only its link ids are looked up."""
        tid = self._tmpl(m)
        ln = self._lname
        key = (tid, ln[s], ln[t])
        names = self._fixed.get(key, False)
        if names is False:
            local = self._local(t)
            names = [ln[s]]
            while names is not None and names[-1] != ln[t]:
                lv = names[-1]
                if lv not in local:
                    names = None  # unreachable inside: the general walk reports it
                    break
                hops = self._local_next(tid, local, ("t", tid, ln[t], lv), lv)
                names = names + [hops[0]] if len(hops) == 1 else None
            names = self._fixed[key] = tuple(names) if names is not None else None
        if names is None:
            return None
        index = self.topology.links.index
        prefix = m + "/"
        return tuple(index[(prefix + a, prefix + b)] for a, b in zip(names, names[1:]))

    def equal_cost_paths(self, src_vertex: str, dst_vertex: str) -> list[tuple[int, ...]]:
        """All least-cost paths between two vertices, as directed link id tuples, sorted by vertex names.

        Enumerates every path: meant for small cases and tests; flows use `path` (per-hop hashing).
        """
        key = (src_vertex, dst_vertex)
        if key not in self._paths:
            if src_vertex == dst_vertex:
                self._paths[key] = [()]
                return self._paths[key]
            self._walk(src_vertex, dst_vertex, 0)  # checks reachability, creates the DAG
            dag = self._dag[key]
            found: list[list[str]] = []
            stack = [[src_vertex]]
            while stack:
                p = stack.pop()
                if p[-1] == dst_vertex:
                    found.append(p)
                    continue
                stack.extend(p + [w] for w in self._hops(dag, src_vertex, dst_vertex, p[-1]))
            index = self.topology.links.index
            self._paths[key] = [tuple(index[(p[i], p[i + 1])] for i in range(len(p) - 1)) for p in sorted(found)]
        return self._paths[key]

    def paths_flat(self, pairs) -> tuple[list[int], list[int]]:
        """path(src, dst, 0) of every (src, dst) pair, in order: (all their link ids, one path after
        another; each path's number of links). A whole step's routes without a tuple per pair."""
        if self._classes is not None:
            return self._classes.paths_flat(pairs, self.path)
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
        if self._classes is not None:
            hit = self._classes.pair(src, dst, flow_key)
            if hit is not None:
                return hit
        eps = self.topology.endpoints
        s, t = eps[src], eps[dst]
        m = self._machine[s]
        if m is not None and m == self._machine[t]:
            fixed = self._fixed_local(m, s, t)
            if fixed is not None:
                return fixed
        elif self._planes and (s in self._planes or t in self._planes):
            return self._plane_path(src, dst, s, t, flow_key)
        links = self._links if self._classes is None or m == self._machine[t] else self._classes.links
        if s in self._lane and m != self._machine[t]:
            return tuple(links(s, t, self._machine_pair_hash(src, dst, flow_key), self._lane[s]))
        return tuple(links(s, t, flow_hash(src, dst, flow_key), 0))

    def _machine_pair_hash(self, src: int, dst: int, flow_key: int) -> int:
        """A railed GPU's flow hash: one per (source machine, destination machine, key), whichever rail."""
        nodes = self.topology.endpoint_node
        key = (nodes[src], nodes[dst], flow_key)
        h = self._mhash.get(key)
        if h is None:
            h = self._mhash[key] = flow_hash(-1 - key[0], -1 - key[1], flow_key)
        return h

    def _plane_path(self, src: int, dst: int, s: str, t: str, flow_key: int) -> tuple[int, ...]:
        """path() between machines for a GPU that owns several fabric planes: through plane flow_key mod its
        planes (_plane_via), hashed as any railed pair (per machine pair, offset by the GPU's lane)."""
        via = self._plane_via(s, t, flow_key)
        if s in self._lane:
            return tuple(self._links(s, t, self._machine_pair_hash(src, dst, flow_key), self._lane[s], via))
        return tuple(self._links(s, t, flow_hash(src, dst, flow_key), 0, via))
