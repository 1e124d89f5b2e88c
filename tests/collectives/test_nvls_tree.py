"""NVLSTree all-reduce (NVLS inside each third-generation NVSwitch node, a double binary tree over the nodes):
the bytes on every GPU link and NIC against the hand calculation, NCCL's closed form, and where the tuner takes
it (two H100 nodes) and where not (more nodes, NVLS off, nodes without NVLS)."""
from __future__ import annotations

from collections import defaultdict

import pytest

from simdist.collectives.fabric import NodeFabric
from simdist.collectives.nccl import candidates, nccl_predicted_time_s
from simdist.collectives.nvls import (NVLS_NET_LATENCY_S, NVLS_TREE_NET_LATENCY_S, nvls_collnet_all_reduce,
                                     nvls_link_bytes, nvls_tree_all_reduce, nvls_tree_nic_bytes)
from simdist.collectives.protocols import HopKind
from simdist.collectives.schedule import Group
from simdist.engine.simulation import simulate
from simdist.io.load import load_scenario
from simdist.validation.published.cases import HERE

H100 = HERE / "scenarios" / "nccl-hgx-h100.yaml"


def _group(nodes: int, gpus: int) -> Group:
    return Group.flat(range(nodes * gpus), gpus)


def _loads(step, node_of):
    """Bytes each rank sends and receives, inside its node and to other nodes."""
    intra_out, intra_in, net_out, net_in = (defaultdict(float) for _ in range(4))
    for t in step.transfers:
        if node_of[t.src] == node_of[t.dst]:
            intra_out[t.src] += t.size_bytes
            intra_in[t.dst] += t.size_bytes
        else:
            net_out[t.src] += t.size_bytes
            net_in[t.dst] += t.size_bytes
    return intra_out, intra_in, net_out, net_in


def _switch_checked(builder, nodes: int, size: float, g: int, k: int, eff: float):
    """The builder's step on `nodes` nodes of g GPUs with k heads, after checking that every GPU link carries
    NVLS's (n + 1)/n S per direction over its efficiency; (group, step, bytes sent and received per rank
    between nodes)."""
    group = _group(nodes, g)
    node_of = {r: i for i, node in enumerate(group.nodes) for r in node}
    (step,) = builder(size, group, heads=k, efficiency=eff)
    intra_out, intra_in, net_out, net_in = _loads(step, node_of)
    for r in group.ranks:
        assert intra_out[r] == pytest.approx(nvls_link_bytes(size, g) / eff) == pytest.approx(intra_in[r])
    return group, step, net_out, net_in


@pytest.mark.parametrize("nodes", [2, 4, 8])
def test_every_gpu_link_carries_the_nvls_pattern_and_every_nic_its_tree_share(nodes):
    """8 GPUs and 8 heads (one per NIC) a node, S = 1 GB: every GPU link (n + 1)/n S per direction over the NVLS
    efficiency; between nodes each head sends and receives S/k on two nodes (both trees' edge between them, half
    each), at most 2 S/k on more (interior in one tree, leaf in the other), and the heads are rail-aligned."""
    size, g, k = 1e9, 8, 8
    group, step, net_out, net_in = _switch_checked(nvls_tree_all_reduce, nodes, size, g, k, 0.85)
    node_of = {r: i for i, node in enumerate(group.nodes) for r in node}
    per_head = nvls_tree_nic_bytes(size, k, nodes)
    assert per_head == pytest.approx(size / k if nodes == 2 else 2 * size / k)
    assert all(net_out[r] <= per_head * (1 + 1e-12) and net_in[r] <= per_head * (1 + 1e-12) for r in group.ranks)
    assert max(net_out.values()) == pytest.approx(per_head)
    if nodes == 2:  # every head carries exactly S/k each way
        assert sorted(net_out) == sorted(net_in) == list(group.ranks)
        assert all(v == pytest.approx(size / k) for v in [*net_out.values(), *net_in.values()])
    for t in step.transfers:  # heads talk to the same local index on other nodes (rail-aligned)
        if node_of[t.src] != node_of[t.dst]:
            assert t.src % g == t.dst % g
    # total bytes over the network: each tree edge carries S/(2k) per head up and down
    assert sum(net_out.values()) == pytest.approx(2 * (nodes - 1) * 2 * k * size / (2 * k))
    # latency: 2 log2(nodes) network hops (tuning.cc log2i)
    assert step.delay_s == pytest.approx(2 * (nodes.bit_length() - 1) * NVLS_TREE_NET_LATENCY_S)


