"""AMD Instinct node interiors (intra_node xgmi-mi300x / xgmi-mi325x / xgmi-mi355x): eight GPUs fully connected by
Infinity Fabric (xGMI) links, no switch, and what RCCL runs on them where it differs from NCCL: no NVLS, its own
ring tables for the 8-GPU mesh (rome_models.cc), no tree/Simple on one gfx942 node. Figures against the hand
calculation."""
from __future__ import annotations

from collections import Counter

import pytest
import yaml

from simdist.collectives.fabric import from_topology
from simdist.collectives.nccl import candidates
from simdist.collectives.node_rings import RCCL_XGMI8_NET_PATHS, RCCL_XGMI8_RINGS, group_node_orders
from simdist.collectives.schedule import Group
from simdist.engine.simulation import simulate
from simdist.io.load import load_data
from simdist.topology.build import build_topology

SIZE = 8e9
XGMI_EFF = 0.75  # AMD: about 48 of 64 GB/s usable per link (CRC, protocol)
RING_SIMPLE_1NODE_S = 8.4e-6 + 14 * 3.4e-6  # tuning.cc ring Simple: base + 2 (n - 1) NVLink-class hops
GPUS = {"xgmi-mi300x": "mi300x-192gb", "xgmi-mi325x": "mi325x-256gb", "xgmi-mi355x": "mi355x-288gb"}


def _scenario(intra: str, nodes: int = 1):
    return load_data(yaml.safe_load(f"""
name: xgmi
cluster:
  nodes:
    - count: {nodes}
      gpu: {GPUS[intra]}
      gpus_per_node: 8
      intra_node: {intra}
      nic: {{link: connectx-7, count: 8}}
  fabric: {{topology: single_switch}}
workload:
  benchmark: {{op: all_reduce, sizes: ["8 GB"]}}
communication: {{strategy: ring, backend: nccl}}
"""))


def _arcs(paths, closed: bool) -> Counter:
    out: Counter = Counter()
    for p in paths:
        steps = list(zip(p, p[1:])) + ([(p[-1], p[0])] if closed else [])
        out.update(steps)
    return out


def test_the_mesh_joins_every_pair_by_one_link_and_nothing_else():
    """28 direct GPU-GPU edges of one xGMI link (64 GB/s per direction on MI300X), no switch vertex; every GPU
    with its own PCIe switch and NIC."""
    topo = build_topology(_scenario("xgmi-mi300x").cluster)
    g = topo.graph
    gpus = [f"node0/gpu{i}" for i in range(8)]
    direct = [(u, v, d) for u, v, d in g.edges(gpus, data=True) if d["kind"] == "nvlink"]
    assert len({frozenset((u, v)) for u, v, _ in direct}) == 28
    assert all(d["link"].name == "xgmi3" and d["link"].bandwidth_Bps == 64e9 for _, _, d in direct)
    assert all(d["link"].effective_Bps == pytest.approx(48e9) for _, _, d in direct)
    assert not any("nvswitch" in v for v in g.nodes)
    assert [g.nodes[v]["rail"] for v in gpus] == [f"node0/nic{i}" for i in range(8)]


@pytest.mark.parametrize("intra,gfx94", [("xgmi-mi300x", True), ("xgmi-mi325x", True), ("xgmi-mi355x", False)])
def test_rccl_runs_no_nvls_and_no_tree_simple_on_one_gfx942_node(intra, gfx94):
    """No NVSwitch, so no NVLS; LL128 over xGMI (RCCL since ROCm 6.4.2 on gfx942/gfx950); tuning.cc skips
    tree/Simple when every rank of a gfx94 (MI300X, MI325X) communicator is on one node, not on MI355X (gfx950)
    and not across nodes."""
    topo = build_topology(_scenario(intra).cluster)
    fabric = from_topology(topo, Group.flat(range(8), 8))
    assert not fabric.nvls and fabric.ll128 and fabric.rccl_gfx94 is gfx94
    one = candidates("all_reduce", 8, 1, fabric)
    assert not any(a.startswith("nvls") for a, _ in one)
    assert (("tree", "Simple") in one) is (not gfx94)
    assert ("tree", "LL128") in one and ("ring", "Simple") in one
    assert ("tree", "Simple") in candidates("all_reduce", 16, 2, fabric)


def test_rccl_ring_tables_load_every_directed_link_evenly():
    """rome_models.cc's 8-GPU 7-link model: 14 rings, every one of the 56 directed links in exactly two; its 8-NIC
    model: 8 paths, channel c entering at GPU c, every directed link in exactly one."""
    assert len(RCCL_XGMI8_RINGS) == 14
    assert Counter(_arcs(RCCL_XGMI8_RINGS, closed=True).values()) == Counter({2: 56})
    assert [p[0] for p in RCCL_XGMI8_NET_PATHS] == list(range(8))
    assert Counter(_arcs(RCCL_XGMI8_NET_PATHS, closed=False).values()) == Counter({1: 56})
    topo = build_topology(_scenario("xgmi-mi300x", nodes=2).cluster)
    assert group_node_orders(topo, Group.flat(range(8), 8), 1) == RCCL_XGMI8_RINGS
    assert group_node_orders(topo, Group.flat(range(16), 8), 8) == RCCL_XGMI8_NET_PATHS


@pytest.mark.parametrize("intra,link_Bps", [("xgmi-mi300x", 64e9), ("xgmi-mi325x", 64e9), ("xgmi-mi355x", 76.8e9)])
def test_one_node_all_reduce_runs_rccls_rings_over_all_seven_links(intra, link_Bps):
    """8 GB over 8 GPUs: ring/Simple on RCCL's 14 rings, each GPU's 7 links busy both ways: bus bandwidth
    7 x 64 x 0.75 = 336 GB/s (MI355X 7 x 76.8 x 0.75 = 403.2 GB/s); time 2 x 7/8 x 8 GB / 336 GB/s + 8.4 us +
    14 x 3.4 us = 41.7227 ms (MI355X 34.7782 ms)."""
    (row,) = simulate(_scenario(intra)).to_dict()["collectives"]
    assert row["algorithm"] == "ring/Simple"
    bus = 7 * link_Bps * XGMI_EFF
    hand = 2 * 7 / 8 * SIZE / bus + RING_SIMPLE_1NODE_S
    assert row["time_s"] == pytest.approx(hand, rel=1e-9)
    assert hand == pytest.approx(41.7227e-3 if link_Bps == 64e9 else 34.7782e-3, rel=1e-5)


def test_two_nodes_run_rccls_paths_bound_by_the_nics():
    """16 MI300X on two nodes, a ConnectX-7 per GPU: 8 ring channels along RCCL's paths, each NIC carrying one channel's
    2 x 15/16 x S/8 = 1.875 GB per direction at 400 Gb/s x 0.92 = 46 GB/s: 40.76 ms, plus the ring's per-hop
    latencies (about 150 us over 30 steps); each xGMI link carries one channel too (1.875 GB at 48 GB/s, 39.1 ms)."""
    (row,) = simulate(_scenario("xgmi-mi300x", nodes=2)).to_dict()["collectives"]
    assert row["algorithm"] == "ring/Simple"
    nic = 2 * 15 / 16 * SIZE / 8 / (400e9 / 8 * 0.92)
    assert nic == pytest.approx(40.76e-3, rel=1e-4)
    assert nic < row["time_s"] < nic + 200e-6
