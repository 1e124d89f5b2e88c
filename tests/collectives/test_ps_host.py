"""Parameter servers in the worker nodes' host memory (communication.ps.placement: host): a node's GPUs push
over PCIe to a CPU socket, other nodes' through its NIC, and every byte of a shard crosses a link (no GPU
holds one), as TensorFlow's parameter_server with local_parameter_device=cpu runs."""
from __future__ import annotations

import copy

import pytest

from simdist.collectives.schedule import CollectiveOp
from simdist.engine.context import build_context
from simdist.errors import ScenarioError
from simdist.io.load import load_data
from simdist.report import cluster_summary
from simdist.scenario import Fidelity

S = 64e6
BASE = {"cluster": {"nodes": [{"count": 1, "gpu": "k80-12gb", "gpus_per_node": 4, "intra_node": "pcie-gen3",
                               "nic": {"bandwidth": "10 Gb/s", "transport": "tcp"}}]},
        "workload": {"model": "resnet50", "batch_per_gpu": 16, "precision": "fp32"},
        "communication": {"strategy": "ps", "ps": {"servers": 1, "placement": "host", "server": "cpu",
                                                            "aggregation": "gpu"}},  # every GPU pushes its own
        "run": {"iterations": 3, "warmup": 1}}


def _scenario(nodes: int = 1, **ps):
    d = copy.deepcopy(BASE)
    d["cluster"]["nodes"][0]["count"] = nodes
    d["communication"]["ps"].update(ps)
    return load_data(d)


def _link_bytes(scenario) -> tuple[object, dict[tuple[str, str], float]]:
    """The context and the bytes each directed link carried in one PS all-reduce of S (estimate network)."""
    ctx = build_context(scenario, Fidelity.ESTIMATE)
    ctx.env.process(ctx.network.run(ctx.env, ctx.schedule(CollectiveOp.ALL_REDUCE, S)))
    ctx.env.run()
    links = ctx.topology.links
    return ctx, {ends: float(ctx.network.link_bytes[i]) for i, ends in enumerate(links.ends)}


def test_host_server_is_the_nodes_cpu_socket_and_every_gpu_pushes_over_pcie():
    ctx, carried = _link_bytes(_scenario())
    assert ctx.servers == (4,)
    assert ctx.topology.endpoints[4] == "node0/cpu0"
    into_socket = sum(b for (u, v), b in carried.items() if v == "node0/cpu0")
    out_of_socket = sum(b for (u, v), b in carried.items() if u == "node0/cpu0")
    # 4 pushes of S in, 4 pulls of S out: no GPU holds the shard (colocated on a GPU: 3 of each)
    assert into_socket == pytest.approx(4 * S) and out_of_socket == pytest.approx(4 * S)
    for g in range(4):
        assert carried[(f"node0/gpu{g}", "node0/pcie0")] == pytest.approx(S)  # its push, on its own PCIe link
    colocated, carried_c = _link_bytes(_scenario(placement="colocated"))
    assert colocated.servers == (0,)
    assert sum(b for (u, v), b in carried_c.items() if v == "node0/gpu0") == pytest.approx(3 * S)


def test_host_servers_spread_over_nodes_and_remote_pushes_cross_the_nics():
    ctx, carried = _link_bytes(_scenario(nodes=2, servers=2))
    assert [ctx.topology.endpoints[s] for s in ctx.servers] == ["node0/cpu0", "node1/cpu0"]
    for n in range(2):
        nic_out = sum(b for (u, v), b in carried.items() if u == f"node{n}/nic0" and "/" not in v)
        # per-GPU workers: each of the node's 4 GPUs pushes the other node's half (S/2) through the NIC,
        # and the node's server answers the other node's 4 pulls of its half
        assert nic_out == pytest.approx(4 * S / 2 + 4 * S / 2)


def test_second_server_per_node_goes_to_the_second_socket():
    ctx, _ = _link_bytes(_scenario(nodes=1, servers=2))
    assert [ctx.topology.endpoints[s] for s in ctx.servers] == ["node0/cpu0", "node0/cpu1"]


def test_host_placement_refuses_a_gpu_server_and_too_many_servers():
    with pytest.raises(ScenarioError, match=r"communication\.ps\.server.*'gpu'.*placement 'host'"):
        _scenario(server="gpu")
    with pytest.raises(ScenarioError, match=r"communication\.ps\.servers.*3.*2 CPU sockets"):
        build_context(_scenario(servers=3), Fidelity.ESTIMATE)


def test_host_placement_needs_sockets_in_the_node_graph():
    d = copy.deepcopy(BASE)
    d["cluster"]["nodes"][0].update({"gpu": "a100-sxm4-80gb", "gpus_per_node": 4,
                                     "intra_node": {"bandwidth": "300 GB/s", "transport": "nvlink"}})
    with pytest.raises(ScenarioError, match=r"communication\.ps\.servers.*0 CPU sockets.*pcie_link"):
        build_context(load_data(d), Fidelity.ESTIMATE)


def test_cluster_summary_names_host_servers():
    facts, _ = cluster_summary(_scenario())
    assert facts["ps servers"] == "1 in the worker nodes' host memory (no extra machines)"


def test_host_placement_is_refused_by_the_torch_harness():
    from simdist.validation.from_scenario import layout_for

    with pytest.raises(ScenarioError, match=r"communication\.ps\.placement.*host"):
        layout_for(_scenario())
