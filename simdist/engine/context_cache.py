"""A per-process cache of built estimate contexts, so the points of a sweep or plan share their cluster.

Two least-recently-used levels, each keyed by exactly what it depends on (engine/context.py):
built clusters (topology and routes, the data-parallel group, node rings, NCCL's node view) by `cluster_key`,
and contexts (the analytical network model, the PS servers and the memoised collective times) by
`context_key`. A sweep over bucket sizes or compression therefore reuses one context; a change of
cluster, strategy, backend, hierarchical algorithms or PS settings builds (or finds) another.

Only `estimate` uses it: the analytical model runs no events and keeps no state between runs beyond
its value-keyed memos, so a reused context gives byte-identical results. `simulate` never does (its
flow network carries a clock and link state), unless a caller passes it an unstarted context itself.
Memory is bounded by entry counts and by the GPUs of the cached clusters.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from simdist.engine.context import BuiltCluster, FabricContext, build_context, build_cluster, context_key, cluster_key
from simdist.scenario import Fidelity, Scenario


@dataclass
class CacheStats:
    """How often the cache served a context (hits) or built one (misses), and clusters built."""

    hits: int = 0
    misses: int = 0
    clusters_built: int = 0


class ContextCache:
    """LRU of estimate contexts (at most `max_contexts`) over LRU built clusters (at most `max_clusters`, and
    at most `max_gpus` GPUs over all cached clusters, the newest always kept)."""

    def __init__(self, max_contexts: int = 16, max_clusters: int = 4, max_gpus: int = 1 << 17) -> None:
        self.max_contexts, self.max_clusters, self.max_gpus = max_contexts, max_clusters, max_gpus
        self._contexts: OrderedDict[tuple, FabricContext] = OrderedDict()
        self._clusters: OrderedDict[tuple, tuple[BuiltCluster, int]] = OrderedDict()
        self.stats = CacheStats()

    def __len__(self) -> int:
        return len(self._contexts)

    def clear(self) -> None:
        self._contexts.clear()
        self._clusters.clear()
        self.stats = CacheStats()

    def cluster(self, scenario: Scenario) -> BuiltCluster:
        """`scenario`'s built cluster (built on a miss)."""
        key = cluster_key(scenario)
        hit = self._clusters.get(key)
        if hit is not None:
            self._clusters.move_to_end(key)
            return hit[0]
        cluster = build_cluster(scenario)
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


def process_cache() -> ContextCache:
    """This process's cache (for tests and benchmarks: stats, clear)."""
    return _CACHE
