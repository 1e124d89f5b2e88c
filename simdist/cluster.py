"""Placement: rank -> GPU -> node -> topology endpoint; process groups, PS servers, the network model.

GPUs are numbered node-major, group by group (ClusterSpec); topology endpoints are the GPUs in
that order, then dedicated server hosts. Rank i runs on GPU i unless a Placement says otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from simdist.collectives.schedule import Group
from simdist.errors import InfeasibleError
from simdist.graph.tasks import ProcessGroup
from simdist.hardware.specs import ClusterSpec
from simdist.network.analytical import AnalyticalNetwork
from simdist.network.base import NetworkModel
from simdist.network.flows import FlowNetwork
from simdist.scenario import Fidelity, PsPlacement
from simdist.topology.graph import Topology
from simdist.topology.machines import spread_over_nodes
from simdist.topology.routing import Router


@dataclass(frozen=True)
class Placement:
    """Where each rank runs: its GPU, that GPU's node, and the GPU's topology endpoint."""

    rank_gpu: tuple[int, ...]
    gpu_node: tuple[int, ...]
    gpu_endpoint: tuple[int, ...]

    @classmethod
    def identity(cls, cluster: ClusterSpec) -> "Placement":
        """Rank i on GPU i (node-major numbering), GPU i at endpoint i."""
        gpu_node = tuple(n for n, g in enumerate(cluster.nodes()) for _ in range(g.gpus_per_node))
        gpus = tuple(range(cluster.num_gpus))
        return cls(gpus, gpu_node, gpus)

    @property
    def size(self) -> int:
        return len(self.rank_gpu)

    def gpu(self, rank: int) -> int:
        return self.rank_gpu[rank]

    def node(self, rank: int) -> int:
        return self.gpu_node[self.rank_gpu[rank]]

    def endpoint(self, rank: int) -> int:
        return self.gpu_endpoint[self.rank_gpu[rank]]

    def group(self, ranks: "tuple[int, ...] | list[int] | None" = None) -> Group:
        """The Group of `ranks` (default all) as endpoints, in rank order, split by node."""
        ranks = tuple(range(self.size)) if ranks is None else tuple(ranks)
        rank_gpu, gpu_node, gpu_endpoint = self.rank_gpu, self.gpu_node, self.gpu_endpoint
        gpus = [rank_gpu[r] for r in ranks]
        endpoints = tuple(gpu_endpoint[g] for g in gpus)
        by_node: dict[int, list[int]] = {}
        for g, e in zip(gpus, endpoints):
            by_node.setdefault(gpu_node[g], []).append(e)
        return Group(endpoints, tuple(tuple(v) for v in by_node.values()))


def data_parallel_group(cluster: ClusterSpec, topology: Topology) -> Group:
    """All GPUs of the cluster as one data-parallel group (Group.nodes = the GPUs of each node)."""
    assert topology.num_gpus == cluster.num_gpus, (topology.num_gpus, cluster.num_gpus)
    return Placement.identity(cluster).group()


def dp_process_group(group: Group, name: str = "dp") -> ProcessGroup:
    """The data-parallel process group over `group` (rank i at the group's i-th endpoint)."""
    return ProcessGroup(name, "dp", tuple(range(group.size)), group)


def _gpus_by_node(topology: Topology) -> list[list[int]]:
    nodes: dict[int, list[int]] = {}
    for ep in range(topology.num_gpus):
        nodes.setdefault(topology.endpoint_node[ep], []).append(ep)
    return [nodes[k] for k in sorted(nodes)]


def ps_server_endpoints(topology: Topology, n: int, placement: "PsPlacement | str") -> tuple[int, ...]:
    """Endpoints of `n` parameter servers: dedicated hosts or the nodes' CPU sockets (placement host; both
    after the GPUs, as build_topology added them), or GPUs spread over nodes (colocated: one per node first,
    evenly spaced over the nodes, then a second per node...)."""
    kind = PsPlacement(placement)  # the schema admits only these
    assert n >= 1, n
    if kind in (PsPlacement.DEDICATED, PsPlacement.HOST):
        hosts = len(topology.endpoints) - topology.num_gpus
        assert n <= hosts, f"io.resolve builds {n} {kind.value} server endpoints, the topology has {hosts}"
        return tuple(range(topology.num_gpus, topology.num_gpus + n))
    nodes = _gpus_by_node(topology)
    if n > topology.num_gpus:  # io.resolve checks the scenario's cluster; a failure state's may have lost GPUs
        raise InfeasibleError(f"{n} colocated parameter servers on {topology.num_gpus} GPUs: at most one per GPU")
    return tuple(spread_over_nodes(nodes, n))


NETWORK_BUILDERS: dict[Fidelity, Callable[[object, Topology, Router | None], NetworkModel]] = {
    Fidelity.ESTIMATE: lambda env, topology, router: AnalyticalNetwork(topology, router),
    Fidelity.SIMULATE: lambda env, topology, router: FlowNetwork(env, topology, router, record_intervals=True),
}


def build_network(fidelity: "Fidelity | str", env, topology: Topology, router: Router | None = None) -> NetworkModel:
    """The network model for a fidelity: 'estimate' -> AnalyticalNetwork, 'simulate' -> FlowNetwork."""
    kind = Fidelity(fidelity)  # the schema and the CLI admit only these
    return NETWORK_BUILDERS[kind](env, topology, router)
