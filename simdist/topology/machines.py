"""A machine as the fabric sees it: its NIC vertices and their link; shared by every fabric builder."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence, TypeVar

from simdist.hardware.specs import LinkSpec

T = TypeVar("T")

if TYPE_CHECKING:  # any graph with networkx's add_edge/has_edge/edges: a LinkGraph or an nx.Graph
    from simdist.topology.plain import LinkGraph


@dataclass(frozen=True)
class Machine:
    """One worker node or dedicated server host: its vertex prefix and NICs (each with `nic_link`)."""

    prefix: str  # "node3" or "server0"
    nics: tuple[str, ...]
    nic_link: LinkSpec

    @property
    def nic_capacity_Bps(self) -> float:
        """Line rate of all NICs together (what a leaf downlink must carry)."""
        return len(self.nics) * self.nic_link.bandwidth_Bps


def attach(g: LinkGraph, machine: Machine, switch: str) -> None:
    """Cable every NIC of `machine` to `switch` with the NIC's own link (kind 'nic')."""
    for nic in machine.nics:
        g.add_edge(nic, switch, link=machine.nic_link, kind="nic")


def add_link(g: LinkGraph, u: str, v: str, link: LinkSpec, kind: str, multiplicity: int = 1) -> None:
    """One edge; `multiplicity` parallel cables are one edge with the attribute (capacity x m)."""
    if g.has_edge(u, v):  # a second cable between the same pair (small rings/tori)
        data = g.edges[u, v]
        data["multiplicity"] = data.get("multiplicity", 1) + multiplicity
        return
    if multiplicity > 1:
        g.add_edge(u, v, link=link, kind=kind, multiplicity=multiplicity)
    else:
        g.add_edge(u, v, link=link, kind=kind)


def spread_over_nodes(per_node: Sequence[Sequence[T]], count: int) -> list[T]:
    """`count` items picked from each node's list in turn: every node's first item first (evenly spaced over
    the nodes when fewer are wanted), then every node's second, and so on (how parameter servers are placed).
    The caller checks that the lists hold `count` items in all."""
    out: list[T] = []
    layer = 0
    while len(out) < count:
        candidates = [items[layer] for items in per_node if layer < len(items)]
        want = min(count - len(out), len(candidates))
        out.extend(candidates[(k * len(candidates)) // want] for k in range(want))
        layer += 1
    return out
