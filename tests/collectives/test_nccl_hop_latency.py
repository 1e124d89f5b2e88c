"""Under backend nccl on kernel-bypass fabrics a ring or tree hop costs NCCL's own hwLatencies
(protocols.step_hop_latency_s), not the sum of its links' catalog latencies; over sockets the links' stay."""
from __future__ import annotations

import pytest

from simdist.collectives.fabric import from_topology
from simdist.engine.context import build_context
from simdist.io.load import load_scenario
from simdist.scenario import Fidelity

IB = "scenarios/examples/ib-512gpu.yaml"
BASE = ["communication.strategy=ring", "communication.backend=nccl", "run.fidelity=estimate",
        "cluster.nodes.0.count=8", "cluster.fabric.nodes_per_leaf=4"]


def _ctx(*extra: str):
    return build_context(load_scenario(IB, BASE + list(extra)), Fidelity.ESTIMATE)


def _nic(latency: str, transport: str) -> str:
    return f'cluster.nodes.0.nic={{bandwidth: "400 Gb/s", latency: "{latency}", count: 8, transport: {transport}}}'


@pytest.mark.parametrize("transport, bypass", [("rdma", True), ("tcp", False)])
def test_the_fabric_says_whether_nccls_hop_latencies_apply(transport, bypass):
    ctx = _ctx(_nic("2 us", transport))
    assert from_topology(ctx.topology, ctx.group).kernel_bypass is bypass


def test_efa_keeps_its_links_latencies():
    ctx = _ctx("cluster.nodes.0.nic={link: efa-100g, count: 4}")
    assert from_topology(ctx.topology, ctx.group).kernel_bypass is False


def test_a_small_all_reduce_pays_nccls_hops_not_the_nics_catalog_latency():
    """8 KB over 8 nodes: with rdma NICs the time does not depend on the NIC links' latency (NCCL's 2.7-5 us
    per network hop replace it); with tcp NICs the same change moves it by at least the added latency per hop."""
    def small(latency: str, transport: str) -> float:
        ctx = _ctx(_nic(latency, transport))
        sched = ctx.schedule("all_reduce", 8e3)
        return ctx.network.schedule_time(sched), sched

    fast, sched = small("2 us", "rdma")
    slow, _ = small("20 us", "rdma")
    assert fast == pytest.approx(slow, rel=1e-12)
    steps = [s for chain in sched.chains for s in chain if s.transfers]
    assert steps and all(s.hop_latency_s is not None for s in steps)
    tcp_fast, _ = small("2 us", "tcp")
    tcp_slow, _ = small("20 us", "tcp")
    assert tcp_slow - tcp_fast > 2 * 18e-6  # at least one network hop each way, two NIC links per hop


def test_one_node_pays_nccls_hops_whatever_its_nics():
    """Inside one node no NIC is on the way: NVLink hops cost NCCL's table even when the NICs are sockets."""
    from simdist.collectives.backends import nccl_candidate
    from simdist.collectives.fabric import NodeFabric
    from simdist.collectives.schedule import Group

    sched = nccl_candidate("all_reduce", "ring", "LL", 1e6, Group.flat(range(8), 8),
                           fabric=NodeFabric(kernel_bypass=False))
    step = next(s for s in sched.chains[0] if s.transfers)
    assert step.hop_latency_s == pytest.approx(0.6e-6) and step.delay_s == 0.0
