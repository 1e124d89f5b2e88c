"""NCCL CollNet over SHARP switches (collectives/collnet.py): the bytes each NIC carries, the bus bandwidth that
follows against the hand calculation, where the tuner runs it, and the keys that enable it (refused where the
hardware cannot). Also: first-generation EFA runs Simple only (aws-ofi-nccl sets NCCL_PROTO=simple)."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from simdist.collectives.collnet import (collnet_chain_all_reduce, collnet_direct_all_reduce, collnet_latency_s,
                                         collnet_nic_bytes)
from simdist.collectives.fabric import NodeFabric, from_topology
from simdist.collectives.nccl import candidates, nccl_predicted_time_s
from simdist.collectives.schedule import Group
from simdist.engine.context import build_context
from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.load import load_data
from simdist.scenario import Fidelity
from simdist.topology.build import build_topology
from tests.collectives.tuner_check import assert_never_slower
from simdist.validation.published.cases import HERE

HDR_Bps = 200e9 / 8 * 0.92  # ib-hdr per direction after the rdma efficiency


def _scenario(nodes: int = 4, nics: int = 8, sharp: bool = True, collnet: bool = True, **extra) -> dict:
    data = {
        "name": "sharp",
        "cluster": {"nodes": [{"count": nodes, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8,
                               "intra_node": "nvswitch-a100", "nic": {"link": "ib-hdr", "count": nics}}],
                    "fabric": {"topology": "fat_tree", "nodes_per_leaf": 4, "sharp": sharp}},
        "workload": {"benchmark": {"op": "all_reduce", "sizes": ["64 KB", "4 MB", "1 GB"]}},
        "communication": {"strategy": "ring", "backend": "nccl", "collnet": collnet},
    }
    for path, value in extra.items():
        *head, last = path.split("__")
        d = data
        for k in head:
            d = d[k]
        d[last] = value
    return data


def _rows(data: dict, fidelity: str = "simulate") -> list[dict]:
    data = dict(data, run={"fidelity": fidelity})
    return simulate(load_data(data)).to_dict()["collectives"]


def _nic_of(rank: int, gpus: int, nics: int) -> tuple[int, int]:
    return rank // gpus, (rank % gpus) * nics // gpus


@pytest.mark.parametrize("nodes", [2, 4, 16])
@pytest.mark.parametrize("nics", [8, 4])
def test_each_nic_sends_and_receives_S_over_k_once(nodes, nics):
    """Each node's reduced data goes up once and comes down once: S/k per NIC per direction, against the ring's
    2 (n - 1)/n x S/k."""
    size, g = 1e9, 8
    group = Group.flat(range(nodes * g), g)
    (step,) = collnet_direct_all_reduce(size, group)
    out, into = defaultdict(float), defaultdict(float)
    for t in step.transfers:
        if t.src // g != t.dst // g:
            out[_nic_of(t.src, g, nics)] += t.size_bytes
            into[_nic_of(t.dst, g, nics)] += t.size_bytes
    assert len(out) == nodes * nics == len(into)
    for nic in out:
        assert out[nic] == pytest.approx(size / nics) == pytest.approx(into[nic])
    assert collnet_nic_bytes(size, nics) == pytest.approx(size / nics)
    n = nodes * g
    assert collnet_nic_bytes(size, nics) < 2 * (n - 1) / n * size / nics


def test_direct_nvlink_load_is_a_head_per_gpu():
    """Inside a node every GPU scatters 1/G to each of the G - 1 other heads and gets each head's sum back:
    2 (G - 1)/G x S per direction on its NVLink."""
    size, g = 1e9, 8
    (step,) = collnet_direct_all_reduce(size, Group.flat(range(16), g))
    out = defaultdict(float)
    for t in step.transfers:
        if t.src // g == t.dst // g:
            out[t.src] += t.size_bytes
    assert all(v == pytest.approx(2 * (g - 1) / g * size) for v in out.values())


def test_chain_runs_one_chain_per_nic_and_each_head_once_to_the_network():
    size, g, nics = 1e9, 8, 4
    (step,) = collnet_chain_all_reduce(size, Group.flat(range(32), g), nics)
    net = [t for t in step.transfers if t.src // g != t.dst // g]
    assert len(net) == 4 * nics and all(t.size_bytes == pytest.approx(size / nics) for t in net)
    with pytest.raises(ValueError, match="between nodes"):
        collnet_chain_all_reduce(size, Group.flat(range(8), g), nics)


@pytest.mark.parametrize("nodes", [2, 4, 16])
def test_busbw_is_twice_the_rings_where_the_nics_bound_it(nodes):
    """4 HDR NICs for 8 A100: NVLink (240 GB/s, 2 x 7/8 S) allows algbw 137 GB/s, the NICs (S/4 each way at
    23 GB/s) 92 GB/s, so CollNet's algbw is the NICs' 4 x 23 GB/s and its busbw 2 (n - 1)/n times that, while a
    ring's busbw is the NIC rate itself."""
    big = _rows(_scenario(nodes, nics=4))[-1]
    assert big["algorithm"] == "collnet_direct/Simple"
    n = nodes * 8
    nic_rate = 4 * HDR_Bps
    assert big["busbw_GBps"] == pytest.approx(nic_rate * 2 * (n - 1) / n / 1e9, rel=0.02)
    off = _rows(_scenario(nodes, nics=4, sharp=False, collnet=False))[-1]
    assert off["algorithm"] == "ring/Simple"
    assert off["busbw_GBps"] <= nic_rate / 1e9 * 1.001
    assert big["busbw_GBps"] / off["busbw_GBps"] == pytest.approx(2 * (n - 1) / n, rel=0.1)


