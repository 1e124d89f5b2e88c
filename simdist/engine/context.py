"""What every run needs from a scenario's cluster: topology, router, network model, groups, PS servers.

`build_cluster` builds what depends on the cluster alone (topology and routes, the data-parallel group,
ring channels, and lazily the node rings and NCCL's view of the node); `build_context` puts a network
model and the PS servers on it. `context_key` / `cluster_key` say exactly which scenario keys each part
depends on, so engine/context_cache.py can reuse them across the points of a sweep.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import simpy

from simdist.cluster import build_network, data_parallel_group, dp_process_group, ps_server_endpoints
from simdist.collectives.algorithms import supports
from simdist.collectives.backends import build_backend_schedule
from simdist.collectives.fabric import from_topology
from simdist.collectives.host_reduce import host_reduced
from simdist.collectives.nccl_env import enable_of
from simdist.collectives.node_rings import group_node_orders
from simdist.collectives.ps import ps_chains, ps_node_chains
from simdist.collectives.schedule import CollectiveOp, Group, Schedule
import simdist.engine.mp_groups as mp_groups  # lazy (simdist.LAZY_MODULES): data-parallel runs never load it
from simdist.network.analytical import AnalyticalNetwork
from simdist.network.base import NetworkModel
from simdist.scenario import Fidelity, PsPlacement, Scenario, StrategyKind
from simdist.topology.build import build_topology
from simdist.topology.graph import Topology
from simdist.topology.routing import ring_channels


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
    _built: dict = field(default_factory=dict, repr=False)  # per built cluster: node rings, NCCL's node view
    _local: dict = field(default_factory=dict, repr=False)  # per network model: the NCCL tuner's timer

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
            # the schedule is kept only when it was already memoised: an estimate needs its time, and a
            # 1,024-GPU schedule holds ~10^4 transfers, too many to keep for every size a sweep visits
            sched = self._schedules.get(key) or self.schedule(op, size_bytes, server_delay_s)
            hit = self._times[key] = self.network.schedule_time(sched)
        return hit

    def schedules_run(self) -> list[Schedule]:
        """Every schedule this context has run or timed (rebuilt where `collective_time` kept only its
        time), e.g. for the failure runs' proof that a link state cannot change the step time."""
        keys = list(dict.fromkeys([*self._schedules, *self._times]))
        return [self.cached_schedule(*k) for k in keys]

    def process_groups(self) -> dict:
        """The run's process groups by name (the data-parallel group now; tp and pp groups later)."""
        return {"dp": dp_process_group(self.group)}

    def schedule(self, op: CollectiveOp, size_bytes: float, server_delay_s: float = 0.0) -> Schedule:
        """The schedule the scenario's strategy and backend run for one collective call."""
        comm = self.scenario.communication
        # hierarchical, torus2d and ps exist for all_reduce only (halving-doubling's all_gather for
        # power-of-two groups only); a codec's all_gather or all_to_all (top-k, 1-bit) then runs as a
        # ring, as Horovod and DDP hooks do
        requested = comm.strategy.value if supports(op, comm.strategy.value, self.group.size) else "ring"
        if requested == "ps" and comm.ps_aggregation == "node":  # local aggregation first (collectives/ps.py)
            sched = Schedule(op, "ps", float(size_bytes), ps_node_chains(size_bytes, self.group, self.servers,
                                                                         server_delay_s,
                                                                         partition_bytes=comm.ps_partition_bytes))
        elif requested == "ps" and comm.ps_partition_bytes is not None:  # pipelined partitions (collectives/ps.py)
            sched = Schedule(op, "ps", float(size_bytes), ps_chains(size_bytes, self.group, self.servers,
                                                                    server_delay_s, comm.ps_partition_bytes))
        else:
            sched = build_backend_schedule(comm.backend.value, op, size_bytes, self.group, requested=requested,
                                           intra=comm.hierarchical_intra.value, inter=comm.hierarchical_inter.value,
                                           servers=self.servers, server_delay_s=server_delay_s,
                                           channels=self.channels, node_orders=self._node_orders(), **self._tuning())
        # reductions on CPUs (gloo's host-memory algorithms, CPU parameter servers) cost host memory time
        return host_reduced(sched, self.scenario, requested, self.servers)

    def _node_orders(self):
        """The rings NCCL builds from each node's graph (collectives.node_rings), computed once."""
        if "orders" not in self._built:
            self._built["orders"] = group_node_orders(self.topology, self.group, self.channels)
        return self._built["orders"]

    def _tuning(self) -> dict:
        """What NCCL's tuner needs (backend nccl only): the group's hardware as NCCL sees it, and
        simdist's own analytical time of a candidate schedule on this topology to rank candidates."""
        if self.scenario.communication.backend.value != "nccl":
            return {}
        cached = self._local.get("tuning")
        if cached is None:
            comm = self.scenario.communication  # the fabric memo is shared by contexts: key it
            key = ("nccl_fabric", comm.collnet, comm.nvls)
            if key not in self._built:
                self._built[key] = from_topology(self.topology, self.group, collnet=comm.collnet,
                                                 nvls_enabled=comm.nvls)
            cached = self._local["tuning"] = self.nccl_tuning(self._built[key])
        return cached

    def nccl_tuning(self, fabric) -> dict:
        """NCCL's tuner's inputs for a group whose hardware NCCL sees as `fabric`: that view with the socket
        threads, this cluster's analytical time of a candidate schedule, and NCCL_ALGO / NCCL_PROTO."""
        comm = self.scenario.communication
        return {"fabric": replace(fabric, socket_threads=comm.nccl_socket_threads),
                "timer": self.analytical().schedule_time, "enable": enable_of(comm.nccl_algo, comm.nccl_proto)}

    def analytical(self) -> AnalyticalNetwork:
        """The closed-form network model of this cluster: the run's own at estimate, else one built once."""
        if isinstance(self.network, AnalyticalNetwork):
            return self.network
        if "analytical" not in self._local:
            self._local["analytical"] = AnalyticalNetwork(self.topology)
        return self._local["analytical"]

    def layout_groups(self, layout, plan):
        """The tp, dp and p2p groups of `layout` with their memoised union schedules (engine.mp_groups), built
        once per layout on this context, so a sweep's points on one cluster share them."""
        cache = self.__dict__.setdefault("_layout_groups", {})
        key = (layout, plan.virtual_stages)
        if key not in cache:
            if len(cache) >= 64:
                cache.clear()
            cache[key] = mp_groups.LayoutGroups(self, layout, plan)
        return cache[key]


