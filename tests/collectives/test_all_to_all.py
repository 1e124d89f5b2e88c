"""NCCL's all-to-all (collectives/all_to_all.py): every peer's send at once on the flow network, the hand-computed
time on one NVL72 rack and on 16 HGX H100 nodes, estimate equal to simulate, PXN's routes, and an uneven dispatch
bound by its hottest GPU."""
from __future__ import annotations

import numpy as np
import pytest
import simpy

from simdist.collectives.all_to_all import (balanced_send_bytes, p2p_all_to_all_chain, p2p_all_to_all_time_s,
                                            pxn_relays)
from simdist.collectives.cost import bus_factor
from simdist.collectives.protocols import HopKind, costs
from simdist.collectives.schedule import CollectiveOp, Group, Schedule
from simdist.engine.simulation import simulate
from simdist.io.load import load_scenario
from simdist.network.analytical import AnalyticalNetwork
from simdist.network.flows import FlowNetwork
from simdist.topology.build import build_topology

HGX = """name: a2a-hgx
cluster:
  nodes:
    - count: {nodes}
      gpu: h100-sxm5-80gb
      gpus_per_node: 8
      intra_node: nvswitch-h100
      nic: {{bandwidth: "400 Gb/s", latency: "2 us", count: 8, transport: rdma}}
  fabric:
    topology: fat_tree
    nodes_per_leaf: 4
    link: {{bandwidth: "400 Gb/s", latency: "1 us"}}
workload:
  benchmark: {{op: all_to_all, sizes: ["1 GB"]}}
communication: {{backend: nccl}}
"""
NVL72 = """name: a2a-nvl72
cluster:
  nodes:
    - count: 1
      gpu: gb200-186gb
      gpus_per_node: 72
      intra_node: nvl72-gb200
      nic: {bandwidth: "800 Gb/s", latency: "2 us", count: 4, transport: rdma}
workload:
  benchmark: {op: all_to_all, sizes: ["1 GB"]}
communication: {backend: nccl}
"""
SIZE = 1e9
SIMPLE = costs("ring", "Simple")
NIC_Bps = 50e9 * 0.92  # 400 Gb/s at the rdma default efficiency
NVLINK4_Bps = 450e9 * 0.80  # 18 NVLink4 per direction at the nvlink default efficiency
NVLINK5_Bps = 900e9 * 0.80


def _scenario(tmp_path, text: str, name: str):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return load_scenario(path)


def _row(scenario, fidelity: str) -> dict:
    (row,) = simulate(scenario, fidelity=fidelity).to_dict()["collectives"]
    return row


def test_balanced_all_to_all_on_one_nvl72_rack_is_the_hand_calculation(tmp_path):
    """72 GPUs, 1 GB each: every GPU puts 71/72 GB on its NVLink5 switch link (720 GB/s) and takes as much off it,
    all peers at once: 1.3696 ms + Simple's launch and one NVLink hop (8.4 + 3.4 us) = 1.3814 ms."""
    scenario = _scenario(tmp_path, NVL72, "nvl72")
    hand = SIMPLE.base_latency_s + SIMPLE.hop_latency_s[HopKind.NVLINK] + 71 / 72 * SIZE / NVLINK5_Bps
    run, est = _row(scenario, "simulate"), _row(scenario, "estimate")
    assert run["algorithm"] == "p2p/Simple"
    assert run["time_s"] == pytest.approx(hand, rel=1e-9)
    assert est["time_s"] == pytest.approx(run["time_s"], rel=1e-6)
    assert run["busbw_GBps"] == pytest.approx(SIZE / hand * 71 / 72 / 1e9, rel=1e-9)  # nccl-tests: (n-1)/n


@pytest.mark.parametrize("nodes", [2, 16])
def test_balanced_all_to_all_on_hgx_h100_nodes_is_the_hand_calculation(tmp_path, nodes):
    """N HGX H100 nodes, 8 x 400 Gb/s NICs each, non-blocking fat tree, 1 GB per GPU: with PXN every send to GPU j
    of another node leaves through its sender node's rail-j NIC, which so carries 8 (N-1) x S/(8N) = (N-1)/N S
    each way at 46 GB/s; NVLink (7 + 7 (N-1)) S/(8N) at 360 GB/s is far below. Two nodes: 10.8696 ms + 22.4 us
    (Simple's launch and one network hop) = 10.892 ms, against the shift steps' 20.6 ms; 16 nodes: 20.403 ms."""
    scenario = _scenario(tmp_path, HGX.format(nodes=nodes), f"hgx{nodes}")
    n = 8 * nodes
    latency = SIMPLE.base_latency_s + SIMPLE.hop_latency_s[HopKind.NET]
    hand = latency + (nodes - 1) / nodes * SIZE / NIC_Bps
    run, est = _row(scenario, "simulate"), _row(scenario, "estimate")
    assert run["algorithm"] == "p2p/Simple"
    assert run["time_s"] == pytest.approx(hand, rel=1e-9)
    assert est["time_s"] == pytest.approx(run["time_s"], rel=1e-6)
    assert run["busbw_GBps"] == pytest.approx(SIZE / hand * bus_factor("all_to_all", n) / 1e9, rel=1e-9)
    group = Group.flat(range(n), 8)
    closed = p2p_all_to_all_time_s(balanced_send_bytes(SIZE, n), group, NVLINK4_Bps, NIC_Bps, latency, pxn=True,
                                   nics=8)
    assert closed == pytest.approx(hand, rel=1e-12)