def test_eight_nics_per_node_leave_nvlink_as_the_bound():
    """8 HDR per DGX A100: the NICs would allow 8 x 23 = 184 GB/s algbw; NVLink's 2 x 7/8 S at 240 GB/s allows
    137 GB/s, so busbw = 137 x 2 (n - 1)/n (16 nodes: 270 GB/s), above the ring's NIC-bound 184."""
    (big,) = _rows(_scenario(16))[-1:]
    n = 128
    assert big["algorithm"] == "collnet_direct/Simple"
    assert big["busbw_GBps"] == pytest.approx(240e9 * 8 / 14 * 2 * (n - 1) / n / 1e9, rel=0.02)


def test_estimate_equals_simulate_without_contention():
    for nodes in (2, 4):
        data = _scenario(nodes)
        sim, est = _rows(data, "simulate"), _rows(data, "estimate")
        assert [r["algorithm"] for r in sim] == [r["algorithm"] for r in est]
        for a, b in zip(sim, est):
            assert a["time_s"] == pytest.approx(b["time_s"], rel=1e-9)


def test_tuner_picks_collnet_at_large_sizes_and_never_what_it_predicts_slower():
    ctx = build_context(load_data(_scenario(8)), Fidelity.ESTIMATE)
    fabric = ctx._tuning()["fabric"]
    assert fabric.collnet == "direct"
    assert ctx.schedule("all_reduce", 1e9).algorithm == "collnet_direct/Simple"
    assert_never_slower(ctx, exponents=range(10, 31, 4))
    # CollNet is an all-reduce candidate only, and only between nodes
    assert not any(a.startswith("collnet") for a, _ in candidates("all_gather", 64, 8, fabric))
    assert not any(a.startswith("collnet") for a, _ in candidates("all_reduce", 8, 1, fabric))


def test_off_by_default_and_sharp_alone_is_refused():
    """NCCL_COLLNET_ENABLE defaults to 0: SHARP switches change nothing without communication.collnet."""
    ctx = build_context(load_data(_scenario(8, sharp=False, collnet=False)), Fidelity.ESTIMATE)
    fabric = ctx._tuning()["fabric"]
    assert fabric.collnet is None
    assert not any(a.startswith("collnet") for a, _ in candidates("all_reduce", 64, 8, fabric))
    with pytest.raises(ScenarioError, match="read only with communication.collnet: true"):
        load_data(_scenario(8, collnet=False))


def test_chain_where_the_node_has_no_nvswitch():
    data = _scenario(8, nics=4, cluster__nodes=[{"count": 8, "gpu": "v100-sxm2-32gb", "gpus_per_node": 8,
                                                 "intra_node": "cube-mesh-v100",
                                                 "nic": {"link": "ib-edr", "count": 4}}])
    scenario = load_data(data)
    topo = build_topology(scenario.cluster)
    ctx = build_context(scenario, Fidelity.ESTIMATE)
    assert from_topology(topo, ctx.group, collnet=True).collnet == "chain"
    assert from_topology(topo, ctx.group).collnet is None
    assert _rows(data)[-1]["algorithm"] == "collnet_chain/Simple"