# CommunicationSpec fields that a schedule (FabricContext.schedule, host_reduced) or the context's
# PS servers read; every other communication key (bucket sizes, bucketing, fusion cycle, overlap,
# compression) only changes the (op, size, server delay) a collective is asked for, which the memos key on.
SCHEDULE_KEYS = ("strategy", "backend", "hierarchical_intra", "hierarchical_inter", "ps_servers", "ps_placement",
                 "ps_aggregation", "ps_server", "ps_partition_bytes", "collnet", "nvls", "nccl_algo", "nccl_proto",
                 "nccl_socket_threads")


def server_topology_args(scenario: Scenario) -> dict:
    """build_topology's parameter-server arguments: dedicated hosts (with their NIC) or servers in the worker
    nodes' host memory, as communication.ps.placement asks; none without a parameter server."""
    comm = scenario.communication
    if comm.strategy != StrategyKind.PS or comm.ps_placement == PsPlacement.COLOCATED:
        return {}
    if comm.ps_placement == PsPlacement.HOST:
        return {"host_servers": comm.ps_servers}
    return {"server_hosts": comm.ps_servers, "server_nic": scenario.cluster.node_groups[0].nic.host_side()}


def _server_hosts(scenario: Scenario) -> tuple:
    """What the topology's server endpoints depend on (server_topology_args, as a hashable key)."""
    return tuple(sorted(server_topology_args(scenario).items()))


def cluster_key(scenario: Scenario) -> tuple:
    """What `build_cluster` reads: the cluster, the dedicated PS hosts, and (conservatively) the
    parallelism layout that process groups are placed by."""
    t = scenario.training
    return (scenario.cluster, _server_hosts(scenario), t.parallelism, t.placement_order)


def context_key(scenario: Scenario) -> tuple:
    """What a FabricContext and its memoised schedules depend on: the built cluster and SCHEDULE_KEYS."""
    comm = scenario.communication
    return cluster_key(scenario) + tuple(getattr(comm, k) for k in SCHEDULE_KEYS)


@dataclass(frozen=True, eq=False)
class BuiltCluster:
    """A cluster built once and shared by the contexts on it: the cluster-only part of a context: topology (with its routes), the DP group, ring channels, and
    `built` (node rings and NCCL's node view, filled on first use and shared by every context on it)."""

    topology: Topology
    group: Group
    channels: int
    built: dict = field(default_factory=dict, repr=False)


def build_cluster(scenario: Scenario, topology: Topology | None = None) -> BuiltCluster:
    """Topology (with dedicated PS hosts when asked), the data-parallel group and its ring channels;
    `topology`: that topology already built (context_cache.shared_topology)."""
    if topology is None:
        topology = build_topology(scenario.cluster, **server_topology_args(scenario))
    group = data_parallel_group(scenario.cluster, topology)
    return BuiltCluster(topology, group, ring_channels(topology, group.nodes))


def build_context(scenario: Scenario, fidelity: Fidelity, env: simpy.Environment | None = None,
                  cluster: BuiltCluster | None = None) -> FabricContext:
    """Build topology (with dedicated PS hosts when asked), routing and the network model (on `env`,
    a new Environment by default); `cluster`: an already built BuiltCluster of `cluster_key(scenario)`."""
    comm = scenario.communication
    cluster = build_cluster(scenario) if cluster is None else cluster
    topology = cluster.topology
    env = simpy.Environment() if env is None else env
    network = build_network(fidelity.value, env, topology)
    servers: tuple[int, ...] = ()
    if comm.strategy == StrategyKind.PS:
        servers = tuple(ps_server_endpoints(topology, comm.ps_servers, comm.ps_placement.value))
    return FabricContext(scenario, env, topology, network, cluster.group, servers, cluster.channels,
                         _built=cluster.built)
