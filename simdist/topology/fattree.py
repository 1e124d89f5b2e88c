"""Switched fabrics: one switch, and two- or three-level fat trees (leaf/spine, leaf/aggregation/core).

Sizing rules (documented contract):
- A leaf holds `nodes_per_leaf` machines; its downlink capacity is nodes_per_leaf x the largest
  machine NIC capacity (line rate) in the cluster, so every leaf is cabled alike.
- Uplink capacity = downlink / oversubscription, realised as k = ceil(capacity / fabric.link.bandwidth)
  links at fabric.link speed, each to a different upper switch. When capacity/bandwidth is not an
  integer, the k links are scaled down to carry exactly the uplink capacity. A switch reaches at most
  RADIX // 2 distinct upper switches: beyond that, parallel cables to the same upper switch are one
  edge with `multiplicity` (using the largest divisor of k that fits, else scaling again).
- Levels: `fabric.levels`, or automatically 2 while a spine needs at most RADIX ports
  (leaves x parallel cables) and 3 beyond. Three-level trees group `leaves_per_pod` leaves (default
  RADIX // 2) into pods; every leaf of a pod reaches every aggregation switch of its pod, aggregation
  switch i of each pod reaches core group i, and above the leaves there is no further oversubscription.
- Machines are placed in order (workers, then dedicated servers), so servers fill the last leaf's
  free slots and then extra leaves.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from simdist.hardware.specs import FabricSpec, LinkSpec
from simdist.topology.machines import Machine, add_link, attach

if TYPE_CHECKING:
    from simdist.topology.plain import LinkGraph

RADIX = 64  # ports of a realistic fabric switch (e.g. 64 x 400G)
MAX_UPPER = RADIX // 2  # distinct upper switches one switch reaches


@dataclass(frozen=True)
class Uplinks:
    """How a capacity is cabled upwards: `switches` upper switches x `multiplicity` cables of `link`."""

    switches: int
    multiplicity: int
    link: LinkSpec

    @property
    def capacity_Bps(self) -> float:
        return self.switches * self.multiplicity * self.link.bandwidth_Bps


def spread_uplinks(capacity_Bps: float, link: LinkSpec, limit: int = MAX_UPPER) -> Uplinks:
    """Cable `capacity_Bps` upwards with links of class `link` (see the module rules)."""
    ratio = capacity_Bps / link.bandwidth_Bps
    k = max(1, math.ceil(ratio - 1e-9))
    switches = max(d for d in range(1, min(k, limit) + 1) if k % d == 0)
    if switches * 2 <= min(k, limit):  # k has no good divisor: spread over `limit` and scale
        switches = min(k, limit)
    mult = math.ceil(k / switches)
    per_link = capacity_Bps / (switches * mult)
    if not math.isclose(per_link, link.bandwidth_Bps, rel_tol=1e-12):
        link = link.with_(bandwidth_Bps=per_link)
    return Uplinks(switches, mult, link)


def build_single_switch(g: LinkGraph, fabric: FabricSpec, machines: list[Machine]) -> str:
    """Every NIC on one switch "switch" (a non-blocking crossbar)."""
    g.add_node("switch")
    for m in machines:
        attach(g, m, "switch")
    g.graph["fabric"] = {"kind": "single_switch"}
    return f"single switch, {len(machines)} machines"


def choose_levels(fabric: FabricSpec, leaves: int, up: Uplinks) -> int:
    """fabric.levels, else 2 while a spine needs <= RADIX ports, else 3."""
    if fabric.levels is not None:
        return fabric.levels
    return 2 if leaves * up.multiplicity <= RADIX else 3


def build_fat_tree(g: LinkGraph, fabric: FabricSpec, machines: list[Machine]) -> str:
    """Leaves of `nodes_per_leaf` machines under spines (2 levels) or aggregation + core (3 levels)."""
    per_leaf = fabric.nodes_per_leaf or min(len(machines), RADIX // 2) or 1
    n_leaves = max(1, math.ceil(len(machines) / per_leaf))
    down_Bps = per_leaf * max(m.nic_capacity_Bps for m in machines)
    up = spread_uplinks(down_Bps / fabric.oversubscription, fabric.link)
    leaves = [f"leaf{i}" for i in range(n_leaves)]
    for i, m in enumerate(machines):
        attach(g, m, leaves[i // per_leaf])
    levels = choose_levels(fabric, n_leaves, up)
    meta = {"kind": "fat_tree", "levels": levels, "leaves": n_leaves, "nodes_per_leaf": per_leaf,
            "leaf_uplink_Bps": up.capacity_Bps * fabric.link.efficiency, "oversubscription": fabric.oversubscription}
    if levels == 2:
        spines = [f"spine{j}" for j in range(up.switches)]
        for leaf in leaves:
            for s in spines:
                add_link(g, leaf, s, up.link, "fabric", up.multiplicity)
        g.graph["fabric"] = meta | {"spines": len(spines)}
        return (f"fat tree, 2 levels: {n_leaves} leaves x {per_leaf} nodes, {len(spines)} spines"
                f" x{up.multiplicity}, {fabric.oversubscription:g}:1")
    lpp = min(fabric.leaves_per_pod or MAX_UPPER, n_leaves)
    pods = math.ceil(n_leaves / lpp)
    agg_up = spread_uplinks(lpp * up.capacity_Bps / up.switches, fabric.link)
    for i, leaf in enumerate(leaves):
        p = i // lpp
        for a in range(up.switches):
            add_link(g, leaf, f"agg{p}.{a}", up.link, "fabric", up.multiplicity)
    for p in range(pods):
        for a in range(up.switches):
            for c in range(agg_up.switches):
                add_link(g, f"agg{p}.{a}", f"core{a * agg_up.switches + c}", agg_up.link, "fabric", agg_up.multiplicity)
    cores = up.switches * agg_up.switches
    g.graph["fabric"] = meta | {"pods": pods, "leaves_per_pod": lpp, "aggs_per_pod": up.switches, "cores": cores,
                                "pod_uplink_Bps": up.switches * agg_up.capacity_Bps * agg_up.link.efficiency}
    return (f"fat tree, 3 levels: {pods} pods x {lpp} leaves x {per_leaf} nodes, {up.switches} aggregation"
            f" switches per pod, {cores} core switches, {fabric.oversubscription:g}:1")
