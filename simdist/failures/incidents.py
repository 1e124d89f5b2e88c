"""Incidents (things that stop the job) and slowdowns (things that change the step time), from random
component failures and from scheduled events.

Random failures: each component is a renewal process. Its first failure comes from the equilibrium
(forward-recurrence) law of its time-between-failures distribution, so a cluster that has been in
service for a while fails at exactly count / MTBF on average from t = 0; after a failure the part is
repaired (lognormal repair time, mean `repair`) and starts a fresh lifetime. For Weibull(k, lambda) the
equilibrium law is t = lambda * G**(1/k) with G ~ Gamma(1/k) (its CDF is the regularised incomplete
gamma P(1/k, (t/lambda)**k)); for k = 1 both reduce to the exponential. All draws come from the numpy
Generator passed in, in a fixed order.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simdist.failures.targets import FailureTargets
from simdist.failures.rates import NODE_LEVEL, mtbfs
from simdist.scenario import FailureDistribution, FailureEventSpec, FailureKind, RandomFailuresSpec

DEFAULT_REPAIR_S = 1800.0


@dataclass(frozen=True, order=True)
class Incident:
    """The job loses `nodes` at `time_s` until `repair_s` later. A fabric fault names its dead `links`: with no
    node cut off the job keeps running on the rerouted fabric for `repair_s`; with some cut off (a partition)
    those nodes are lost as after a node failure."""

    time_s: float
    kind: str  # gpu | node | nic | link | switch (random) or an event kind
    nodes: tuple[int, ...] = ()
    repair_s: float = DEFAULT_REPAIR_S
    source: str = "random"
    links: tuple[tuple[str, str], ...] = ()  # dead edges (link_down, spine/core switch_down, random fabric faults)


@dataclass(frozen=True, order=True)
class Slowdown:
    """From start_s to end_s GPUs straggle, links run at a fraction, or every step waits `delay_s` more."""

    start_s: float
    end_s: float
    kind: str
    stragglers: tuple[tuple[int, float], ...] = ()  # (gpu, compute-time multiplier)
    links: tuple[tuple[str, str, float], ...] = ()  # (u, v, remaining fraction)
    delay_s: float = 0.0  # mean extra seconds per step


def lognormal(rng: np.random.Generator, mean: float, sigma: float, size: int) -> np.ndarray:
    """Samples with the given mean (sigma 0: all equal to the mean)."""
    if sigma <= 0 or mean <= 0:
        return np.full(size, float(mean))
    return rng.lognormal(math.log(mean) - sigma * sigma / 2.0, sigma, size)


def _component_nodes(kind: str, facts: FailureTargets) -> list[tuple[int, ...]]:
    """The nodes each component of `kind` takes down when it fails (fabric links and spine/core switches:
    none here; fabric_fault works out what their dead links cut off)."""
    if kind == "gpu":
        return [(n,) for n in facts.node_of_gpu]
    if kind == "node":
        return [(n,) for n in range(facts.nodes)]
    if kind == "nic":
        return [(n,) for n in facts.nic_node]
    if kind == "link":
        return [() for _ in facts.fabric_links]
    return [facts.leaves.get(s, ()) for s in facts.switches]  # a leaf takes its rack


def dead_links(kind: str, index: int, facts: FailureTargets) -> tuple[tuple[str, str], ...]:
    """The edges a fabric component's failure takes down: the link itself, or every link of a spine/core
    switch (a leaf switch takes its rack instead: none)."""
    if kind == "link":
        ends = facts.link_ends(facts.fabric_links[index])
        return (ends,) if ends is not None else ()
    if kind == "switch" and facts.switches[index] not in facts.leaves:
        return facts.switch_edges(facts.switches[index])
    return ()


def lemon_nodes(spec: RandomFailuresSpec, facts: FailureTargets, rng: np.random.Generator) -> frozenset[int]:
    """round(lemon_fraction x nodes) nodes drawn without replacement."""
    k = round(spec.lemon_fraction * facts.nodes)
    return frozenset(int(x) for x in rng.choice(facts.nodes, size=k, replace=False)) if k else frozenset()


def sample_random(spec: RandomFailuresSpec, facts: FailureTargets, duration_s: float,
                  rng: np.random.Generator) -> list[Incident]:
    """Every component failure in [0, duration_s), sorted by time."""
    lemons = lemon_nodes(spec, facts, rng)
    weibull = spec.distribution == FailureDistribution.WEIBULL
    k = spec.weibull_shape if weibull else 1.0
    out: list[Incident] = []
    for kind, mtbf in mtbfs(spec).items():
        nodes = _component_nodes(kind, facts)
        if not nodes:
            continue
        mean = np.full(len(nodes), mtbf)
        if kind in NODE_LEVEL and lemons:
            mean[[i for i, ns in enumerate(nodes) if ns[0] in lemons]] /= spec.lemon_factor
        scale = mean / math.gamma(1.0 + 1.0 / k)
        t = scale * rng.gamma(1.0 / k, 1.0, len(nodes)) ** (1.0 / k)
        idx = np.arange(len(nodes))
        fabric: dict[int, tuple] = {}  # component -> (dead links, nodes they cut off), worked out once

        def make(i: int, tt: float, r: float) -> Incident:
            if kind not in ("link", "switch"):
                return Incident(tt, kind, nodes[i], r)
            if i not in fabric:
                dead = dead_links(kind, i, facts)
                fabric[i] = (dead, facts.cut_off(dead) if dead else nodes[i])
            dead, cut = fabric[i]
            return Incident(tt, kind, cut, r, links=dead)

        while idx.size:
            alive = t < duration_s
            idx, t = idx[alive], t[alive]
            if not idx.size:
                break
            repair = lognormal(rng, spec.repair_s, spec.repair_sigma, idx.size)
            out.extend(make(int(i), float(tt), float(r)) for i, tt, r in zip(idx, t, repair))
            life = rng.weibull(k, idx.size) if weibull else rng.exponential(1.0, idx.size)
            t = t + repair + scale[idx] * life
    out.sort()
    return out


def node_of_target(target: str, facts: FailureTargets) -> tuple[int, ...]:
    """The nodes a 'gpu:K' / 'node:K' / 'switch:LEAF' target names (already validated)."""
    prefix, _, rest = target.partition(":")
    if prefix == "gpu":
        return (facts.node_of_gpu[int(rest)],)
    if prefix == "node":
        return (int(rest),)
    return facts.leaves.get(rest, ())


def gpus_of_target(target: str, facts: FailureTargets) -> tuple[int, ...]:
    prefix, _, rest = target.partition(":")
    if prefix == "gpu":
        return (int(rest),)
    node = int(rest)
    return tuple(g for g, n in enumerate(facts.node_of_gpu) if n == node)


def scheduled(events: tuple[FailureEventSpec, ...], facts: FailureTargets,
              repair_s: float) -> tuple[list[Incident], list[Slowdown]]:
    """Scheduled events as incidents and slowdowns (targets were validated by check_event)."""
    incidents: list[Incident] = []
    slowdowns: list[Slowdown] = []
    for e in events:
        kind = FailureKind(e.kind)
        end = math.inf if e.duration_s is None else e.at_s + e.duration_s
        if kind is FailureKind.LINK_DOWN or (kind is FailureKind.SWITCH_DOWN and
                                             e.target.partition(":")[2] not in facts.leaves):
            name = e.target.partition(":")[2]
            dead = (facts.link_ends(name),) if kind is FailureKind.LINK_DOWN else facts.switch_edges(name)
            incidents.append(Incident(e.at_s, kind.value, facts.cut_off(dead),
                                      repair_s if e.duration_s is None else e.duration_s, "scheduled", links=dead))
        elif kind in (FailureKind.GPU_DOWN, FailureKind.NODE_DOWN, FailureKind.RACK_DOWN, FailureKind.SWITCH_DOWN):
            incidents.append(Incident(e.at_s, kind.value, node_of_target(e.target, facts),
                                      repair_s if e.duration_s is None else e.duration_s, "scheduled"))
        elif kind is FailureKind.STRAGGLER:
            gpus = gpus_of_target(e.target, facts)
            slowdowns.append(Slowdown(e.at_s, end, kind.value, stragglers=tuple((g, float(e.slowdown)) for g in gpus)))
        elif kind is FailureKind.LINK_DEGRADE:
            u, v = facts.link_ends(e.target.partition(":")[2])
            slowdowns.append(Slowdown(e.at_s, end, kind.value, links=((u, v, float(e.factor)),)))
        elif kind is FailureKind.NETWORK_JITTER:  # `delay` is the median; the mean is what a long segment sees
            slowdowns.append(Slowdown(e.at_s, end, kind.value, delay_s=float(e.delay_s) * math.exp(e.sigma ** 2 / 2)))
        else:
            raise ValueError(f"unknown event kind {kind}")
    return sorted(incidents), sorted(slowdowns)