def test_nvls_tree_is_refused_on_one_node_and_uneven_nodes():
    with pytest.raises(ValueError, match="between nodes"):
        nvls_tree_all_reduce(1e6, _group(1, 8), heads=8)
    with pytest.raises(ValueError, match="same number"):
        nvls_tree_all_reduce(1e6, Group((0, 1, 2, 3, 4), ((0, 1, 2), (3, 4))), heads=2)


def test_nccls_closed_form_for_nvls_tree_is_the_hand_calculation():
    """tuning.cc: bw = min(2 x bwIntra x nvlsEfficiency, bwInter x (2 on two nodes)); algbw = bw x n/(2(n - 1));
    latency 25 us (NVLS hop) + 2 log2(nodes) x 20.9 us."""
    fab = NodeFabric(intra=HopKind.NVLINK, nvls=True, intra_Bps=360e9, nic_Bps=8 * 46e9, nics=8, arch_index=2)
    size, n = 8e9, 16
    t2 = nccl_predicted_time_s("all_reduce", "nvls_tree", "Simple", size, n, 2, fab)
    bw2 = min(2 * 360e9 * 0.85, 2 * 8 * 46e9)
    assert t2 == pytest.approx(25e-6 + 2 * 1 * 20.9e-6 + size / (bw2 * n / (2 * (n - 1))))
    t4 = nccl_predicted_time_s("all_reduce", "nvls_tree", "Simple", size, 32, 4, fab)
    bw4 = min(2 * 360e9 * 0.85, 8 * 46e9)  # no doubling past two nodes
    assert t4 == pytest.approx(25e-6 + 2 * 2 * 20.9e-6 + size / (bw4 * 32 / (2 * 31)))
    # only for multi-node all-reduce on NVLS nodes
    assert ("nvls_tree", "Simple") in candidates("all_reduce", 16, 2, fab)
    assert ("nvls_tree", "Simple") not in candidates("all_reduce", 8, 1, fab)
    assert ("nvls_tree", "Simple") not in candidates("all_gather", 16, 2, fab)
    assert ("nvls_tree", "Simple") not in candidates("all_reduce", 16, 2, NodeFabric(nvls=False))


def _bench(nodes: int, *extra: str) -> dict:
    out = simulate(load_scenario(H100, [f"cluster.nodes.0.count={nodes}", "workload.benchmark.sizes=['8 GB']",
                                        *extra])).to_dict()
    (row,) = out["collectives"]
    return row


def test_the_tuner_takes_nvls_tree_on_two_h100_nodes_and_the_ring_on_more():
    """Two HGX H100 nodes, 8 x NDR each, 8 GB: NVLSTree's NICs carry S/k against the ring's 2 (n-1)/n S/k, so it
    is bound by NVLS inside the node, 2 (n-1)/n x 306 n/(n+1) GB/s = 510 GB/s busbw, ~1.4x the ring. On four nodes
    each NIC carries 2 S/k either way and the ring is not slower: the tuner keeps it. NVLS off: the ring."""
    on = _bench(2)
    off = _bench(2, "communication.nvls=false")
    assert on["algorithm"] == "nvls_tree/Simple" and off["algorithm"].startswith("ring")
    link = 18 * 25e9 * 0.80 * 0.85
    assert on["busbw_GBps"] == pytest.approx(2 * 15 / 16 * link * 8 / 9 / 1e9, rel=0.01)
    assert 1.3 < on["busbw_GBps"] / off["busbw_GBps"] < 1.5
    four = _bench(4)
    assert four["algorithm"].startswith("ring")
    assert four["busbw_GBps"] == pytest.approx(_bench(4, "communication.nvls=false")["busbw_GBps"])


def test_nodes_without_nvls_never_run_it():
    row = simulate(load_scenario(HERE / "scenarios" / "nccl-dgx-a100.yaml",
                                 ["cluster.nodes.0.count=2", "workload.benchmark.sizes=['8 GB']"])).to_dict()
    assert not row["collectives"][0]["algorithm"].startswith("nvls")


