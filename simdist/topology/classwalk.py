"""The walk between two stub NICs of different machines by equivalence class: the general walk's own next hops,
each found once per class of (destination, vertex) instead of once per pair.

On switched fabrics every machine's NICs are stubs (cabled to switches only), and the next hops of a walk
depend on classes of pairs, not on the pair. Each decision's inputs come from caches keyed by what the
distances' own memos (topology.distances) key them by, so the answers are the general walk's by construction:

* a machine's *class* is (its template id, its gateway signature: each gateway's local name and fabric
  hops, which name the leaf it hangs from); the distances from any vertex of a machine to a destination
  are a function of (class, local name, the destination's exits key);
* a switch's next hops toward t are a function of (t's exits key, the switch), except at a switch t's
  machine hangs from (where the entries into t's machine are t's own: cached per (t, switch));
* a stub NIC's hops out to the fabric are a function of (class, local name, t's exits key);
* on uniform-cost cores, a switch that is not an exit has the next hops of its twin class
  (topology.twins: equal neighbour sets are at equal distances from every exit);
* the single-choice hops from a switch down to the switch t hangs from are a function of (t's exits
  key, switch); the forced entry into t, of (t's machine class, local name, that switch), by local name;
* with dmodk, every pick after the first switch is t's digits or forced, so the walk from the first
  switch is a function of (that switch, t) (unless a hashed pick inside t's machine follows).

Any other vertex (inside t's machine) takes the distances' own next hops.
"""
from __future__ import annotations

from simdist.errors import InfeasibleError
from simdist.topology.distances import Distances
from simdist.topology.routegraph import RouteGraph
from simdist.topology.search import INF, mix64


