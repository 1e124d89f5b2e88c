"""What every run needs from a scenario's cluster: topology, router, network model, groups, PS servers."""
from __future__ import annotations

from dataclasses import dataclass, field

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
    _schedules: dict = field(default_factory=dict, repr=False)
    _times: dict = field(default_factory=dict, repr=False)

    def cached_schedule(self, op: CollectiveOp, size_bytes: float, server_delay_s: float = 0.0) -> Schedule:
        """`schedule`, memoised for every run on this context (a sweep builds each schedule once)."""
        key = (op, size_bytes, server_delay_s)
        hit = self._schedules.get(key)
        if hit is None:
            if len(self._schedules) >= 4096:
                self._schedules.clear()
            hit = self._schedules[key] = self.schedule(op, size_bytes, server_delay_s)
        return hit

    def collective_time(self, op: CollectiveOp, size_bytes: float, server_delay_s: float = 0.0) -> float:
        """The collective alone on the idle fabric (the network model's `schedule_time`), memoised by value."""
        key = (op, size_bytes, server_delay_s)
        hit = self._times.get(key)
        if hit is None:
            if len(self._times) >= 4096:
                self._times.clear()
            hit = self._times[key] = self.network.schedule_time(self.cached_schedule(op, size_bytes, server_delay_s))
        return hit

    def process_groups(self) -> dict:
        """The run's process groups by name (the data-parallel group now; tp and pp groups later)."""
        from simdist.cluster import dp_process_group

        return {"dp": dp_process_group(self.group)}

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
                                           channels=self.channels, node_orders=self._node_orders(), **self._tuning())
        # reductions on CPUs (gloo's host-memory algorithms, CPU parameter servers) cost host memory time
        return host_reduced(sched, comm.backend.value, requested, comm.ps_server.value, self.servers)


    def _node_orders(self):
        """The rings NCCL builds from each node's graph (collectives.node_rings), computed once."""
        if "_orders" not in self.__dict__:
            from simdist.collectives.node_rings import group_node_orders

            self.__dict__["_orders"] = group_node_orders(self.topology, self.group, self.channels)
        return self.__dict__["_orders"]

    def _tuning(self) -> dict:
        """What NCCL's tuner needs (backend nccl only): the group's hardware as NCCL sees it, and
        simdist's own analytical time of a candidate schedule on this topology to rank candidates."""
        if self.scenario.communication.backend.value != "nccl":
            return {}
        cached = self.__dict__.get("_tuning_args")
        if cached is None:
            from simdist.collectives.fabric import from_topology
            from simdist.network.analytical import AnalyticalNetwork

            timer = self.network if isinstance(self.network, AnalyticalNetwork) else AnalyticalNetwork(self.topology)
            cached = {"fabric": from_topology(self.topology, self.group), "timer": timer.schedule_time}
            self.__dict__["_tuning_args"] = cached
        return cached

    def model_parallel_fabric(self, layout, plan):
        """The tp, dp and p2p groups of `layout` with their memoised union schedules (engine.mp_groups), built
        once per layout on this context, so a sweep's points on one cluster share them."""
        from simdist.engine.mp_groups import MpFabric

        cache = self.__dict__.setdefault("_mp_fabrics", {})
        key = (layout, plan.virtual_stages)
        if key not in cache:
            if len(cache) >= 64:
                cache.clear()
            cache[key] = MpFabric(self, layout, plan)
        return cache[key]


def build_context(scenario: Scenario, fidelity: Fidelity, env: simpy.Environment | None = None) -> FabricContext:
    """Build topology (with dedicated PS hosts when asked), routing and the network model (on `env`,
    a new Environment by default)."""
    from simdist.cluster import build_network, data_parallel_group, ps_server_endpoints
    from simdist.topology.build import build_topology
    from simdist.topology.routing import ring_channels

    comm = scenario.communication
    dedicated = comm.strategy == StrategyKind.PS and comm.ps_placement == PsPlacement.DEDICATED
    server_hosts = comm.ps_servers if dedicated else 0
    server_nic = scenario.cluster.node_groups[0].nic.host_side() if dedicated else None
    topology = build_topology(scenario.cluster, server_hosts=server_hosts, server_nic=server_nic)
    env = simpy.Environment() if env is None else env
    network = build_network(fidelity.value, env, topology)
    group = data_parallel_group(scenario.cluster, topology)
    servers: tuple[int, ...] = ()
    if comm.strategy == StrategyKind.PS:
        servers = tuple(ps_server_endpoints(topology, comm.ps_servers, comm.ps_placement.value))
    return FabricContext(scenario, env, topology, network, group, servers, ring_channels(topology, group.nodes))