def test_closed_form_latency_and_bandwidth():
    """tuning.cc: Direct 2 (3.7 + 7 x 0.4) + 31 = 44 us with 8 GPUs a node, no base latency; algbw 0.5 bwIntra
    over the GPU/NIC factor (1 with a NIC per GPU; x 0.85 on Hopper), held to the NICs' rate."""
    assert collnet_latency_s("collnet_direct", 8) == pytest.approx(44e-6)
    assert collnet_latency_s("collnet_chain", 8) == pytest.approx((2 * 7 * 2.8 + 30) * 1e-6)
    f = NodeFabric(intra_Bps=240e9, nic_Bps=8 * HDR_Bps, nics=8, arch_index=1, collnet="direct")
    t0 = nccl_predicted_time_s("all_reduce", "collnet_direct", "Simple", 0.0, 64, 8, f)
    assert t0 == pytest.approx(44e-6)
    t = nccl_predicted_time_s("all_reduce", "collnet_direct", "Simple", 1e9, 64, 8, f)
    assert 1e9 / (t - t0) == pytest.approx(120e9)
    f4 = NodeFabric(intra_Bps=240e9, nic_Bps=4 * HDR_Bps, nics=4, arch_index=1, collnet="direct")
    t4 = nccl_predicted_time_s("all_reduce", "collnet_direct", "Simple", 1e9, 64, 8, f4)
    assert 1e9 / (t4 - t0) == pytest.approx(min(120e9 / 1.5, 4 * HDR_Bps))
    assert nccl_predicted_time_s("all_reduce", "collnet_direct", "Simple", 1e9, 64, 8, NodeFabric()) is None


@pytest.mark.parametrize("change, match", [
    ({"cluster__fabric__sharp": False}, "cluster.fabric.sharp: true"),
    ({"communication__backend": "textbook"}, "expected backend nccl"),
    ({"cluster__fabric": {"topology": "torus2d", "sharp": True}}, "switched topology"),
])
def test_refused_where_the_hardware_or_library_cannot(change, match):
    with pytest.raises(ScenarioError, match=match):
        load_data(_scenario(4, **change))


def test_refused_without_infiniband_nics():
    data = _scenario(4, cluster__nodes=[{"count": 4, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8,
                                         "intra_node": "nvswitch-a100", "nic": {"link": "eth-10g", "count": 1}}])
    with pytest.raises(ScenarioError, match="expected rdma NICs"):
        load_data(data)


def test_first_generation_efa_runs_simple_only():
    """aws-ofi-nccl sets NCCL_PROTO=simple on p3dn / p4d / p4de (LL and LL128 need 128-byte in-order writes the
    EFA endpoint does not give), for every communicator, intra-node ones included."""
    path = Path(HERE) / "scenarios" / "nccl-aws-efa.yaml"
    from simdist.io.load import load_scenario

    scenario = load_scenario(path)
    ctx = build_context(scenario, Fidelity.ESTIMATE)
    fabric = ctx._tuning()["fabric"]
    assert fabric.simple_only and not fabric.ll128
    assert {p for _, p in candidates("all_reduce", 16, 2, fabric)} == {"Simple"}
    assert {p for _, p in candidates("all_reduce", 8, 1, fabric)} == {"Simple"}
    assert ctx.schedule("all_reduce", 64e3).protocol == "Simple"


def test_refused_above_eight_gpus_a_node_or_on_mixed_nodes():
    node = {"count": 2, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
            "nic": {"link": "ib-hdr", "count": 8}}
    with pytest.raises(ScenarioError, match="at most 8"):
        load_data(_scenario(cluster__nodes=[node, {**node, "gpus_per_node": 4, "intra_node": "pcie-gen4"}]))
    big = {**node, "gpus_per_node": 16, "intra_node": "pcie-gen4"}
    with pytest.raises(ScenarioError, match="at most 8"):
        load_data(_scenario(cluster__nodes=[big]))


def test_one_gpu_a_node_pays_the_trees_network_latency():
    """tuning.cc: with ppn = 1 the network latency is the tree's (14 us Simple), no intra-node term."""
    assert collnet_latency_s("collnet_direct", 1) == pytest.approx(14e-6)
    (step,) = collnet_direct_all_reduce(1e6, Group.flat(range(4), 1))
    assert {(t.src, t.dst) for t in step.transfers} == {(0, 1), (1, 2), (2, 3), (3, 0)}
    assert all(t.size_bytes == 1e6 for t in step.transfers)