class ClassWalk:
    """Walks between stub NICs, and machine classes, from per-class caches (see the module docstring)."""

    def __init__(self, graph: RouteGraph, dist: Distances) -> None:
        self._dist = dist
        self._machine, self._lname, self._core = graph.machine, graph.lname, graph.core
        self._vid, self._port, self._topology = graph.vid, graph.port, graph.topology
        # memos
        self._cls: dict[str, "int | None"] = {}  # machine -> class id, None when a gateway is a transit router
        self._cls_ids: dict[tuple, int] = {}
        self._stub: dict[str, bool] = {}  # vertex -> a stub gateway of a classed machine
        self._ekeys: dict[str, int] = {}
        self._ekey_cls: dict[tuple, int] = {}
        self._core_hops: dict[tuple, "tuple[str, ...] | None"] = {}  # (exits key, switch) -> hops; None: entries
        self._entry_hops: dict[tuple[str, str], tuple[str, ...]] = {}  # (t, switch) -> hops
        self._out_hops: dict[tuple, tuple[str, ...]] = {}  # (class, local name, exits key) -> fabric hops
        # down-chains: (exits key, switch) -> (links, the switch b hangs from) over single-choice switches,
        # and (b, that switch) -> the links into b
        self._tails: dict[tuple, "tuple[tuple[int, ...], str] | None"] = {}
        self._entries: dict[tuple[str, str], "tuple[int, ...] | None"] = {}
        self._twin_hops: dict[tuple[int, int], tuple[str, ...]] = {}  # (exits key, twin class) -> hops
        self._dwalk: dict[tuple[str, str], tuple[int, ...]] = {}  # dmodk: (first switch, b) -> the rest
        self._entry_cls: dict[tuple, "tuple | None"] = {}  # (class of b's machine, local name of b, switch)
        self._first: dict[str, tuple] = {}  # a source NIC -> (its machine class, its local name)

    # -- classes ---------------------------------------------------------------------------------
    def machine_class(self, m: "str | None") -> "int | None":
        hit = self._cls.get(m, False)
        if hit is False:
            hit = None
            if m is not None:
                sig = self._dist.gateway_signature(m)
                if sig is not None:
                    key = (self._dist.template(m), sig)
                    hit = self._cls_ids.setdefault(key, len(self._cls_ids))
            self._cls[m] = hit
        return hit

    def is_stub(self, v: str) -> bool:
        hit = self._stub.get(v)
        if hit is None:
            m = self._machine[v]
            hit = False
            if m is not None and self.machine_class(m) is not None:
                hit = self._lname[v] in self._dist.template_gateways(self._dist.template(m))
            self._stub[v] = hit
        return hit

    def exits_key(self, v: str) -> int:
        """Distances.exits_of(v)[1] for v in a classed machine: the distances share exits by (template, local
        name, gateway signature), so one per (machine class, local name)."""
        hit = self._ekeys.get(v)
        if hit is None:
            key = (self.machine_class(self._machine[v]), self._lname[v])
            hit = self._ekey_cls.get(key)
            if hit is None or key[0] is None:
                hit = self._ekey_cls[key] = self._dist.exits_of(v)[1]
            self._ekeys[v] = hit
        return hit

    # -- the walk between two stub NICs ------------------------------------------------------------
    def _switch_hops(self, a: str, b: str, v: str, ekey: int) -> tuple[str, ...]:
        """Distances.next_hops(a, b, v) at a switch v: per (b's exits key, v), or per (b, v) where b's
        machine hangs from v (the hops then include b's own entries)."""
        hops = self._core_hops.get((ekey, v), False)
        if hops is False:
            if v in self._dist.exits_of(b)[0]:  # b's machine hangs from v: its entries are b's own
                hops = self._entry_hops[(b, v)] = self._dist.next_hops(a, b, v)
                self._core_hops[(ekey, v)] = None
                return hops
            # twins (equal neighbour sets, uniform core costs: topology.twins) that are not exits are at
            # equal distances from every exit, so their next hops toward b are the same neighbours
            tw = self._dist.twins
            c = tw.cls.get(v) if tw is not None else None
            if c is None:
                hops = self._dist.next_hops(a, b, v)
            else:
                hops = self._twin_hops.get((ekey, c))
                if hops is None:
                    hops = self._twin_hops[(ekey, c)] = self._dist.next_hops(a, b, v)
            self._core_hops[(ekey, v)] = hops
            return hops
        if hops is None:
            hops = self._entry_hops.get((b, v))
            if hops is None:
                hops = self._entry_hops[(b, v)] = self._dist.next_hops(a, b, v)
        return hops

    def _hops(self, a: str, b: str, v: str, ekey: int) -> tuple[str, ...]:
        """Distances.next_hops(a, b, v) on a walk from stub NIC a to stub NIC b of another machine."""
        mv = self._machine[v]
        if mv is None and v in self._core:
            return self._switch_hops(a, b, v, ekey)
        if mv is not None and mv != self._machine[b] and self.is_stub(v):  # out of a source-side NIC
            key = (self.machine_class(mv), self._lname[v], ekey)
            hops = self._out_hops.get(key)
            if hops is None:
                hops = self._out_hops[key] = self._dist.next_hops(a, b, v)
            return hops
        return self._dist.next_hops(a, b, v)  # anything else (inside b's machine): the distances' own answer

    def _tail(self, b: str, v: str, ekey: int) -> "tuple[tuple[int, ...], str] | None":
        """From switch v toward destinations with exits key `ekey`: when every switch on the way has
        one next hop, (their links, the switch u b's machine hangs from), else None; kept per (ekey, v)."""
        index = self._topology.links.index
        links: list[int] = []
        u = v
        hit = None
        core_hops = self._core_hops
        while self._machine[u] is None and u in self._core:
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
        name (their exits are shared), so its vertices are kept per class, by local name."""
        mb = self._machine[b]
        ckey = (self.machine_class(mb), self._lname[b], u)
        chain = self._entry_cls.get(ckey, False)
        if chain is False or ckey[0] is None:
            hit = self._entry_walk(b, u, ekey)
            if hit is not None and ckey[0] is not None:
                ends = self._topology.links.ends
                chain = tuple(None if self._machine[ends[i][1]] is None else self._lname[ends[i][1]] for i in hit)
                self._entry_cls[ckey] = tuple(ends[i][1] if c is None else (c,) for i, c in zip(hit, chain))
            elif ckey[0] is not None:
                self._entry_cls[ckey] = None
        elif chain is None:
            hit = None
        else:
            index = self._topology.links.index
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
        machine, index = self._machine, self._topology.links.index
        mb = machine[b]
        links: list[int] = []
        w = u
        hit = None
        while True:
            if w == b:
                hit = tuple(links)
                break
            mw = machine[w]
            if mw is None and w in self._core:
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
        """Distances.next_hops(x, b, u) for u inside b's machine and x in another machine (the branch
        that depends on b and u only)."""
        mt = self._machine[b]
        if u in self._core:
            return ()  # a transit vertex: not a down-chain this cache describes
        tid = self._dist.template(mt)
        ln = self._lname
        names = self._dist.local_next(tid, self._dist.local(b), ("t", tid, ln[b], ln[u]), ln[u])
        return tuple(f"{mt}/{w}" for w in names)

    def walk_links(self, a: str, b: str, flow_hash_: int, offset: int, reachable: bool) -> list[int]:
        """Walker.walk(a, b, flow_hash_, offset, reachable) for stub NICs a, b of different machines,
        as directed link ids."""
        return self.walk_into(a, b, flow_hash_, offset, reachable, [])

    def walk_into(self, a: str, b: str, flow_hash_: int, offset: int, reachable: bool, out: list[int]) -> list[int]:
        """walk_links(a, b, flow_hash_, offset, reachable), appended to `out` (returned)."""
        if not reachable and self._dist.distance(a, b) == INF:
            raise InfeasibleError(f"no route from {a} to {b}")
        vid, machine, index = self._vid, self._machine, self._topology.links.index
        ekey = self._ekeys.get(b)
        if ekey is None:
            ekey = self.exits_key(b)
        core_hops, tails, entries, first = self._core_hops, self._tails, self._entries, self._first
        v = a
        digits = self._port.get(b, vid[b]) if self._port else None
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
                    tail = self._tail(b, v, ekey) if v in self._core else None
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
                    ok = first[a] = (self.machine_class(machine[a]), self._lname[a])
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
                w = hops[(mix64(flow_hash_ ^ vid[v]) + offset) % n]
                if start is not None:
                    start = False  # a hashed pick after the first switch: this walk is not b's alone
            out.append(index[(v, w)])
            v = w
        if start:
            self._dwalk[(start, b)] = tuple(out[mark:])
        return out
