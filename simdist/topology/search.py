"""Graph search and hashing primitives of the router: hop costs, stable flow hashes, integer Dijkstra/BFS."""
from __future__ import annotations

import hashlib
import heapq
import math

REFERENCE_Bps = 1e12
INF = math.inf
_MASK = (1 << 64) - 1


def edge_cost(capacity_Bps: float) -> int:
    """Routing cost of one hop (see the module docstring)."""
    return 1 + int(round(REFERENCE_Bps / capacity_Bps)) if capacity_Bps > 0 else 1 << 40


def mix64(x: int) -> int:
    """splitmix64 finaliser: a well-spread 64-bit hash of a 64-bit integer."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def flow_hash(src: int, dst: int, flow_key: int) -> int:
    """A stable 64-bit hash of one flow (blake2b; the same in every process)."""
    return int.from_bytes(hashlib.blake2b(f"{src}:{dst}:{flow_key}".encode(), digest_size=8).digest(), "little")


def dijkstra(adj: dict, seeds: dict, fixed=frozenset()) -> dict:
    """Integer Dijkstra over `adj` from several seeds; `fixed` vertices keep their seed distance."""
    dist = dict(seeds)
    heap = [(d, v) for v, d in seeds.items()]
    heapq.heapify(heap)
    pop, push, get = heapq.heappop, heapq.heappush, dist.get
    while heap:
        d, u = pop(heap)
        if d > dist[u]:
            continue
        for w, c in adj[u].items():
            nd = d + c
            if nd < get(w, INF) and w not in fixed:
                dist[w] = nd
                push(heap, (nd, w))
    return dist


def bfs(adj: dict, src: str, step: int) -> dict:
    """Distances when every edge costs `step` (fat trees): a breadth-first search."""
    dist = {src: 0}
    frontier = [src]
    d = 0
    while frontier:
        d += step
        nxt = []
        for u in frontier:
            for w in adj[u]:
                if w not in dist:
                    dist[w] = d
                    nxt.append(w)
        frontier = nxt
    return dist
