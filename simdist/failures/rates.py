"""Component failure rates: the documented defaults, the job-level rate they add up to, Young/Daly.

Defaults (docs/failures.md has the derivation): a node with 8 GPUs and 8 NICs fails about 4.8 times per
1,000 node-days, inside the range of a few per 1,000 node-days that Kokolis et al., "Revisiting
Reliability in Large-Scale Machine Learning Research Clusters" (Meta, 2024) report for their two
clusters; the split across GPU / host / NIC is an assumption that puts GPUs first, as that study's
failure taxonomy does. Fabric links and switches are rarer and an assumption too.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from simdist.failures.targets import FailureTargets
from simdist.scenario import RandomFailuresSpec

HOUR_S = 3600.0
DEFAULT_MTBF_S = {  # per component
    "gpu": 75_000 * HOUR_S,
    "node": 16_000 * HOUR_S,
    "nic": 250_000 * HOUR_S,
    "link": 1_000_000 * HOUR_S,
    "switch": 250_000 * HOUR_S,
}
NODE_LEVEL = ("gpu", "node", "nic")  # the parts of a node (lemons fail more often)


def mtbfs(spec: RandomFailuresSpec) -> dict[str, float]:
    """Component -> MTBF in seconds, for the components that fail (the defaults when none was given)."""
    if spec.defaults:
        return dict(DEFAULT_MTBF_S)
    given = {"gpu": spec.gpu_mtbf_s, "node": spec.node_mtbf_s, "nic": spec.nic_mtbf_s,
             "link": spec.link_mtbf_s, "switch": spec.switch_mtbf_s}
    return {k: v for k, v in given.items() if v is not None}


def component_counts(facts: FailureTargets) -> dict[str, int]:
    """How many of each component the job's cluster has."""
    return {"gpu": facts.gpus, "node": facts.nodes, "nic": facts.nics, "link": len(facts.fabric_links),
            "switch": len(facts.switches)}


def interrupting_counts(facts: FailureTargets) -> dict[str, int]:
    """How many of each component stop the job when they fail alone: every GPU, node and NIC, every leaf
    switch (its rack), and the fabric links and spine/core switches whose failure cuts a node off (a
    bridge, an articulation point of the graph). The other fabric faults only reroute (a fat tree with
    more than one path)."""
    import networkx as nx

    counts = component_counts(facts)
    index = facts.index
    blocks = nx.Graph()  # blocks joined by switch-to-switch edges (parallel ones counted)
    for _, a, b in index.fabric:
        if blocks.has_edge(a, b):
            blocks.edges[a, b]["n"] += 1
        else:
            blocks.add_edge(a, b, n=1)
    bridges = {frozenset(e) for e in nx.bridges(blocks) if blocks.edges[e]["n"] == 1} if blocks.number_of_edges() else set()
    cuts = set(nx.articulation_points(blocks)) if blocks.number_of_edges() else set()
    links = 0
    for name in facts.fabric_links:
        ends = facts.link_ends(name)
        if ends is None or frozenset((index.block[ends[0]], index.block[ends[1]])) not in bridges:
            continue
        links += bool(facts.cut_off((ends,)))
    switches = sum(1 for s in facts.switches
                   if s in facts.leaves or (index.block.get(s) in cuts and facts.cut_off(facts.switch_edges(s))))
    return {**counts, "link": links, "switch": switches}


@dataclass(frozen=True)
class JobRate:
    """Interruptions per second of the whole job, by component, and the job MTBF (between interruptions);
    `reroute_per_component_per_s`: the fabric faults that only reroute (the job runs on, slower or not)."""

    per_component_per_s: dict[str, float]
    reroute_per_component_per_s: dict[str, float] = field(default_factory=dict)

    @property
    def per_s(self) -> float:
        return math.fsum(self.per_component_per_s.values())

    @property
    def mtbf_s(self) -> float:
        return 1.0 / self.per_s if self.per_s > 0 else math.inf


def job_rate(spec: RandomFailuresSpec | None, facts: FailureTargets, reroute: bool = True) -> JobRate:
    """Sum over components of count / MTBF, counting only the failures that interrupt the job (with
    `reroute` False, a sync mode that cannot reroute, every fabric fault does); lemon nodes' parts count
    lemon_factor times."""
    if spec is None:
        return JobRate({}, {})
    counts = component_counts(facts)
    given = mtbfs(spec)
    stops = interrupting_counts(facts) if reroute and ("link" in given or "switch" in given) else counts
    lemon = 1.0 + spec.lemon_fraction * (spec.lemon_factor - 1.0)
    out, rerouted = {}, {}
    for kind, mtbf in given.items():
        out[kind] = stops[kind] / mtbf * (lemon if kind in NODE_LEVEL else 1.0)
        if counts[kind] != stops[kind]:
            rerouted[kind] = (counts[kind] - stops[kind]) / mtbf
    return JobRate(out, rerouted)


def young_daly_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum checkpoint interval sqrt(2 C M) (Young 1974; Daly 2006)."""
    if not math.isfinite(mtbf_s) or checkpoint_s <= 0:
        return math.inf
    return math.sqrt(2.0 * checkpoint_s * mtbf_s)


def closed_form_goodput(interval_s: float, checkpoint_s: float, recovery_s: float, mtbf_s: float) -> float:
    """1 - C/T - (T/2 + R)/M: the first-order useful fraction under checkpoint/restart (exponential failures)."""
    return 1.0 - checkpoint_s / interval_s - (interval_s / 2.0 + recovery_s) / mtbf_s
