"""Small hand-built topologies and schedules for the network tests."""
from __future__ import annotations

import networkx as nx

from simdist.collectives.schedule import CollectiveOp, Schedule, Step, Transfer
from simdist.hardware.specs import LinkSpec
from simdist.topology.graph import Topology


def single_switch(n: int, bandwidth_Bps: float = 10e9, latency_s: float = 1e-6, efficiency: float = 1.0,
                  servers: int = 0, per_node: int = 1) -> Topology:
    """n GPUs (then `servers` hosts) each on its own link to one switch."""
    g = nx.Graph()
    link = LinkSpec(bandwidth_Bps, latency_s, efficiency)
    names = [f"gpu{i}" for i in range(n)] + [f"server{j}" for j in range(servers)]
    for v in names:
        g.add_edge(v, "switch", link=link, kind="nic")
    nodes = tuple(i // per_node for i in range(n)) + tuple(n // per_node + (n % per_node > 0) + j for j in range(servers))
    return Topology(g, tuple(names), nodes, n)


def dumbbell(left: int, right: int, edge_Bps: float = 10e9, core_Bps: float = 10e9, latency_s: float = 1e-6) -> Topology:
    """left hosts on switch A, right hosts on switch B, one core link A-B."""
    g = nx.Graph()
    names = [f"h{i}" for i in range(left + right)]
    for i, v in enumerate(names):
        g.add_edge(v, "A" if i < left else "B", link=LinkSpec(edge_Bps, latency_s), kind="nic")
    g.add_edge("A", "B", link=LinkSpec(core_Bps, latency_s), kind="fabric")
    return Topology(g, tuple(names), tuple(range(left + right)), left + right)


def ring_allreduce(n: int, size_bytes: float, ranks: list[int] | None = None) -> Schedule:
    ranks = list(range(n)) if ranks is None else ranks
    step = Step(tuple(Transfer(ranks[i], ranks[(i + 1) % n], size_bytes / n) for i in range(n)), repeat=2 * (n - 1))
    return Schedule(CollectiveOp.ALL_REDUCE, "ring", size_bytes, ((step,),))


def one_step(transfers: list[tuple[int, int, float]], lockstep: bool = False, repeat: int = 1) -> Schedule:
    step = Step(tuple(Transfer(s, d, b) for s, d, b in transfers), repeat=repeat, lockstep=lockstep)
    return Schedule(CollectiveOp.ALL_TO_ALL, "hand", 0.0, ((step,),))
