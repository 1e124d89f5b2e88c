"""Grouping cluster states whose dead fabric links cannot change the iteration time (simulated once, exactly).

A rerouted fabric fault makes a cluster state of its own, and every distinct set of dead links used to
cost one engine run (re-routing every flow of a 16,384-GPU job takes seconds). On a symmetric fat tree
most such faults cannot be felt, and that can be proved without routing a single flow:

1. **No fabric link can become a bottleneck.** Every switch-to-switch edge joins a lower switch x and an
   upper switch (levels counted from the leaves). With least-cost (up-then-down) routes, the only flows
   that cross it have one end in the machines under x. At any moment at most `N(x)` such flows run:
   collectives run one after another on the communication stream, and within a schedule each chain has
   one step in flight, so N(x) = max over schedules of the sum over chains of the step with the most
   transfers leaving (or entering) x's machines. Every flow is at most as fast as the fastest NIC edge,
   `c_nic`. When every edge has capacity >= N(x) x c_nic in both directions, no fabric edge constrains any
   flow, in the estimate model (equal shares: cap / flows >= c_nic >= the NIC's share) and in the flow
   model (a constraint the unconstrained max-min allocation already satisfies changes nothing).
2. **Every path keeps its cost and latency.** When the least-cost hop count between every pair of
   leaves is the same with the dead links as without, and every tier (edges between two levels) has one
   capacity and one latency, every least-cost path is still up-then-down through the same tiers: same
   routing cost, same latency, and the NIC a flow leaves by is chosen from the same equal-cost set.

States meeting both (checked per state: every pair of leaves keeps a common ancestor at its healthy
level, by bitmasks of upward reachability) are equivalent to the same state without those dead links,
so their step time is computed once for the whole class. Anything else
(a degraded link at a fraction, a fabric that is not layered, a bottleneck fabric, nodes out) is
simulated on its own, as before. `tests/failures/test_equivalence.py` checks grouped against ungrouped.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from simdist.collectives.schedule import TransferArray
from simdist.topology.graph import Topology


def _leaf_of_machine(topology: Topology) -> dict[int, str] | None:
    """Machine index -> the one leaf switch its NICs attach to (None: a machine on several switches)."""
    g, out = topology.graph, {}
    node_of_vertex: dict[str, int] = {}
    for e, m in enumerate(topology.endpoint_node):  # endpoint vertices are not needed: NIC vertices name 'nodeK/'
        node_of_vertex.setdefault(f"node{m}/", m)
    for u, v, data in g.edges(data=True):
        if data.get("kind") != "nic":
            continue
        for a, b in ((u, v), (v, u)):
            if "/" in a and "/" not in b:
                prefix = a.split("/", 1)[0] + "/"
                m = node_of_vertex.get(prefix)
                if m is None:
                    return None
                if out.setdefault(m, b) != b:
                    return None
    return out


def _ends(transfers) -> tuple[np.ndarray, np.ndarray]:
    """(sources, destinations) of a step's transfers as index arrays: a TransferArray's own arrays, else
    read off the Transfer objects."""
    if isinstance(transfers, TransferArray):
        return transfers.src, transfers.dst
    return (np.fromiter((t.src for t in transfers), dtype=np.int64, count=len(transfers)),
            np.fromiter((t.dst for t in transfers), dtype=np.int64, count=len(transfers)))


class DeadLinkEquivalence:
    """`canonical(dead_links)` -> () when the dead links provably leave the step time unchanged, else them."""

    def __init__(self, topology: Topology, schedules) -> None:
        self.topology = topology
        self.ok = False
        self.max_flows = 0
        self._setup(list(schedules))

    def _setup(self, schedules) -> None:
        g, links = self.topology.graph, self.topology.links
        switches = {v for v in g if "/" not in v}
        leaf_of = _leaf_of_machine(self.topology)
        if not schedules or leaf_of is None or len(set(leaf_of.values())) < 2:
            return
        if str(g.graph.get("routing", "ecmp")) not in ("ecmp", "dmodk"):
            return  # spray splits a connection into several flows: the flow bound below counts connections
        leaves = sorted(set(leaf_of.values()))
        level = {s: 1 for s in leaves}
        queue = deque(leaves)
        while queue:
            x = queue.popleft()
            for y in g[x]:
                if y in switches and y not in level:
                    level[y] = level[x] + 1
                    queue.append(y)
        if len(level) != len(switches):
            return
        under: dict[str, frozenset[int]] = {}
        for s in sorted(switches, key=lambda s: level[s]):
            if level[s] == 1:
                under[s] = frozenset(m for m, leaf in leaf_of.items() if leaf == s)
            else:
                under[s] = frozenset().union(*(under[y] for y in g[s] if y in switches and level[y] == level[s] - 1))
        tiers: dict[tuple[int, int], set] = {}
        fabric = []
        for u, v, data in g.edges(data=True):
            if u not in switches or v not in switches:
                continue
            if abs(level[u] - level[v]) != 1:
                return  # not a layered tree: no proof here
            lo, hi = (u, v) if level[u] < level[v] else (v, u)
            cap = min(links.capacity_Bps[links.index[(lo, hi)]], links.capacity_Bps[links.index[(hi, lo)]])
            tiers.setdefault((level[lo], level[hi]), set()).add((float(cap), float(data["link"].latency_s)))
            fabric.append((lo, cap))
        if any(len(x) != 1 for x in tiers.values()):
            return
        c_nic = max(float(links.capacity_Bps[links.index[(u, v)]]) for u, v, d in g.edges(data=True)
                    if d.get("kind") == "nic")
        machine = np.asarray(self.topology.endpoint_node)
        if set(machine.tolist()) - set(leaf_of):
            return  # a machine (e.g. a dedicated server) not under exactly one leaf
        by_level: dict[int, list[frozenset[int]]] = {}
        for lo, _ in fabric:
            if under[lo] not in by_level.setdefault(level[lo], []):
                by_level[level[lo]].append(under[lo])
        parts = {}  # level -> (machine -> index of its domain at that level, -1: none)
        for lv, doms in by_level.items():
            part = np.full(int(machine.max()) + 1, -1)
            for i, d in enumerate(doms):
                idx = np.fromiter(d, dtype=int)
                if (part[idx] != -1).any():
                    return  # overlapping domains at one level: not a tree
                part[idx] = i
            parts[lv] = part
        need = {d: 0 for doms in by_level.values() for d in doms}
        for sched in schedules:
            total = {lv: np.zeros(len(doms), dtype=np.int64) for lv, doms in by_level.items()}
            for chain in sched.chains:
                worst = {lv: np.zeros(len(doms), dtype=np.int64) for lv, doms in by_level.items()}
                for step in chain:
                    if not step.transfers:
                        continue
                    ends = _ends(step.transfers)
                    src, dst = machine[ends[0]], machine[ends[1]]
                    for lv, part in parts.items():
                        a, b = part[src], part[dst]
                        cross = a != b
                        n = len(by_level[lv])
                        leave = np.bincount(a[cross & (a >= 0)], minlength=n)
                        enter = np.bincount(b[cross & (b >= 0)], minlength=n)
                        worst[lv] = np.maximum(worst[lv], np.maximum(leave, enter))
                for lv in total:
                    total[lv] += worst[lv]
            for lv, doms in by_level.items():
                for i, d in enumerate(doms):
                    need[d] = max(need[d], int(total[lv][i]))
        self.max_flows = max(need.values(), default=0)  # the largest N(x) (reported in docs and tests)
        if any(cap < need[under[lo]] * c_nic * (1 - 1e-12) for lo, cap in fabric):
            return
        self.switches, self.leaves, self.level = switches, leaves, level
        self.bit = {x: 1 << i for i, x in enumerate(sorted(switches))}
        self.up = {x: tuple(sorted(y for y in g[x] if y in switches and level[y] == level[x] + 1)) for x in switches}
        self.level_mask: dict[int, int] = {}
        for x in switches:
            self.level_mask[level[x]] = self.level_mask.get(level[x], 0) | self.bit[x]
        reach = self._reach(frozenset())
        # the lowest level at which each pair of leaves has a common ancestor, and a check that the healthy
        # least-cost hop count is the up-then-down one, 2 (h - 1): else the proof below does not apply
        self.pairs = []
        top = max(self.level_mask)
        adjacent = {x: tuple(y for y in g[x] if y in switches) for x in switches}
        for i, a in enumerate(leaves):
            dist = self._bfs(adjacent, a)
            for b in leaves[i + 1:]:
                h = next((lv for lv in range(1, top + 1) if reach[a] & reach[b] & self.level_mask[lv]), None)
                if h is None or dist.get(b) != 2 * (h - 1):
                    return
                self.pairs.append((a, b, self.level_mask[h]))
        self.ok = True

    @staticmethod
    def _bfs(adjacent, source: str) -> dict[str, int]:
        dist = {source: 0}
        queue = deque([source])
        while queue:
            x = queue.popleft()
            for y in adjacent[x]:
                if y not in dist:
                    dist[y] = dist[x] + 1
                    queue.append(y)
        return dist

    def _reach(self, dead: frozenset) -> dict[str, int]:
        """Switch -> bitmask of the switches reachable from it by upward hops over live edges (itself too)."""
        reach: dict[str, int] = {}
        for x in sorted(self.switches, key=lambda x: -self.level[x]):
            r = self.bit[x]
            for y in self.up[x]:
                if not dead or (x, y) not in dead:
                    r |= reach[y]
            reach[x] = r
        return reach

    def canonical(self, links: tuple[tuple[str, str, float], ...]) -> tuple[tuple[str, str, float], ...]:
        """() when every link of `links` is dead (factor 0) and the state is provably unfelt, else `links`.
        With the dead edges out, a pair of leaves keeps its hop count iff it keeps a common ancestor at its
        healthy level (a shorter path cannot appear by removing edges, and any path of the healthy length is
        up-then-down)."""
        if not self.ok or not links or any(f != 0.0 for _, _, f in links):
            return links
        if any(not (u in self.switches and v in self.switches) for u, v, _ in links):
            return links
        dead = frozenset(p for u, v, _ in links for p in ((u, v), (v, u)))
        reach = self._reach(dead)
        return () if all(reach[a] & reach[b] & mask for a, b, mask in self.pairs) else links