def test_a_group_with_uneven_nodes_never_gets_nvls_tree():
    """A dp group left with 6, 8, 7 and 7 GPUs on four NVLS nodes (failures) still divides evenly by the node
    count; NVLSTree pairs every node's heads, so the tuner must not offer it there (and must not crash)."""
    from simdist.collectives.backends import nccl_schedule

    nodes = ((0, 1, 2, 3, 4, 5), tuple(range(8, 16)), tuple(range(16, 23)), tuple(range(24, 31)))
    group = Group(tuple(r for n in nodes for r in n), nodes)
    fab = NodeFabric(intra=HopKind.NVLINK, nvls=True, intra_Bps=360e9, nic_Bps=8 * 46e9, nics=8, arch_index=2)
    assert ("nvls_tree", "Simple") in candidates("all_reduce", group.size, 4, fab)
    assert not nccl_schedule("all_reduce", 8e9, group, fabric=fab).algorithm.startswith("nvls_tree")


@pytest.mark.parametrize("scenario, extra, needle", [
    (H100, ["communication.backend=textbook", "communication.nvls=false"], "read only with backend nccl"),
    (HERE / "scenarios" / "nccl-dgx-a100.yaml", ["communication.nvls=false"], "nothing to turn off"),
])
def test_nvls_false_is_refused_where_it_could_change_nothing(scenario, extra, needle):
    from simdist.errors import ScenarioError

    with pytest.raises(ScenarioError, match="communication.nvls") as err:
        load_scenario(scenario, extra)
    assert needle in str(err.value)


@pytest.mark.parametrize("nodes", [2, 4, 16])
def test_nvls_over_collnet_puts_s_over_k_on_every_nic_on_any_node_count(nodes):
    """NVLS across nodes (with SHARP switches, NCCL_COLLNET_ENABLE=1): the switch reduces inside the node, each
    head sends its 1/k up to the aggregation switch and gets the sum back: S/k per NIC each way on any node
    count (NVLSTree's tree puts 2 S/k on its interior nodes), NVLS's (n + 1)/n S on every GPU link."""
    size, k = 1e9, 8
    group, step, net_out, net_in = _switch_checked(nvls_collnet_all_reduce, nodes, size, 8, k, 0.85)
    for r in group.ranks:
        assert net_out[r] == pytest.approx(size / k) == pytest.approx(net_in[r])
    assert step.delay_s == NVLS_NET_LATENCY_S


def _sharp(nodes: int, sharp: bool) -> dict:
    a100 = HERE.parents[1] / "scenarios" / "examples" / "sharp-dgxa100.yaml"
    out = simulate(load_scenario(a100, [
        f"cluster.nodes.0.count={nodes}", "cluster.nodes.0.gpu=h100-sxm5-80gb", "cluster.nodes.0.intra_node=nvswitch-h100",
        "cluster.nodes.0.nic={link: ib-ndr, count: 8}", f"cluster.fabric.sharp={str(sharp).lower()}",
        f"communication.collnet={str(sharp).lower()}", "workload.benchmark.sizes=['1 GB']"])).to_dict()
    (row,) = out["collectives"]
    return row


def test_the_tuner_takes_nvls_across_h100_nodes_where_sharp_runs():
    """16 H100 nodes on an NDR fat tree: with SHARP (CollNet on) NVLS across nodes is bound by NVLS inside the
    node, 2 (n-1)/n x 306 n/(n+1) = 540 GB/s busbw at 128 ranks less 43 us of latency; without it NVLSTree, whose interior NICs carry
    2 S/k, runs at the NICs' rate (about 350)."""
    on, off = _sharp(16, True), _sharp(16, False)
    assert on["algorithm"] == "nvls/Simple" and off["algorithm"] == "nvls_tree/Simple"
    link = 18 * 25e9 * 0.80 * 0.85
    t = 25e-6 + 18e-6 + 1e9 * 9 / 8 / link  # the NVLS hop and the network's latency, then the switch's bytes
    assert on["busbw_GBps"] == pytest.approx(2 * 127 / 128 * 1e9 / t / 1e9, rel=0.005)
    assert on["busbw_GBps"] > 1.4 * off["busbw_GBps"]
