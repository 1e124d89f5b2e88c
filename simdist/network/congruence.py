"""Congruence classes of a layout's process groups: names whose union schedules take the same idle-fabric time.

A model-parallel layout names every stage's tp and dp group and every pipeline boundary separately, yet on a
cluster of identical machines behind one switch these unions of groups are translates of each other. Two unions
are congruent when a relabelling of machines that keeps their order (so every sort by endpoint or machine gives
the same order) maps one onto the other rank for rank, keeping each rank's GPU position inside its machine. Such a
relabelling is an automorphism of the fabric when

* the fabric is one switch (every machine one hop from the same switch: no hop structure to preserve), with one
  node group (one machine template, one set of link figures), no parameter-server hosts and no SHARP;
* no route depends on a hash, i.e. on absolute endpoint numbers: every GPU is pinned to its own rail NIC, the
  GPU-to-GPU paths inside a machine and the GPU-to-rail-NIC paths have no equal-cost branch (the template's fixed
  paths), every NIC has exactly one cable out of its machine, and no GPU owns several fabric planes;
* the network is the topology's own (default routes, shared compiled steps, unchanged link capacities: no
  failure state, no degraded link).

Then each union's schedule (built from its first group, moved onto the others) is the relabelled schedule of the
other, its transfers cross the relabelled links in the same order, and the closed-form time is the same float.
`class_key` returns None wherever one of these fails, and the caller times that name on its own.
"""
from __future__ import annotations

import numpy as np

from simdist.hardware.specs import TopologyKind
from simdist.network.steps import shared_steps
from simdist.topology.routing import shared_router


def symmetric_fabric(scenario, topology, network) -> bool:
    """Whether congruent unions of groups on this cluster and network take the same time (module docstring)."""
    cluster = scenario.cluster
    if cluster.fabric.topology != TopologyKind.SINGLE_SWITCH or len(cluster.node_groups) != 1 or cluster.fabric.sharp:
        return False
    if len(topology.endpoints) != sum(g.count * g.gpus_per_node for g in cluster.node_groups):
        return False  # parameter-server hosts
    if getattr(network, "steps", None) is not shared_steps(topology) or not network.pristine:
        return False  # a failure state's routes or a degraded link
    router = shared_router(topology)
    graph, dist = router.graph, router.distances
    if graph.planes or graph.routing == "spray":
        return False
    gpus = topology.endpoints
    if any(v not in graph.lane or graph.rail.get(v) is None for v in gpus):
        return False  # a GPU without its own rail NIC takes a hashed NIC
    machines = {graph.machine[v] for v in gpus}
    if None in machines or len({dist.template(m) for m in machines}) != 1:
        return False
    first = graph.machine[gpus[0]]
    local = [v for v in gpus if graph.machine[v] == first]
    rails = {graph.rail[v] for v in local}
    if any(dist.fixed_local(first, s, t) is None for s in local for t in local if s != t):
        return False
    if any(dist.fixed_local(first, v, graph.rail[v]) is None or dist.fixed_local(first, graph.rail[v], v) is None
           for v in local):
        return False
    adj = topology.graph.adj
    return all(sum(1 for u in adj[nic] if graph.machine.get(u) != first) == 1 for nic in rails)


class GroupClasses:
    """Each process-group name's congruence class on one cluster and network (its class key, or the name itself
    where the fabric is not symmetric), memoised per name."""

    def __init__(self, scenario, topology, network) -> None:
        self.symmetric = symmetric_fabric(scenario, topology, network)
        self._classes: dict[str, object] = {}
        if self.symmetric:
            self.node_of = np.asarray(topology.endpoint_node, dtype=np.int64)
            first: dict[int, int] = {}
            for e, m in enumerate(topology.endpoint_node):
                first.setdefault(m, e)
            self.local_of = np.arange(self.node_of.size) - np.array([first[m] for m in topology.endpoint_node])

    def of(self, name: str, kind: str, groups) -> object:
        """The class of the union `groups` named `name` (class_key where the fabric is symmetric, else `name`)."""
        hit = self._classes.get(name)
        if hit is None:
            hit = self._classes[name] = self.class_key(kind, groups) if self.symmetric else name
        return hit

    def class_key(self, kind: str, groups) -> tuple:
        """(kind, each group's size, each rank's (machine's place among the union's machines, GPU position)):
        equal keys mean a machine relabelling that keeps order maps one union onto the other rank for rank."""
        sizes = tuple(len(g.ranks) for g in groups)
        ranks = np.fromiter((r for g in groups for r in g.ranks), dtype=np.int64, count=sum(sizes))
        nodes = self.node_of[ranks]
        place = np.searchsorted(np.unique(nodes), nodes)
        return "class", kind, sizes, place.tobytes(), self.local_of[ranks].tobytes()
