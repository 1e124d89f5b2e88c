"""The rings (channels) NCCL builds inside one node from its actual graph (src/graph/search.cc).

NCCL searches the node's GPU graph for rings that, run together, use every NVLink of every GPU:
on an 8-GPU DGX-1 hybrid cube mesh the six NVLink bricks of a V100 (four of a P100) carry three
(two) Hamiltonian cycles, each run in both directions, so six (four) rings of S/6 (S/4) each run
at one brick's rate: bus bandwidth = bricks per GPU x one brick. `node_ring_orders` does the same
search: it lists the Hamiltonian cycles of the GPUs' direct NVLink graph and takes the most that
fit in the bricks (a doubled pair may carry two), every cycle in both directions. Where the NVLinks
do not close a cycle (NVLink-bridged pairs), the ring keeps bridged pairs adjacent and crosses
PCIe between them, run in both directions so that every GPU's PCIe link carries data both ways.
Behind an NVSwitch, or on plain PCIe, one ring in GPU order already loads every GPU's link (the
switch link is one aggregated edge), so one ring is kept. On an 8-GPU full mesh of single links (AMD Instinct
MI300X-class xGMI platforms) RCCL does not search: its topology model for that node (src/graph/rome_models.cc,
the 8-GPU 7-link model) lists 14 rings, in which every directed GPU-GPU link carries exactly two, so all seven
links of each GPU run in both directions (bus bandwidth = 7 links); those rings are used as RCCL lists them.
Across such nodes RCCL's model with a NIC per GPU (the nNics 8 model) runs 8 channels, channel c entering the node
at GPU c through NIC c and leaving by another GPU's NIC along a Hamiltonian path; the 8 paths use every directed
link exactly once (RCCL_XGMI8_NET_PATHS).

Orders are LOCAL GPU indices 0..k-1 of the node; callers map them onto the group's ranks.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Iterable

Pairs = frozenset[tuple[int, int, int]]  # (a, b, bricks) with a < b

# RCCL's rings for 8 GPUs fully connected by single xGMI links (rome_models.cc, the nGpus 8 / nLinks 7 model's
# ringBase, as RCCL runs them on MI300X-class nodes): seven rings and their reverses; each directed link in two
RCCL_XGMI8_RINGS: tuple[tuple[int, ...], ...] = tuple(tuple(int(x) for x in ring.split()) for ring in (
    "0 1 2 3 4 5 6 7|0 1 2 3 4 5 7 6|0 2 4 1 3 6 5 7|0 2 4 6 1 7 3 5|0 3 1 5 2 7 4 6|0 3 5 1 6 2 7 4|0 4 1 7 3 6 2 5|"
    "7 6 5 4 3 2 1 0|6 7 5 4 3 2 1 0|7 5 6 3 1 4 2 0|5 3 7 1 6 4 2 0|6 4 7 2 5 1 3 0|4 7 2 6 1 5 3 0|5 2 6 3 7 1 4 0"
).split("|"))

# RCCL's channels across nodes of that mesh with one NIC per GPU (rome_models.cc, nGpus 8 / nNics 8 / nLinks 7
# model's ringBase "N0 0 1 2 3 4 5 6 7 N7|N1 1 0 2 4 3 5 7 6 N6|..."): path c starts at GPU c (its NIC in)
RCCL_XGMI8_NET_PATHS: tuple[tuple[int, ...], ...] = tuple(tuple(int(x) for x in path.split()) for path in (
    "0 1 2 3 4 5 6 7|1 0 2 4 3 5 7 6|2 5 0 3 6 1 7 4|3 7 0 4 2 1 6 5|4 6 2 7 3 0 5 1|5 4 7 1 3 2 6 0|"
    "6 3 1 4 0 7 5 2|7 2 0 6 4 1 5 3"
).split("|"))


def _full_mesh_of_single_links(k: int, bricks: dict[tuple[int, int], int]) -> bool:
    return len(bricks) == k * (k - 1) // 2 and all(m == 1 for m in bricks.values())


def _cycles(k: int, adj: dict[int, list[int]]) -> list[tuple[int, ...]]:
    """Every Hamiltonian cycle through 0..k-1 once (starting at 0, second vertex < last)."""
    out: list[tuple[int, ...]] = []
    path = [0]
    seen = {0}

    def walk() -> None:
        if len(path) == k:
            if 0 in adj[path[-1]] and path[1] < path[-1]:
                out.append(tuple(path))
            return
        for nxt in adj[path[-1]]:
            if nxt not in seen:
                seen.add(nxt)
                path.append(nxt)
                walk()
                path.pop()
                seen.remove(nxt)

    walk()
    return out


def _edges(cycle: tuple[int, ...]) -> list[tuple[int, int]]:
    return [tuple(sorted((cycle[i], cycle[(i + 1) % len(cycle)]))) for i in range(len(cycle))]


def _pack(cycles: list[tuple[int, ...]], bricks: dict[tuple[int, int], int], limit: int) -> list[tuple[int, ...]]:
    """The largest multiset of cycles (at most `limit`) whose edge use fits in `bricks` (first found)."""
    best: list[tuple[int, ...]] = []
    used = dict.fromkeys(bricks, 0)
    chosen: list[tuple[int, ...]] = []

    def search(start: int) -> bool:
        nonlocal best
        if len(chosen) > len(best):
            best = list(chosen)
            if len(best) == limit:
                return True
        for i in range(start, len(cycles)):
            es = _edges(cycles[i])
            if all(used[e] < bricks[e] for e in es):
                for e in es:
                    used[e] += 1
                chosen.append(cycles[i])
                if search(i):
                    return True
                chosen.pop()
                for e in es:
                    used[e] -= 1
        return False

    search(0)
    return best


@lru_cache(maxsize=32)
def ring_orders(k: int, nvlink_pairs: Pairs, switched: bool) -> tuple[tuple[int, ...], ...]:
    """Directed ring orders over k GPUs given their direct NVLink pairs (with brick counts)."""
    if k <= 2 or switched or not nvlink_pairs:
        return (tuple(range(k)),)
    bricks = {(a, b): m for a, b, m in nvlink_pairs}
    if k == 8 and _full_mesh_of_single_links(k, bricks):
        return RCCL_XGMI8_RINGS
    adj: dict[int, list[int]] = {i: [] for i in range(k)}
    for a, b in sorted(bricks):
        adj[a].append(b)
        adj[b].append(a)
    degree = min(sum(m for (a, b), m in bricks.items() if i in (a, b)) for i in range(k))
    cycles = _cycles(k, adj) if k <= 12 else []
    packed = _pack(cycles, bricks, max(1, degree // 2)) if cycles else []
    if not packed:  # bridged pairs: keep each bridged pair adjacent, cross PCIe between pairs
        order: list[int] = []
        for a, b in sorted(bricks):
            if a not in order and b not in order:
                order += [a, b]
        order += [i for i in range(k) if i not in order]
        packed = [tuple(order)]
    rings: list[tuple[int, ...]] = []
    for c in packed:
        rings += [c, (c[0],) + tuple(reversed(c[1:]))]
    return tuple(rings)


def node_ring_orders(graph, gpu_vertices: Iterable[str]) -> tuple[tuple[int, ...], ...]:
    """The ring orders NCCL would run over one node's GPUs (vertices of a topology graph)."""
    gpus = list(gpu_vertices)
    index = {v: i for i, v in enumerate(gpus)}
    pairs = set()
    switched = False
    for v in gpus:
        for w, d in graph[v].items():
            if d.get("kind") != "nvlink":
                continue
            if w in index:
                a, b = sorted((index[v], index[w]))
                pairs.add((a, b, int(d.get("multiplicity", 1))))
            else:
                switched = True
    return ring_orders(len(gpus), frozenset(pairs), switched)


