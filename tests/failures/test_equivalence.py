"""Grouping link states that provably cannot change the step time: grouped and ungrouped agree exactly."""
from __future__ import annotations

from dataclasses import replace

import pytest

from simdist.engine.context import build_context
from simdist.engine.composite import healthy_scenario, run_goodput, state_step_time
from simdist.engine.composite import run_training
from simdist.failures.costs import job_spec
from simdist.failures.equivalence import DeadLinkEquivalence
from simdist.failures.targets import failure_targets
from simdist.failures.state import ClusterState
from simdist.scenario import Fidelity
from tests.failures.test_engine_goodput import _scenario

# 8 nodes x 2 GPUs, 2 nodes per leaf (4 leaves), 2 spines, 100 Gb/s everywhere: a ring sends one flow out of
# and one into each leaf at a time, at most one NIC's rate on any uplink, so no single uplink can be felt
RING = {"cluster.nodes": [{"count": 8, "gpu": "a100-sxm4-80gb", "gpus_per_node": 2, "intra_node": "pcie-gen4",
                           "nic": {"bandwidth": "100 Gb/s", "latency": "2 us", "transport": "rdma"}}],
        "communication.strategy": "ring", "workload.batch_per_gpu": 8}
HD = {**RING, "communication.strategy": "halving_doubling"}  # 2-4 flows per leaf: uplinks are the bottleneck


def _setup(changes, fidelity):
    s = _scenario(changes)
    ctx = build_context(healthy_scenario(s), fidelity)
    run_training(healthy_scenario(s), fidelity, with_baseline=False, context=ctx)
    eq = DeadLinkEquivalence(ctx.topology, ctx.schedules_run())
    return s, eq, failure_targets(ctx.topology)


def _dead(*edges):
    return tuple(sorted((u, v, 0.0) for u, v in edges))


@pytest.mark.parametrize("fidelity", [Fidelity.ESTIMATE, Fidelity.SIMULATE])
def test_every_grouped_link_state_simulates_to_the_healthy_step_time(fidelity):
    s, eq, facts = _setup(RING, fidelity)
    assert eq.ok
    job = job_spec(s, 86400.0, 8 * 16, 8, 1, facts)
    ungrouped = state_step_time(s, fidelity, job)  # no equivalence: every state simulated on its own
    healthy = ungrouped(ClusterState())
    states = [_dead(facts.link_ends(n)) for n in facts.fabric_links]
    states += [_dead(facts.link_ends("leaf0-spine0"), facts.link_ends("leaf2-spine0")),
               _dead(*facts.switch_edges("spine1"))]
    for links in states:
        assert eq.canonical(links) == ()
        assert ungrouped(ClusterState(degraded_links=links)) == pytest.approx(healthy, rel=1e-12)
    # leaf0 only on spine1 and leaf2 only on spine0: leaf0 to leaf2 takes 4 hops instead of 2, not grouped
    longer = _dead(facts.link_ends("leaf0-spine0"), facts.link_ends("leaf2-spine1"))
    assert eq.canonical(longer) == longer
    # (the ring sends nothing from leaf0 to leaf2, so this one is not felt either: the proof is conservative)
    degraded = (("leaf0", "spine0", 0.5),)  # a link at a fraction is never grouped
    assert eq.canonical(degraded) == degraded


def test_a_fabric_that_can_be_the_bottleneck_is_not_grouped():
    s, eq, facts = _setup(HD, Fidelity.ESTIMATE)
    assert not eq.ok
    links = _dead(facts.link_ends("leaf0-spine0"))
    assert eq.canonical(links) == links
    job = job_spec(s, 86400.0, 8 * 16, 8, 1, facts)
    step = state_step_time(s, Fidelity.ESTIMATE, job)
    assert step(ClusterState(degraded_links=links)) > step(ClusterState())  # felt: simulated on its own


def test_a_failure_run_grouped_and_ungrouped_gives_the_same_numbers():
    s = _scenario({**RING, "failures.random": {"link_mtbf": "300 h", "switch_mtbf": "3000 h", "repair": "4 h"},
                   "run.duration": "20 d", "run.replicas": 3})
    grouped = run_goodput(s, Fidelity.ESTIMATE).goodput.to_dict()
    ungrouped = run_goodput(s, Fidelity.ESTIMATE, group_states=False).goodput.to_dict()
    assert grouped["states_grouped"] > 0 and ungrouped["states_grouped"] == 0
    assert grouped["states_simulated"] < ungrouped["states_simulated"]
    for key in ("states_simulated", "states_grouped"):
        grouped.pop(key), ungrouped.pop(key)
    assert grouped == ungrouped
