"""Least-cost distances and next hops of a RouteGraph, computed on demand and kept (the router's memos).

Distances are computed by Dijkstra on the core graph once per exit vertex (a leaf switch, a torus NIC:
closed forms on rings and tori, twin classes on uniform-cost cores), and inside a machine once per
destination vertex per machine *template*: isomorphic machines share their local computations. A
destination's *exits* are the core vertices a flow to it leaves the core at, with the remaining cost;
destinations with equal exits share one exits key, and with it their next hops at every switch.
"""
from __future__ import annotations

from simdist.topology.routegraph import RouteGraph
from simdist.topology.search import INF, dijkstra
from simdist.topology.twins import TwinMetric


class Distances:
    """Distances, exits and next hops over `graph`, each found once and kept."""

    def __init__(self, graph: RouteGraph) -> None:
        self.graph = graph
        # the graph's facts, read on every call
        self._cost, self._machine, self._lname = graph.cost, graph.machine, graph.lname
        self._gateways, self._members, self._core = graph.gateways, graph.members, graph.core
        self._core_adj, self._core_step, self._metric = graph.core_adj, graph.core_step, graph.metric
        self._stamped = graph.stamped
        self._links = graph.topology.links
        # memos
        self._twins: TwinMetric | None = None  # uniform-cost cores: built on first use
        self._tmpl_of: dict[str, int] = {}
        self._tmpl_hint: dict[tuple, int] = {}
        self._tmpl_ids: dict[tuple, int] = {}
        self._tmpl_adj: list[dict[str, dict[str, int]]] = []
        self._tmpl_gw: list[frozenset[str]] = []
        self._tlocal: dict[tuple[int, str], dict[str, int]] = {}
        self._tsrc: dict[tuple, dict[str, int]] = {}
        self._exits: dict[str, tuple[dict[str, tuple[int, tuple[str, ...]]], tuple]] = {}
        self._gw_exits: dict[str, list] = {}
        self._gw_sigs: dict[str, tuple | None] = {}
        self._src_shapes: dict[tuple, tuple] = {}  # (template, gateway hops, exits id) -> source_dist's answer
        self._exit_shapes: dict[tuple, tuple] = {}  # (template, local name, gateway hops) -> exits by local name
        self._srckey: dict[tuple[str, int], tuple[tuple, int, dict]] = {}
        self._ekey_ids: dict[tuple, int] = {}
        self._dcore: dict[str, dict[str, int]] = {}
        self._nh: dict[str, dict[str, tuple[str, ...]]] = {}
        self._nh_twin: dict[tuple[int, str], tuple[str, ...]] = {}  # (twin class of a, v) -> core_next(a, v)
        self._nh_local: dict[tuple, tuple[str, ...]] = {}
        self._nh_core: dict[tuple, tuple[str, ...]] = {}
        self._fixed: dict[tuple[int, str, str], tuple[str, ...] | None] = {}
        self._fixed_ids: dict[tuple[str, str], tuple[int, ...] | None] = {}  # fixed_local's answers by vertex pair

    @property
    def twins(self) -> "TwinMetric | None":
        """The core's twin classes (topology.twins), once a core distance has needed them; else None."""
        return self._twins

    def template_gateways(self, tid: int) -> frozenset[str]:
        """Local names of the gateways of machine template `tid`."""
        return self._tmpl_gw[tid]

    # -- machine templates: isomorphic machines share their local computations -------------------
    def template(self, m: str) -> int:
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

    def local(self, t: str) -> dict[str, int]:
        """Distances to `t` inside t's machine, keyed by local vertex name."""
        key = (self.template(self._machine[t]), self._lname[t])
        hit = self._tlocal.get(key)
        if hit is None:
            hit = self._tlocal[key] = dijkstra(self._tmpl_adj[key[0]], {key[1]: 0})
        return hit

    # -- distances -------------------------------------------------------------------------------
    def exits_of(self, t: str) -> tuple[dict[str, tuple[int, tuple[str, ...]]], tuple]:
        """Core vertices a flow to `t` leaves the core at: a -> (remaining cost, entry vertices); and a key."""
        hit = self._exits.get(t)
        if hit is not None:
            return hit
        m = self._machine[t]
        shape_key = None
        if m is not None and t not in self._core:
            sig = self.gateway_signature(m)
            if sig is not None:  # the same template, vertex and gateway hops give the same exits
                shape_key = (self.template(m), self._lname[t], sig)
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

    def gateway_signature(self, m: str) -> "tuple | None":
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
            local = self.local(t)
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

    def core_dist(self, a: str) -> dict[str, int]:
        hit = self._dcore.get(a)
        if hit is None:
            if self._metric is not None:  # ring/torus: closed form, nothing stored per vertex
                hit = self._metric.from_vertex(a)
            elif self._core_step is not None:  # twin classes: the same integers as bfs(core_adj, a, step)
                if self._twins is None:
                    self._twins = TwinMetric(self._core_adj, self._core_step)
                hit = self._twins.from_vertex(a)
            else:
                hit = dijkstra(self._core_adj, {a: 0})
            self._dcore[a] = hit
        return hit

    def core_distance(self, v: str, t: str) -> float:
        best = INF
        for a, (cost, _) in self.exits_of(t)[0].items():
            d = self.core_dist(a).get(v)
            if d is not None and d + cost < best:
                best = d + cost
        return best

    def source_dist(self, m: str, t: str) -> tuple[tuple, int, dict]:
        """(template key, base, distances): source machine m's distance to t is distances[local name] + base."""
        ekey = self.exits_of(t)[1]
        hit = self._srckey.get((m, ekey))
        if hit is not None:
            return hit
        sig = self.gateway_signature(m)
        if sig is not None:  # no core gateway: the seeds depend on the template, its gateway hops and t's exits only
            shape_key = (self.template(m), sig, ekey)
            hit = self._src_shapes.get(shape_key)
            if hit is not None:
                self._srckey[(m, ekey)] = hit
                return hit
        seeds = {}
        for h in self._gateways.get(m, ()):
            if h in self._core:
                d = self.core_distance(h, t)
            else:
                d = min((c + self.core_distance(a, t) for a, c in self._cost[h].items() if self._machine[a] != m), default=INF)
            if d < INF:
                seeds[self._lname[h]] = d
        base = min(seeds.values(), default=0)
        tid = self.template(m)
        key = (tid, tuple(sorted((h, d - base) for h, d in seeds.items())))
        if key not in self._tsrc:
            self._tsrc[key] = dijkstra(self._tmpl_adj[tid], dict(key[1]), fixed=self._tmpl_gw[tid])
        hit = self._srckey[(m, ekey)] = (key, base, self._tsrc[key])
        if sig is not None:
            self._src_shapes[shape_key] = hit
        return hit

    # -- next hops -------------------------------------------------------------------------------
    def core_next(self, a: str, v: str) -> tuple[str, ...]:
        """v's core neighbours one step closer to core vertex a (sorted)."""
        table = self._nh.setdefault(a, {})
        hit = table.get(v)
        if hit is None:
            dist = self.core_dist(a)
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

    def local_next(self, tid: int, dist: dict[str, int], key: tuple, lv: str) -> tuple[str, ...]:
        """Local names of v's in-machine neighbours one cost step closer (cached by template)."""
        hit = self._nh_local.get(key)
        if hit is None:
            dv = dist[lv]
            hit = tuple(sorted(w for w, c in self._tmpl_adj[tid][lv].items() if dist.get(w, INF) + c == dv))
            self._nh_local[key] = hit
        return hit

    def next_hops(self, s: str, t: str, v: str) -> tuple[str, ...]:
        mt, ms, mv = self._machine[t], self._machine[s], self._machine[v]
        ln = self._lname
        if mv is not None and mv == mt and (ms == mt or v not in self._core):  # inside t's machine
            tid = self.template(mt)
            local = self.local(t)
            names = self.local_next(tid, local, ("t", tid, ln[t], ln[v]), ln[v])
            return tuple(f"{mt}/{w}" for w in names)
        if v in self._core:
            exits, ekey = self.exits_of(t)
            ck = (ekey, v)
            hit = self._nh_core.get(ck)
            if hit is None:
                dv = self.core_distance(v, t)
                out: set[str] = set()
                here = False
                for a, (ca, _) in exits.items():
                    da = self.core_dist(a).get(v)
                    if da is not None and da + ca == dv:
                        if a == v:
                            here = True
                        else:
                            out.update(self.core_next(a, v))
                hit = self._nh_core[ck] = (tuple(sorted(out)), here)
            hops, here = hit
            if not here:
                return hops
            entries = exits[v][1]
            if not entries and v != t:  # v is a gateway of t's machine: go inside
                local = self.local(t)
                entries = tuple(w for w, c in self._cost[v].items() if self._machine[w] == mt and w not in self._core
                                and local.get(ln[w], INF) + c == local[ln[v]])
            return tuple(sorted(set(hops) | set(entries)))
        key, base, dist = self.source_dist(mv, t)
        tid = key[0]
        lv = ln[v]
        if lv in self._tmpl_gw[tid]:  # a stub NIC: out to the fabric
            dv = dist.get(lv, INF) + base
            return tuple(sorted(a for a, c in self._cost[v].items() if self._machine[a] != mv and self.core_distance(a, t) + c == dv))
        return tuple(f"{mv}/{w}" for w in self.local_next(tid, dist, ("s", key, lv), lv))

    def distance(self, src_vertex: str, dst_vertex: str) -> float:
        """The routing cost between two vertices (inf when unreachable)."""
        if src_vertex == dst_vertex:
            return 0
        mt, ms = self._machine[dst_vertex], self._machine[src_vertex]
        if mt is not None and ms == mt:
            return self.local(dst_vertex).get(self._lname[src_vertex], INF)
        if src_vertex in self._core:
            return self.core_distance(src_vertex, dst_vertex)
        _, base, dist = self.source_dist(ms, dst_vertex)
        return dist.get(self._lname[src_vertex], INF) + base

    def fixed_local(self, m: str, s: str, t: str) -> tuple[int, ...] | None:
        """The path between two vertices of machine m when it has no equal-cost branch (so no hash can
        change it): found once per machine template and local pair, its link ids once per vertex pair (a
        ring's channels cross the same GPU pairs)."""
        hit = self._fixed_ids.get((s, t), False)
        if hit is not False:
            return hit
        tid = self.template(m)
        ln = self._lname
        key = (tid, ln[s], ln[t])
        names = self._fixed.get(key, False)
        if names is False:
            local = self.local(t)
            names = [ln[s]]
            while names is not None and names[-1] != ln[t]:
                lv = names[-1]
                if lv not in local:
                    names = None  # unreachable inside: the general walk reports it
                    break
                hops = self.local_next(tid, local, ("t", tid, ln[t], lv), lv)
                names = names + [hops[0]] if len(hops) == 1 else None
            names = self._fixed[key] = tuple(names) if names is not None else None
        ids = None
        if names is not None:
            index = self._links.index
            prefix = m + "/"
            ids = tuple(index[(prefix + a, prefix + b)] for a, b in zip(names, names[1:]))
        self._fixed_ids[(s, t)] = ids
        return ids
