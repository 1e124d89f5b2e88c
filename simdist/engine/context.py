"""What every run needs from a scenario's cluster: topology, router, network model, groups, PS servers."""
from __future__ import annotations

from dataclasses import dataclass

import simpy

from simdist.collectives.schedule import CollectiveOp, Group, Schedule
from simdist.network.base import NetworkModel
from simdist.scenario import Fidelity, PsPlacement, Scenario, StrategyKind
from simdist.topology.graph import Topology


@dataclass(eq=False)
class FabricContext:
    """The built cluster for one run: a simpy Environment, the network model and the DP group."""

    scenario: Scenario
    env: simpy.Environment
    topology: Topology
    network: NetworkModel
    group: Group
    servers: tuple[int, ...]
    channels: int = 1  # concurrent rings, one per NIC rail (NCCL channels)

    def schedule(self, op: CollectiveOp, size_bytes: float, server_delay_s: float = 0.0) -> Schedule:
        """The schedule the scenario's strategy and backend run for one collective call."""
        from simdist.collectives.algorithms import supports
        from simdist.collectives.backends import build_backend_schedule

        comm = self.scenario.communication
        # hierarchical, torus2d and ps exist for all_reduce only (halving-doubling's all_gather for
        # power-of-two groups only); a codec's all_gather or all_to_all (top-k, 1-bit) then runs as a
        # ring, as Horovod and DDP hooks do
        from simdist.collectives.host_reduce import host_reduced

        requested = comm.strategy.value if supports(op, comm.strategy.value, self.group.size) else "ring"
        if requested == "ps" and comm.ps_aggregation == "node":  # local aggregation first (collectives/ps.py)
            from simdist.collectives.ps import ps_node_chains

            sched = Schedule(op, "ps", float(size_bytes), ps_node_chains(size_bytes, self.group, self.servers,
                                                                         server_delay_s))
        else:
            sched = build_backend_schedule(comm.backend.value, op, size_bytes, self.group, requested=requested,
                                           intra=comm.hierarchical_intra.value, inter=comm.hierarchical_inter.value,
                                           servers=self.servers, server_delay_s=server_delay_s,
                                           channels=self.channels)
        # reductions on CPUs (gloo's host-memory algorithms, CPU parameter servers) cost host memory time
        return host_reduced(sched, comm.backend.value, requested, comm.ps_server.value, self.servers)


def build_context(scenario: Scenario, fidelity: Fidelity) -> FabricContext:
    """Build topology (with dedicated PS hosts when asked), routing and the network model."""
    from simdist.cluster import build_network, data_parallel_group, ps_server_endpoints
    from simdist.topology.build import build_topology
    from simdist.topology.routing import ring_channels

    comm = scenario.communication
    dedicated = comm.strategy == StrategyKind.PS and comm.ps_placement == PsPlacement.DEDICATED
    server_hosts = comm.ps_servers if dedicated else 0
    server_nic = scenario.cluster.node_groups[0].nic.host_side() if dedicated else None
    topology = build_topology(scenario.cluster, server_hosts=server_hosts, server_nic=server_nic)
    env = simpy.Environment()
    network = build_network(fidelity.value, env, topology)
    group = data_parallel_group(scenario.cluster, topology)
    servers: tuple[int, ...] = ()
    if comm.strategy == StrategyKind.PS:
        servers = tuple(ps_server_endpoints(topology, comm.ps_servers, comm.ps_placement.value))
    return FabricContext(scenario, env, topology, network, group, servers, ring_channels(topology, group.nodes))