def channel_orders(orders: tuple[tuple[int, ...], ...], rail: list[int], channels: int) -> list[tuple[int, ...]]:
    """Per channel of a multi-node ring: the node order it runs (orders[c mod R]) rotated so that
    channels enter each node through distinct NICs and leave through distinct NICs (`rail[j]`: the
    NIC index local GPU j is bound to), channel c entering through NIC c where possible: a small
    backtracking search over rotations; without a solution, each channel's best rotation."""
    k = len(rail)
    nics = max(1, len(set(rail)))

    def rotations(c: int) -> list[tuple[int, ...]]:
        order = orders[c % len(orders)]
        rots = [order[s:] + order[:s] for s in range(k)]
        return sorted(rots, key=lambda o: rail[o[0]] != c % nics)

    chosen: list[tuple[int, ...]] = []

    def search(c: int, entries: frozenset, exits: frozenset) -> bool:
        if c == channels:
            return True
        for o in rotations(c):
            if rail[o[0]] in entries or rail[o[-1]] in exits:
                continue
            chosen.append(o)
            if search(c + 1, entries | {rail[o[0]]}, exits | {rail[o[-1]]}):
                return True
            chosen.pop()
        return False

    if channels <= nics and search(0, frozenset(), frozenset()):
        return chosen
    return [rotations(c)[0] for c in range(channels)]


def group_node_orders(topology, group, channels: int) -> tuple[tuple[int, ...], ...] | None:
    """The node orders ring.channel_rings takes for `group` on `topology` (None when the group's
    nodes differ in size or hold non-GPU endpoints): the graph's rings on one node, the rail-rotated
    channel paths across nodes."""
    if not group.nodes or len({len(n) for n in group.nodes}) != 1:
        return None
    vertices = [topology.endpoints[r] for r in group.nodes[0]]
    if len(vertices) < 2 or not all("/gpu" in v for v in vertices):
        return None
    orders = node_ring_orders(topology.graph, vertices)
    if len(group.nodes) == 1:
        return orders
    if orders == RCCL_XGMI8_RINGS:  # RCCL's 8-NIC model: its paths through the mesh, one per NIC
        orders = RCCL_XGMI8_NET_PATHS
    rails = [topology.graph.nodes[v].get("rail") for v in vertices]
    names = sorted({r for r in rails if r is not None})
    rail = [names.index(r) if r is not None else 0 for r in rails]
    return tuple(channel_orders(orders, rail, max(1, channels)))