def test_pxn_relays_through_the_gpu_on_the_destinations_rail():
    group = Group.flat(range(16), 8)
    relays = pxn_relays(group)
    assert relays[(3, 13)] == 5 and relays[(13, 3)] == 11 and relays[(5, 13)] == 5
    assert (3, 4) not in relays  # same node: NVLink, no NIC
    (step,) = p2p_all_to_all_chain(group, 16.0, pxn=True)
    assert not step.lockstep
    sent = {}
    for t in step.transfers:
        sent[(t.src, t.dst)] = sent.get((t.src, t.dst), 0) + 1
    # 3 -> 13 goes 3 -> 5 (NVLink) -> 13 (rail 5); 5 -> 13 directly
    assert sent[(3, 5)] == 1 + 1 and sent[(5, 13)] == 8  # its own send and the relay; rail 5 carries all 8 GPUs' sends
    assert Group.flat(range(12), 8).nodes[1] == (8, 9, 10, 11) and pxn_relays(Group.flat(range(12), 8)) is None
    plain = p2p_all_to_all_chain(group, 16.0)[0]
    assert len(plain.transfers) == 16 * 15 and sum(t.size_bytes for t in plain.transfers) == pytest.approx(15 * 16)


def _flow_time(topology, schedule: Schedule) -> float:
    return FlowNetwork(simpy.Environment(), topology).schedule_time(schedule)


def test_an_uneven_dispatch_is_bound_by_the_hottest_experts_gpu(tmp_path):
    """Two HGX H100 nodes; every rank sends GPU 0 (the hottest expert) 4 blocks and every other GPU 1. GPU 0's
    inter-node receives all enter through node 0's rail-0 NIC (PXN): 8 x 4 blocks, 4x the balanced NIC load, so the
    dispatch takes 4x the balanced time, what the closed form gives, and more than a balanced one moving the same
    total bytes."""
    topology = build_topology(_scenario(tmp_path, HGX.format(nodes=2), "hgx2").cluster)
    group = Group.flat(range(16), 8)
    block = SIZE / 16
    hot = np.full((16, 16), block)
    hot[:, 0] = 4 * block
    np.fill_diagonal(hot, 0.0)

    def timed(matrix):
        chain = p2p_all_to_all_chain(group, send_bytes=matrix, pxn=True)
        return _flow_time(topology, Schedule(CollectiveOp.ALL_TO_ALL, "p2p", SIZE, (chain,)))

    hot_s = timed(hot)
    hot_chain = p2p_all_to_all_chain(group, send_bytes=hot, pxn=True)
    estimated = AnalyticalNetwork(topology).schedule_time(Schedule(CollectiveOp.ALL_TO_ALL, "p2p", SIZE, (hot_chain,)))
    assert estimated == pytest.approx(hot_s, rel=1e-6)  # the hot NIC's 8 equal flows: static sharing is max-min here
    balanced_s = timed(balanced_send_bytes(SIZE, 16))
    latency = balanced_s - 8 * block / NIC_Bps
    assert 0 < latency < 10e-6  # the links' latencies
    assert hot_s == pytest.approx(latency + 32 * block / NIC_Bps, rel=1e-9)
    assert hot_s == pytest.approx(p2p_all_to_all_time_s(hot, group, NVLINK4_Bps, NIC_Bps, latency, pxn=True, nics=8),
                                  rel=1e-9)
    same_total = balanced_send_bytes(hot.sum() / 15, 16)  # the same bytes spread evenly
    assert hot_s > 2.5 * timed(same_total)


def test_textbook_ring_all_to_all_keeps_its_shift_steps():
    """Only NCCL's all-to-all runs every peer at once; the textbook ring is the pairwise exchange (n-1 steps)."""
    from simdist.collectives.algorithms import build_schedule

    sched = build_schedule("all_to_all", "ring", 16.0, Group.flat(range(4), 4))
    assert len(sched.chains[0]) == 3


def test_nccl_relays_through_pxn_only_on_nvlink_nodes_with_several_nics():
    """NCCL takes the PXN path where the GPU on the destination's rail is reachable over NVLink (PATH_PXN); with one
    NIC per node, or GPUs on PCIe, a send leaves through the sender's own NIC."""
    from simdist.collectives.backends import nccl_candidate
    from simdist.collectives.fabric import NodeFabric

    group = Group.flat(range(16), 8)

    def pxn(fabric: NodeFabric) -> bool:
        sched = nccl_candidate("all_to_all", "ring", "Simple", 1e6, group, fabric=fabric)
        assert sched.algorithm == "p2p/Simple"
        return any("PXN" in step.label for chain in sched.chains for step in chain)

    assert pxn(NodeFabric(nics=8))
    assert not pxn(NodeFabric(nics=1))
    assert not pxn(NodeFabric(nics=8, intra=HopKind.PCI))
    one_node = nccl_candidate("all_to_all", "ring", "Simple", 1e6, Group.flat(range(8), 8), fabric=NodeFabric(nics=8))
    assert not any("PXN" in step.label for chain in one_node.chains for step in chain)
