"""The step time of a failure state: the steady scenario a cluster state stands for (fewer nodes for elastic
shrink and replica groups, static stragglers for straggler states, the batch re-split over the survivors) and
its iteration time, run once per distinct state by a runner the caller passes in (the engine's steady run), so
that this layer never imports the engine."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable

from simdist.errors import InfeasibleError
from simdist.failures.state import ClusterState, JobSpec, batch_per_gpu
from simdist.scenario import FailureEventSpec, FailureKind, FailuresSpec, Scenario

# (the state's steady scenario, its degraded or dead links) -> seconds per iteration; raises InfeasibleError
# where the state cannot train (the survivors' batch does not fit, a fabric that no longer connects every rank)
StateRunner = Callable[[Scenario, tuple[tuple[str, str, float], ...]], float]


def shrunk_cluster(scenario: Scenario, nodes_out: frozenset[int]):
    """The cluster without `nodes_out` (node groups keep their order; only counts drop)."""
    groups, start = [], 0
    for g in scenario.cluster.node_groups:
        out = sum(1 for n in nodes_out if start <= n < start + g.count)
        if g.count - out > 0:
            groups.append(replace(g, count=g.count - out))
        start += g.count
    return replace(scenario.cluster, node_groups=tuple(groups))


class StateStepTime:
    """step_time(state) -> seconds per iteration, run with `runner` and cached per state."""

    def __init__(self, scenario: Scenario, job: JobSpec, runner: StateRunner) -> None:
        self.scenario, self.job, self.runner = scenario, job, runner
        self.cache: dict[tuple, float] = {}
        self.simulated = 0  # distinct states simulated (beyond what was seeded into the cache)
        self.unrunnable: dict[str, str] = {}  # state -> why it cannot train (reported in the result)
        self.equivalence = None  # failures.equivalence.DeadLinkEquivalence of the healthy cluster, or None
        self.grouped = 0  # distinct link states answered by an equivalent state's simulation
        self._seen_links: set[tuple] = set()
        self.on_simulated = None  # called after each new state's simulation (a progress bar's note)

    def key(self, state: ClusterState) -> tuple:
        """States that simulate alike: how many nodes each group lost, the stragglers renumbered, the links."""
        out, start = [], 0
        for g in self.scenario.cluster.node_groups:
            out.append(sum(1 for n in state.nodes_out if start <= n < start + g.count))
            start += g.count
        links = state.degraded_links
        if links and self.equivalence is not None and not state.nodes_out:
            links = self.equivalence.canonical(links)
            if links != state.degraded_links and state.degraded_links not in self._seen_links:
                self._seen_links.add(state.degraded_links)
                self.grouped += 1
        balanced = None if state.balanced_for is None else self._renumber(state, state.balanced_for)
        return (tuple(out), self._renumber(state), links, state.keep_global_batch, balanced)

    def _renumber(self, state: ClusterState, stragglers=None) -> tuple[tuple[int, float], ...]:
        """Straggler GPU ids in the shrunk cluster (the GPUs of removed nodes before them drop out)."""
        offsets, acc = [], 0
        for i, k in enumerate(self.job.gpus_per_node):
            offsets.append(acc)
            acc += 0 if i in state.nodes_out else k
        node_of = [i for i, k in enumerate(self.job.gpus_per_node) for _ in range(k)]
        first = [sum(self.job.gpus_per_node[:i]) for i in range(len(self.job.gpus_per_node))]
        listed = state.stragglers if stragglers is None else stragglers
        return tuple((offsets[node_of[g]] + g - first[node_of[g]], x) for g, x in listed)

    def __call__(self, state: ClusterState) -> float:
        key = self.key(state)
        if key not in self.cache:
            self.cache[key] = self._simulate(replace(state, degraded_links=key[2]), key[1], key[4])
            if self.on_simulated is not None:
                self.on_simulated()
        return self.cache[key]

    def scenario_for(self, state: ClusterState, stragglers, balanced=None) -> Scenario:
        """The steady scenario of `state`; `balanced` (dynamic split): the renumbered stragglers the split
        is balanced for, given to the engine as `training.split_slowdowns`."""
        s = self.scenario
        bpg = batch_per_gpu(self.job, state)
        training = replace(s.training, parallelism=replace(s.training.parallelism, dp=None))
        if balanced is not None:
            gpus = sum(k for i, k in enumerate(self.job.gpus_per_node) if i not in state.nodes_out)
            slow = [1.0] * gpus
            for g, x in balanced:
                slow[g] = x
            training = replace(training, split_slowdowns=tuple(slow))
        events = tuple(FailureEventSpec(0.0, FailureKind.STRAGGLER, f"gpu:{g}", slowdown=x) for g, x in stragglers)
        return replace(s, cluster=shrunk_cluster(s, state.nodes_out) if state.nodes_out else s.cluster,
                       workload=replace(s.workload, batch_per_gpu=bpg, global_batch=None),
                       training=training, failures=FailuresSpec(events=events) if events else None,
                       run=replace(s.run, duration_s=None, replicas=1))

    def _simulate(self, state: ClusterState, stragglers, balanced=None) -> float:
        if batch_per_gpu(self.job, state) == 0:
            return math.inf
        self.simulated += 1
        try:
            return float(self.runner(self.scenario_for(state, stragglers, balanced), state.degraded_links))
        except InfeasibleError as err:  # the survivors' rebalanced batch does not fit, a torus that lost a node
            self.unrunnable[_describe(state)] = str(err)  # cannot be built...: wait for repair
            return math.inf


def _describe(state: ClusterState) -> str:
    out = f"{len(state.nodes_out)} nodes out" if state.nodes_out else "all nodes"
    return out + (f", {len(state.stragglers)} stragglers" if state.stragglers else "") + (
        f", {len(state.degraded_links)} degraded or dead links" if state.degraded_links else "")
