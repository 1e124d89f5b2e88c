"""A per-process cache of built topologies, clusters and estimate contexts: the one owner of what a process
builds per cluster, so the points of a sweep or plan, and the parts of one run, share their cluster.

Three least-recently-used levels, each keyed by exactly what it depends on (engine/context.py): topologies
(with their routes and compiled steps, Topology.shared) by cluster spec and parameter-server hosts; built
clusters (topology, the data-parallel group, node rings, NCCL's node view) by `cluster_key`; and contexts
(the analytical network model, the PS servers and the memoised collective times) by `context_key`. A sweep
over bucket sizes or compression therefore reuses one context; a change of cluster, strategy, backend,
hierarchical algorithms or PS settings builds (or finds) another.

Contexts and built clusters serve `estimate` only: the analytical model runs no events and keeps no state
between runs beyond its value-keyed memos, so a reused context gives byte-identical results. `simulate`
(whose flow network carries a clock and link state) and a failure state with changed links get a context of
their own on the shared, read-only topology (`run_context`); the load's failure-target check reads that same
topology (`shared_topology`). Memory is bounded by entry counts and by the GPUs of the cached clusters.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from simdist.engine.context import (BuiltCluster, FabricContext, build_cluster, build_context, cluster_key,
                                   context_key, server_topology_args)
from simdist.hardware.specs import ClusterSpec, NicSpec
from simdist.scenario import Fidelity, Scenario
from simdist.topology.build import build_topology
from simdist.topology.graph import Topology


@dataclass
class CacheStats:
    """How often the cache served a context (hits) or built one (misses), and clusters and topologies built."""

    hits: int = 0
    misses: int = 0
    clusters_built: int = 0
    topologies_built: int = 0


class ContextCache:
    """LRU of estimate contexts (at most `max_contexts`) over LRU built clusters (at most `max_clusters`, and
    at most `max_gpus` GPUs over all cached clusters, the newest always kept) over LRU built topologies (at
    most `max_topologies`: one of 100k GPUs takes a GB or more)."""

    def __init__(self, max_contexts: int = 16, max_clusters: int = 4, max_gpus: int = 1 << 17,
                 max_topologies: int = 2) -> None:
        self.max_contexts, self.max_clusters, self.max_gpus = max_contexts, max_clusters, max_gpus
        self.max_topologies = max_topologies
        self._contexts: OrderedDict[tuple, FabricContext] = OrderedDict()
        self._clusters: OrderedDict[tuple, tuple[BuiltCluster, int]] = OrderedDict()
        self._topologies: OrderedDict[tuple, Topology] = OrderedDict()
        self.stats = CacheStats()

    def __len__(self) -> int:
        return len(self._contexts)

    def clear(self) -> None:
        self._contexts.clear()
        self._clusters.clear()
        self._topologies.clear()
        self.stats = CacheStats()

    def topology(self, cluster: ClusterSpec, server_hosts: int = 0, server_nic: NicSpec | None = None,
                 host_servers: int = 0) -> Topology:
        """build_topology's Topology of these arguments (built on a miss; shared and read-only)."""
        key = (cluster, server_hosts, server_nic, host_servers)  # by value (a GpuSpec by identity: one per catalog entry)
        hit = self._topologies.get(key)
        if hit is not None:
            self._topologies.move_to_end(key)
            return hit
        topology = build_topology(cluster, server_hosts, server_nic, host_servers)
        self.stats.topologies_built += 1
        self._topologies[key] = topology
        while len(self._topologies) > self.max_topologies:
            self._topologies.popitem(last=False)
        return topology

    def run_cluster(self, scenario: Scenario) -> BuiltCluster:
        """A BuiltCluster of its own (its node rings filled by this run alone) on `scenario`'s shared topology:
        what a `simulate` run or a failure state's changed links start from."""
        return build_cluster(scenario, self.topology(scenario.cluster, **server_topology_args(scenario)))

    def cluster(self, scenario: Scenario) -> BuiltCluster:
        """`scenario`'s built cluster (built on a miss)."""
        key = cluster_key(scenario)
        hit = self._clusters.get(key)
        if hit is not None:
            self._clusters.move_to_end(key)
            return hit[0]
        cluster = build_cluster(scenario, self.topology(scenario.cluster, **server_topology_args(scenario)))
        self.stats.clusters_built += 1
        self._clusters[key] = (cluster, scenario.cluster.num_gpus)
        while len(self._clusters) > 1 and (len(self._clusters) > self.max_clusters
                                          or sum(g for _, g in self._clusters.values()) > self.max_gpus):
            old, _ = self._clusters.popitem(last=False)
            for k in [k for k in self._contexts if k[:len(old)] == old]:  # contexts pin their cluster's memory
                del self._contexts[k]
        return cluster

    def context(self, scenario: Scenario) -> FabricContext:
        """An estimate context for `scenario`'s cluster and schedule settings (its `scenario` field is the
        one that built it: Simulation swaps in the caller's)."""
        key = context_key(scenario)
        hit = self._contexts.get(key)
        if hit is not None:
            self._contexts.move_to_end(key)
            self.stats.hits += 1
            return hit
        self.stats.misses += 1
        ctx = build_context(scenario, Fidelity.ESTIMATE, cluster=self.cluster(scenario))
        self._contexts[key] = ctx
        while len(self._contexts) > self.max_contexts:
            self._contexts.popitem(last=False)
        return ctx


_CACHE = ContextCache()


def estimate_context(scenario: Scenario) -> FabricContext:
    """This process's cached estimate context for `scenario` (engine/simulation.py Simulation)."""
    return _CACHE.context(scenario)


def shared_topology(cluster: ClusterSpec, **server_args) -> Topology:
    """This process's Topology of `cluster` (build_topology's arguments; built once, shared, read-only)."""
    return _CACHE.topology(cluster, **server_args)


def run_context(scenario: Scenario, fidelity: Fidelity, env=None) -> FabricContext:
    """A fresh context (its own network model and clock) on this process's shared topology of `scenario`."""
    return build_context(scenario, fidelity, env=env, cluster=_CACHE.run_cluster(scenario))


def process_cache() -> ContextCache:
    """This process's cache (for tests and benchmarks: stats, clear)."""
    return _CACHE
