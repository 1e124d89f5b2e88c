"""Routing between machines by equivalence class: the Router's own answers, computed once per class.

On switched fabrics (fat trees, leaf-spine, a single switch) every machine's NICs are stubs: cabled to
switches only. Router.path then spends its time on per-pair work whose answers depend only on classes
of pairs, not on the pair: the rail waypoints, and the equal-cost next hops at each vertex of the
walk, which the Router's general walk (topology.walk) recomputes for every new (source, destination)
pair in a fresh DAG. This module takes the same decisions from per-class caches:

* the distances from any vertex of a machine to a destination are a function of (the machine's class,
  the vertex's local name, the destination's exits key) (topology.classwalk); distances inside a
  machine, of (template, both local names);
* so the waypoints of (s, t) are a function of (class of s's machine, local names of s and its rail,
  exits keys of t and of t's rail, t's template and the local names of t and its rail);
* the walk between two stub NICs takes its next hops per class (topology.classwalk);
* the common pair (railed GPU, rail NIC, fabric, rail NIC, GPU) joins a per-endpoint head and foot.

Anything else (a machine whose gateway is a transit router, as on ring and torus fabrics; a walk that
enters a machine through another NIC; a stretch inside one machine) takes the general walk, so every
route is identical link for link to the Router's general path (tests/topology/test_class_routes.py
checks it pair by pair, dead cables included).
"""
from __future__ import annotations

from simdist.topology.classwalk import ClassWalk
from simdist.topology.distances import Distances
from simdist.topology.routegraph import RouteGraph
from simdist.topology.walk import Walker


