"""Routing between machines by equivalence class: the Router's own answers, computed once per class.

On switched fabrics (fat trees, leaf-spine, a single switch) every machine's NICs are stubs: cabled to
switches only. Router.path then spends its time on per-pair work whose answers depend only on classes
of pairs, not on the pair: the rail waypoints, and the equal-cost next hops at each vertex of the
walk, which the Router recomputes for every new (source, destination) pair in a fresh DAG.

This module walks the same path with the same hashed (or D-mod-K) picks, but takes each decision's
inputs from caches keyed by what the Router's own memos key them by, so the answers are the Router's
by construction:

* a machine's *class* is (its template id, its gateway signature: each gateway's local name and fabric
  hops, which name the leaf it hangs from); the Router's `_source_dist` answer for a source machine and
  a destination is memoised by (template, signature, the destination's exits key), so distances from
  any vertex of a machine to a destination are a function of (class, local name, exits key);
* distances inside a machine are a function of (template, both local names);
* so the waypoints of (s, t) are a function of (class of s's machine, local names of s and its rail,
  exits keys of t and of t's rail, t's template and the local names of t and its rail);
* a switch's next hops toward t are a function of (t's exits key, the switch), except at a switch t's
  machine hangs from (where the entries into t's machine are t's own: cached per (t, switch));
* a stub NIC's hops out to the fabric are a function of (class, local name, t's exits key);
* on uniform-cost cores, a switch that is not an exit has the next hops of its twin class
  (topology.twins: equal neighbour sets are at equal distances from every exit);
* the single-choice hops from a switch down to the switch t hangs from are a function of (t's exits
  key, switch); the forced entry into t, of (t's machine class, local name, that switch), by local name;
* with dmodk, every pick after the first switch is t's digits or forced, so the walk from the first
  switch is a function of (that switch, t) (unless a hashed pick inside t's machine follows);
* the common pair (railed GPU, rail NIC, fabric, rail NIC, GPU) joins a per-endpoint head and foot.

Anything else (a machine whose gateway is a transit router, as on ring and torus fabrics; a walk that
enters a machine through another NIC; a stretch inside one machine) is handed to the Router itself, so
every route is identical link for link to Router's general path (tests/topology/test_class_routes.py
checks it pair by pair, dead cables included).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from simdist.errors import InfeasibleError
from simdist.topology.search import INF, _mix, flow_hash

if TYPE_CHECKING:
    from simdist.topology.routing import Router


class ClassRoutes:
    """Router.path's cross-machine routes from per-class caches (see the module docstring)."""

    def __init__(self, router: "Router") -> None:
        self.r = router
        self._cls: dict[str, "int | None"] = {}  # machine -> class id, None when a gateway is a transit router
        self._cls_ids: dict[tuple, int] = {}
        self._via: dict[tuple, tuple[bool, bool]] = {}
        self._core_hops: dict[tuple, "tuple[str, ...] | None"] = {}  # (exits key, switch) -> hops; None: entries
        self._entry_hops: dict[tuple[str, str], tuple[str, ...]] = {}  # (t, switch) -> hops
        self._out_hops: dict[tuple, tuple[str, ...]] = {}  # (class, local name, exits key) -> fabric hops
        self._heads: dict[int, "tuple | None"] = {}
        self._feet: dict[int, "tuple | None"] = {}
        self._stub: dict[str, bool] = {}  # vertex -> a stub gateway of a classed machine
        # down-chains: (exits key, switch) -> (links, the switch b hangs from) over single-choice switches,
        # and (b, that switch) -> the links into b
        self._tails: dict[tuple, "tuple[tuple[int, ...], str] | None"] = {}
        self._entries: dict[tuple[str, str], "tuple[int, ...] | None"] = {}
        self._ekeys: dict[str, int] = {}
        self._ekey_cls: dict[tuple, int] = {}
        self._twin_hops: dict[tuple[int, int], tuple[str, ...]] = {}  # (exits key, twin class) -> hops
        self._dwalk: dict[tuple[str, str], tuple[int, ...]] = {}  # dmodk: (first switch, b) -> the rest
        self._entry_cls: dict[tuple, "tuple | None"] = {}  # (class of b's machine, local name of b, switch)
        self._first: dict[str, tuple] = {}  # a source NIC -> (its machine class, its local name)
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
        r = self.r
        s = r.topology.endpoints[src]
        hit = None
        rs = r._rail.get(s)
        if s in r._lane and rs is not None and rs != s:
            sid = self._sid.get(s, False)
            if sid is False:
                sid = self._source_id(s)
            m = r._machine[s]
            if sid is not None and self._is_stub(rs) and m == r._machine[rs]:
                fixed = self._fixed(m, s, rs)
                if fixed is not None:
                    hit = (s, sid, r.topology.endpoint_node[src], r._lane[s], rs, fixed, m,
                           self._sid_no.setdefault(sid, len(self._sid_no)))
        self._heads[src] = hit
        return hit

    def _foot(self, dst: int) -> "tuple | None":
        """Per destination endpoint: (vertex, waypoint class, node, rail NIC, links from it, machine, the
        waypoint class's number), or None."""
        r = self.r
        t = r.topology.endpoints[dst]
        hit = None
        rt = r._rail.get(t)
        if rt is not None and rt != t:
            tid = self._tid.get(t, False)
            if tid is False:
                tid = self._target_id(t)
            m = r._machine[t]
            if tid is not None and self._is_stub(rt) and m == r._machine[rt]:
                fixed = self._fixed(m, rt, t)
                if fixed is not None:
                    hit = (t, tid, r.topology.endpoint_node[dst], rt, fixed, m,
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
        r = self.r
        key = (head[2], foot[2], flow_key)
        h = r._mhash.get(key)
        if h is None:
            h = r._mhash[key] = flow_hash(-1 - key[0], -1 - key[1], flow_key)
        out.extend(head[5])
        self.walk_into(head[4], foot[3], h, head[3], True, out)
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

    # -- classes ---------------------------------------------------------------------------------
    def machine_class(self, m: "str | None") -> "int | None":
        hit = self._cls.get(m, False)
        if hit is False:
            hit = None
            if m is not None:
                sig = self.r._gw_sig(m)
                if sig is not None:
                    key = (self.r._tmpl(m), sig)
                    hit = self._cls_ids.setdefault(key, len(self._cls_ids))
            self._cls[m] = hit
        return hit

    def _is_stub(self, v: str) -> bool:
        hit = self._stub.get(v)
        if hit is None:
            r = self.r
            m = r._machine[v]
            hit = False
            if m is not None and self.machine_class(m) is not None:
                hit = r._lname[v] in r._tmpl_gw[r._tmpl(m)]
            self._stub[v] = hit
        return hit

    def exits_key(self, v: str) -> int:
        """Router._exits_of(v)[1] for v in a classed machine: the Router shares exits by (template, local
        name, gateway signature), so one per (machine class, local name)."""
        hit = self._ekeys.get(v)
        if hit is None:
            r = self.r
            key = (self.machine_class(r._machine[v]), r._lname[v])
            hit = self._ekey_cls.get(key)
            if hit is None or key[0] is None:
                hit = self._ekey_cls[key] = r._exits_of(v)[1]
            self._ekeys[v] = hit
        return hit

    # -- waypoints -------------------------------------------------------------------------------
    def _source_id(self, s: str) -> "tuple | None":
        r = self.r
        m = r._machine[s]
        c = self.machine_class(m)
        rs = r._rail.get(s)
        hit = None
        if c is not None and (rs is None or r._machine[rs] == m):
            hit = (c, r._lname[s], rs and r._lname[rs])
        self._sid[s] = hit
        return hit

    def _target_id(self, t: str) -> "tuple | None":
        r = self.r
        m = r._machine[t]
        rt = r._rail.get(t)
        hit = None
        if self.machine_class(m) is not None and (rt is None or r._machine[rt] == m):
            hit = (self.exits_key(t), rt and self.exits_key(rt), r._tmpl(m), r._lname[t], rt and r._lname[rt])
        self._tid[t] = hit
        return hit

    def waypoints(self, s: str, t: str) -> tuple[str, ...]:
        """Router.waypoints(s, t) for s, t in different machines."""
        sid = self._sid.get(s, False)
        if sid is False:
            sid = self._source_id(s)
        tid = self._tid.get(t, False)
        if tid is False:
            tid = self._target_id(t)
        r = self.r
        if sid is None or tid is None:
            return r.waypoints(s, t)
        rs, rt = r._rail.get(s), r._rail.get(t)
        key = (sid, tid)
        hit = self._via.get(key)
        if hit is None:
            via = r.waypoints(s, t)
            hit = self._via[key] = (rs is not None and rs in via, rt is not None and rt in via)
        if hit[0]:
            return (rs, rt) if hit[1] else (rs,)
        return (rt,) if hit[1] else ()

    # -- the walk between two stub NICs ------------------------------------------------------------
    def _switch_hops(self, a: str, b: str, v: str, ekey: int) -> tuple[str, ...]:
        """Router._next_hops(a, b, v) at a switch v: per (b's exits key, v), or per (b, v) where b's
        machine hangs from v (the hops then include b's own entries)."""
        r = self.r
        hops = self._core_hops.get((ekey, v), False)
        if hops is False:
            if v in r._exits_of(b)[0]:  # b's machine hangs from v: its entries are b's own
                hops = self._entry_hops[(b, v)] = r._next_hops(a, b, v)
                self._core_hops[(ekey, v)] = None
                return hops
            # twins (equal neighbour sets, uniform core costs: topology.twins) that are not exits are at
            # equal distances from every exit, so their next hops toward b are the same neighbours
            tw = r._twins
            c = tw.cls.get(v) if tw is not None else None
            if c is None:
                hops = r._next_hops(a, b, v)
            else:
                hops = self._twin_hops.get((ekey, c))
                if hops is None:
                    hops = self._twin_hops[(ekey, c)] = r._next_hops(a, b, v)
            self._core_hops[(ekey, v)] = hops
            return hops
        if hops is None:
            hops = self._entry_hops.get((b, v))
            if hops is None:
                hops = self._entry_hops[(b, v)] = r._next_hops(a, b, v)
        return hops

    def _hops(self, a: str, b: str, v: str, ekey: int) -> tuple[str, ...]:
        """Router._next_hops(a, b, v) on a walk from stub NIC a to stub NIC b of another machine."""
        r = self.r
        mv = r._machine[v]
        if mv is None and v in r._core:
            return self._switch_hops(a, b, v, ekey)
        if mv is not None and mv != r._machine[b] and self._is_stub(v):  # out of a source-side NIC
            key = (self.machine_class(mv), r._lname[v], ekey)
            hops = self._out_hops.get(key)
            if hops is None:
                hops = self._out_hops[key] = r._next_hops(a, b, v)
            return hops
        return r._next_hops(a, b, v)  # anything else (inside b's machine): the Router's own answer

    def _tail(self, b: str, v: str, ekey: int) -> "tuple[tuple[int, ...], str] | None":
        """From switch v toward destinations with exits key `ekey`: when every switch on the way has
        one next hop, (their links, the switch u b's machine hangs from), else None; kept per (ekey, v)."""
        r = self.r
        index = r.topology.links.index
        links: list[int] = []
        u = v
        hit = None
        core_hops = self._core_hops
        while r._machine[u] is None and u in r._core:
            if core_hops.get((ekey, u), False) is None:  # b's entries start here (known for b's exits key)
                hit = (tuple(links), u)
                break
            hops = self._switch_hops(b, b, u, ekey)
            if core_hops[(ekey, u)] is None:  # b's entries start here
                hit = (tuple(links), u)
                break
            if len(hops) != 1:
                break
            links.append(index[(u, hops[0])])
            u = hops[0]
            rest = self._tails.get((ekey, u), False)
            if rest is not False:  # the chain from u on is known (the same for every destination of ekey)
                hit = None if rest is None else (tuple(links) + rest[0], rest[1])
                break
        self._tails[(ekey, v)] = hit
        return hit

    def _entry(self, b: str, u: str, ekey: int) -> "tuple[int, ...] | None":
        """The links from switch u (b's machine hangs from it) to b when every hop has one choice, else
        None; kept per (b, u). A forced chain is the same for every b of one machine class and local
        name (the Router's exits are shared by them), so its vertices are kept per class, by local name."""
        r = self.r
        mb = r._machine[b]
        ckey = (self.machine_class(mb), r._lname[b], u)
        chain = self._entry_cls.get(ckey, False)
        if chain is False or ckey[0] is None:
            hit = self._entry_walk(b, u, ekey)
            if hit is not None and ckey[0] is not None:
                ends = r.topology.links.ends
                chain = tuple(None if r._machine[ends[i][1]] is None else r._lname[ends[i][1]] for i in hit)
                self._entry_cls[ckey] = tuple(ends[i][1] if c is None else (c,) for i, c in zip(hit, chain))
            elif ckey[0] is not None:
                self._entry_cls[ckey] = None
        elif chain is None:
            hit = None
        else:
            index = r.topology.links.index
            prefix = mb + "/"
            out = []
            w = u
            for step in chain:
                x = step if isinstance(step, str) else prefix + step[0]
                out.append(index[(w, x)])
                w = x
            hit = tuple(out)
        self._entries[(b, u)] = hit
        return hit

    def _entry_walk(self, b: str, u: str, ekey: int) -> "tuple[int, ...] | None":
        """The links from switch u (b's machine hangs from it) to b when every hop has one choice, else
        None; kept per (b, u)."""
        r = self.r
        machine, index = r._machine, r.topology.links.index
        mb = machine[b]
        links: list[int] = []
        w = u
        hit = None
        while True:
            if w == b:
                hit = tuple(links)
                break
            mw = machine[w]
            if mw is None and w in r._core:
                hops = self._switch_hops(b, b, w, ekey)
            elif mw == mb:
                hops = self._inside_hops(b, w)
            else:
                break
            if len(hops) != 1:
                break
            links.append(index[(w, hops[0])])
            w = hops[0]
        return hit

    def _inside_hops(self, b: str, u: str) -> tuple[str, ...]:
        """Router._next_hops(x, b, u) for u inside b's machine and x in another machine (the branch
        that depends on b and u only)."""
        r = self.r
        mt = r._machine[b]
        if u in r._core:
            return ()  # a transit vertex: not a down-chain this cache describes
        tid = r._tmpl(mt)
        ln = r._lname
        names = r._local_next(tid, r._local(b), ("t", tid, ln[b], ln[u]), ln[u])
        return tuple(f"{mt}/{w}" for w in names)

    def walk_links(self, a: str, b: str, flow_hash_: int, offset: int, reachable: bool) -> list[int]:
        """Router._walk(a, b, flow_hash_, offset, reachable) for stub NICs a, b of different machines,
        as directed link ids."""
        return self.walk_into(a, b, flow_hash_, offset, reachable, [])

    def walk_into(self, a: str, b: str, flow_hash_: int, offset: int, reachable: bool, out: list[int]) -> list[int]:
        """walk_links(a, b, flow_hash_, offset, reachable), appended to `out` (returned)."""
        r = self.r
        if not reachable and r.distance(a, b) == INF:
            raise InfeasibleError(f"no route from {a} to {b}")
        vid, machine, index = r._vid, r._machine, r.topology.links.index
        ekey = self._ekeys.get(b)
        if ekey is None:
            ekey = self.exits_key(b)
        core_hops, tails, entries, first = self._core_hops, self._tails, self._entries, self._first
        v = a
        digits = r._port.get(b, vid[b]) if r._port else None
        start = None  # dmodk: the first switch, from which every pick is b's digits (kept per (switch, b))
        while v != b:
            if machine[v] is None:
                if digits is not None and start is None:
                    hit = self._dwalk.get((v, b))
                    if hit is not None:
                        out.extend(hit)
                        return out
                    start, mark = v, len(out)
                tail = tails.get((ekey, v), False)
                if tail is False:
                    tail = self._tail(b, v, ekey) if v in r._core else None
                if tail is not None:
                    entry = entries.get((b, tail[1]), False)
                    if entry is False:
                        entry = self._entry(b, tail[1], ekey)
                    if entry is not None:
                        out.extend(tail[0])
                        out.extend(entry)
                        if start:
                            self._dwalk[(start, b)] = tuple(out[mark:])
                        return out
                hops = core_hops.get((ekey, v))
                if hops is None:
                    hops = self._hops(a, b, v, ekey)
            elif v == a:  # out of the source NIC: a function of (its machine class, local name, b's exits key)
                ok = first.get(a)
                if ok is None:
                    ok = first[a] = (self.machine_class(machine[a]), r._lname[a])
                hops = self._out_hops.get((ok[0], ok[1], ekey))
                if hops is None:
                    hops = self._hops(a, b, v, ekey)
            else:
                hops = self._hops(a, b, v, ekey)
            n = len(hops)
            if n == 1:
                w = hops[0]
            elif n == 0:
                raise InfeasibleError(f"no route from {a} to {b} (stuck at {v})")
            elif digits is not None and machine[v] is None:
                w = hops[digits % n]
                digits //= n
            else:
                w = hops[(_mix(flow_hash_ ^ vid[v]) + offset) % n]
                if start is not None:
                    start = False  # a hashed pick after the first switch: this walk is not b's alone
            out.append(index[(v, w)])
            v = w
        if start:
            self._dwalk[(start, b)] = tuple(out[mark:])
        return out

    def _fixed(self, m: str, s: str, t: str) -> "tuple[int, ...] | None":
        """Router._fixed_local(m, s, t), kept per vertex pair."""
        hit = self._fixed_abs.get((s, t), False)
        if hit is False:
            hit = self._fixed_abs[(s, t)] = self.r._fixed_local(m, s, t)
        return hit

    def links(self, s: str, t: str, flow_hash_: int, offset: int) -> list[int]:
        """Router._links(s, t, flow_hash_, offset) for s, t in different machines."""
        r = self.r
        index = r.topology.links.index
        machine = r._machine
        stub, fixed_abs = self._stub, self._fixed_abs
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
                p = r._walk(here, v, flow_hash_, offset, reachable=bool(via))
            elif (stub.get(here) or self._is_stub(here)) and (stub.get(v) or self._is_stub(v)):
                out.extend(self.walk_links(here, v, flow_hash_, offset, reachable=bool(via)))
                here = v
                continue
            else:
                p = r._walk(here, v, flow_hash_, offset, reachable=bool(via))
            out.extend(index[(p[i], p[i + 1])] for i in range(len(p) - 1))
            here = v
        return out