class ClassRoutes:
    """Router.path's cross-machine routes from per-class caches (see the module docstring)."""

    def __init__(self, graph: RouteGraph, dist: Distances, walker: Walker) -> None:
        self._dist, self._walker = dist, walker
        self._classes = ClassWalk(graph, dist)
        self._machine, self._lname, self._rail = graph.machine, graph.lname, graph.rail
        self._lane, self._topology = graph.lane, graph.topology
        # memos
        self._via: dict[tuple, tuple[bool, bool]] = {}
        self._heads: dict[int, "tuple | None"] = {}
        self._feet: dict[int, "tuple | None"] = {}
        self._fixed_abs: dict[tuple[str, str], "tuple[int, ...] | None"] = {}
        self._sid: dict[str, "tuple | None"] = {}  # source vertex -> its waypoint class, None: not classed
        self._tid: dict[str, "tuple | None"] = {}  # destination vertex -> its waypoint class
        self._sid_no: dict[tuple, int] = {}  # waypoint classes numbered (heads and feet keep the numbers)
        self._tid_no: dict[tuple, int] = {}
        self._both: dict[tuple[int, int], bool] = {}  # (source no., destination no.) -> both rails on the way

    # -- the common pair: railed GPU -> rail NIC -> fabric -> rail NIC -> GPU --------------------------
    def _head(self, src: int) -> "tuple | None":
        """Per source endpoint: (vertex, waypoint class, node, lane, rail NIC, links to it, machine, the
        waypoint class's number), or None when its pairs take the general path (no rail, no class, a
        rail NIC that is not a stub, no fixed path)."""
        s = self._topology.endpoints[src]
        hit = None
        rs = self._rail.get(s)
        if s in self._lane and rs is not None and rs != s:
            sid = self._sid.get(s, False)
            if sid is False:
                sid = self._source_id(s)
            m = self._machine[s]
            if sid is not None and self._classes.is_stub(rs) and m == self._machine[rs]:
                fixed = self._fixed(m, s, rs)
                if fixed is not None:
                    hit = (s, sid, self._topology.endpoint_node[src], self._lane[s], rs, fixed, m,
                           self._sid_no.setdefault(sid, len(self._sid_no)))
        self._heads[src] = hit
        return hit

    def _foot(self, dst: int) -> "tuple | None":
        """Per destination endpoint: (vertex, waypoint class, node, rail NIC, links from it, machine, the
        waypoint class's number), or None."""
        t = self._topology.endpoints[dst]
        hit = None
        rt = self._rail.get(t)
        if rt is not None and rt != t:
            tid = self._tid.get(t, False)
            if tid is False:
                tid = self._target_id(t)
            m = self._machine[t]
            if tid is not None and self._classes.is_stub(rt) and m == self._machine[rt]:
                fixed = self._fixed(m, rt, t)
                if fixed is not None:
                    hit = (t, tid, self._topology.endpoint_node[dst], rt, fixed, m,
                           self._tid_no.setdefault(tid, len(self._tid_no)))
        self._feet[dst] = hit
        return hit

    def pair(self, src: int, dst: int, flow_key: int) -> "tuple[int, ...] | None":
        """Router.path(src, dst, flow_key) for a railed GPU to a railed GPU of another machine whose
        waypoints are both rail NICs (the links GPU -> NIC, the fabric walk, NIC -> GPU); None for any
        other pair (the caller takes the general path)."""
        out: list[int] = []
        return tuple(out) if self.pair_into(src, dst, flow_key, out) else None

    def pair_into(self, src: int, dst: int, flow_key: int, out: list[int]) -> bool:
        """Append `pair(src, dst, flow_key)`'s links to `out` and return True, or return False (nothing
        appended) for a pair that takes the general path."""
        head = self._heads.get(src, False)
        if head is False:
            head = self._head(src)
        if head is None:
            return False
        foot = self._feet.get(dst, False)
        if foot is False:
            foot = self._foot(dst)
        if foot is None or head[2] == foot[2] or head[6] == foot[5]:  # the same node or machine
            return False
        both = self._both.get((head[7], foot[6]))
        if both is None:  # both rail NICs on the way: per (source, destination) waypoint class
            self.waypoints(head[0], foot[0])
            via = self._via[(head[1], foot[1])]
            both = self._both[(head[7], foot[6])] = via[0] and via[1]
        if not both:
            return False
        h = self._walker.machine_pair_hash(head[2], foot[2], flow_key)
        out.extend(head[5])
        self._classes.walk_into(head[4], foot[3], h, head[3], True, out)
        out.extend(foot[4])
        return True

    def paths_flat(self, pairs, general) -> tuple[list[int], list[int]]:
        """Router.path(src, dst, 0) of every (src, dst) pair, in order, as one flat list of link ids and
        each pair's number of links: the common pairs appended in place (no tuple per pair), the others
        from `general(src, dst, 0)` (the Router's own path)."""
        flat: list[int] = []
        lengths: list[int] = []
        into, size, add = self.pair_into, flat.__len__, lengths.append
        for src, dst in pairs:
            n = size()
            if src != dst and not into(src, dst, 0, flat):
                flat.extend(general(src, dst, 0))
            add(size() - n)
        return flat, lengths

    # -- waypoints -------------------------------------------------------------------------------
    def _source_id(self, s: str) -> "tuple | None":
        m = self._machine[s]
        c = self._classes.machine_class(m)
        rs = self._rail.get(s)
        hit = None
        if c is not None and (rs is None or self._machine[rs] == m):
            hit = (c, self._lname[s], rs and self._lname[rs])
        self._sid[s] = hit
        return hit

    def _target_id(self, t: str) -> "tuple | None":
        m = self._machine[t]
        rt = self._rail.get(t)
        hit = None
        if self._classes.machine_class(m) is not None and (rt is None or self._machine[rt] == m):
            hit = (self._classes.exits_key(t), rt and self._classes.exits_key(rt), self._dist.template(m), self._lname[t], rt and self._lname[rt])
        self._tid[t] = hit
        return hit

    def waypoints(self, s: str, t: str) -> tuple[str, ...]:
        """Walker.waypoints(s, t) for s, t in different machines."""
        sid = self._sid.get(s, False)
        if sid is False:
            sid = self._source_id(s)
        tid = self._tid.get(t, False)
        if tid is False:
            tid = self._target_id(t)
        if sid is None or tid is None:
            return self._walker.waypoints(s, t)
        rs, rt = self._rail.get(s), self._rail.get(t)
        key = (sid, tid)
        hit = self._via.get(key)
        if hit is None:
            via = self._walker.waypoints(s, t)
            hit = self._via[key] = (rs is not None and rs in via, rt is not None and rt in via)
        if hit[0]:
            return (rs, rt) if hit[1] else (rs,)
        return (rt,) if hit[1] else ()

    def _fixed(self, m: str, s: str, t: str) -> "tuple[int, ...] | None":
        """Distances.fixed_local(m, s, t), kept per vertex pair."""
        hit = self._fixed_abs.get((s, t), False)
        if hit is False:
            hit = self._fixed_abs[(s, t)] = self._dist.fixed_local(m, s, t)
        return hit

    def links(self, s: str, t: str, flow_hash_: int, offset: int) -> list[int]:
        """Walker.links(s, t, flow_hash_, offset) for s, t in different machines."""
        index = self._topology.links.index
        machine = self._machine
        is_stub, fixed_abs = self._classes.is_stub, self._fixed_abs
        out: list[int] = []
        here = s
        via = self.waypoints(s, t)
        for v in via + (t,):
            m = machine[here]
            if m is not None and m == machine[v]:
                fixed = fixed_abs.get((here, v), False)
                if fixed is False:
                    fixed = self._fixed(m, here, v)
                if fixed is not None:
                    out.extend(fixed)
                    here = v
                    continue
                p = self._walker.walk(here, v, flow_hash_, offset, reachable=bool(via))
            elif is_stub(here) and is_stub(v):
                out.extend(self._classes.walk_links(here, v, flow_hash_, offset, reachable=bool(via)))
                here = v
                continue
            else:
                p = self._walker.walk(here, v, flow_hash_, offset, reachable=bool(via))
            out.extend(index[(p[i], p[i + 1])] for i in range(len(p) - 1))
            here = v
        return out
