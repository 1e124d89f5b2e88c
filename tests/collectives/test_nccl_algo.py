"""communication.nccl_algo / nccl_proto: NCCL_ALGO and NCCL_PROTO as NCCL parses and honours them
(tuning.cc parseList), and communication.strategy with backend nccl never ignored."""
from __future__ import annotations

import pytest

from simdist.collectives.fabric import NodeFabric
from simdist.collectives.nccl import candidates, nccl_choice
from simdist.collectives.nccl_env import NcclEnable
from simdist.collectives.protocols import COSTS, HopKind, Protocol
from simdist.engine.context import build_context
from simdist.errors import InfeasibleError, ScenarioError
from simdist.io.load import load_scenario
from simdist.scenario import Fidelity

IB = "scenarios/examples/ib-512gpu.yaml"
NCCL = ["communication.strategy=ring", "communication.backend=nccl", "run.fidelity=estimate"]
ONE_DGX_H100 = ["cluster.nodes.0.count=1", "cluster.fabric={topology: single_switch}"]


def _ctx(*overrides: str):
    return build_context(load_scenario(IB, NCCL + list(overrides)), Fidelity.ESTIMATE)


def test_lists_exclusions_and_per_function_entries_as_nccl_parses_them():
    assert NcclEnable(algo="ring").algorithms("all_reduce") == {"ring"}
    assert NcclEnable(algo="Tree,RING").algorithms("all_gather") == {"tree", "ring"}
    assert NcclEnable(algo="^NVLS,NVLSTree").algorithms("all_reduce") == {"tree", "ring", "collnet_direct",
                                                                         "collnet_chain"}
    per = NcclEnable(algo="Ring;allreduce:Tree")
    assert per.algorithms("all_reduce") == {"tree"} and per.algorithms("reduce_scatter") == {"ring"}
    assert NcclEnable(proto="^LL128;allreduce:LL128").protocols("broadcast") == {"LL", "Simple"}
    assert NcclEnable(algo="ring").algorithms("all_to_all") is None  # point-to-point is not tuned
    for bad in ({"algo": "rings"}, {"algo": "allreduce:Tree;Ring"}, {"proto": "gather:LL"}):
        with pytest.raises(ValueError):
            NcclEnable(**bad)


def test_forced_protocol_is_enabled_even_where_nccl_leaves_it_off():
    pcie = NodeFabric(intra=HopKind.PCI, ll128=False)
    assert ("ring", "LL128") not in candidates("all_reduce", 8, 1, pcie)
    assert candidates("all_reduce", 8, 1, pcie, NcclEnable(proto="LL128")) == [("ring", "LL128"), ("tree", "LL128")]
    # Simple excluded: the in-switch algorithms (Simple only) go with it
    nvls = NodeFabric(nvls=True, ll128=True)
    assert {a for a, _ in candidates("all_reduce", 8, 1, nvls, NcclEnable(proto="^Simple"))} == {"ring", "tree"}


def test_nccl_algo_ring_reproduces_nccl_tests_on_a_dgx_h100():
    """NVLS wins a large all-reduce on one DGX H100; NCCL_ALGO=Ring makes it run rings, and the forced ring's
    bus bandwidth is the ring's closed form: 2(n-1)/n S / t."""
    free = _ctx(*ONE_DGX_H100)
    ring = _ctx(*ONE_DGX_H100, "communication.nccl_algo=Ring")
    size = 1 << 30
    assert free.schedule("all_reduce", size).algorithm == "nvls/Simple"
    forced = ring.schedule("all_reduce", size)
    assert forced.algorithm == "ring/Simple"
    t_free, t_ring = free.collective_time("all_reduce", size), ring.collective_time("all_reduce", size)
    assert t_ring > t_free
    # hand calculation: 8 ranks, each sending 2 x 7/8 S over its NVLink share in the ring's channels
    fabric = free._tuning()["fabric"]
    n = 8
    bound = 2 * (n - 1) / n * size / fabric.intra_Bps  # the links at full rate, no latency
    assert bound < t_ring < 1.35 * bound


def test_nccl_proto_changes_the_time_and_names_the_protocol():
    ctx = _ctx(*ONE_DGX_H100, "communication.nccl_algo=Ring", "communication.nccl_proto=LL")
    sched = ctx.schedule("all_reduce", 64e6)
    assert sched.algorithm == "ring/LL"
    simple = _ctx(*ONE_DGX_H100, "communication.nccl_algo=Ring", "communication.nccl_proto=Simple")
    # LL carries 4 flag bytes per 8: about twice the wire time of Simple on a large buffer
    ratio = ctx.collective_time("all_reduce", 64e6) / simple.collective_time("all_reduce", 64e6)
    assert 1.6 < ratio < 2.2
    assert COSTS["ring"][Protocol.LL].bandwidth_fraction == 0.5


def test_tree_forced_on_two_nodes_per_function():
    ctx = _ctx("cluster.nodes.0.count=2", "cluster.fabric={topology: single_switch}",
               "communication.nccl_algo=Ring;allreduce:Tree")
    assert ctx.schedule("all_reduce", 256e6).algorithm.startswith("tree/")
    assert ctx.schedule("all_gather", 256e6).algorithm.startswith("ring/")


def test_one_node_tree_is_a_chain_and_runs_when_forced():
    """NCCL_ALGO=Tree on one DGX H100: the tree is a chain through the node's GPUs; the free tuner prefers NVLS."""
    ctx = _ctx(*ONE_DGX_H100, "communication.nccl_algo=Tree")
    assert ctx.schedule("all_reduce", 1 << 30).algorithm.startswith("tree/")
    assert ctx.collective_time("all_reduce", 1 << 30) > _ctx(*ONE_DGX_H100).collective_time("all_reduce", 1 << 30)


def test_nothing_left_to_run_ends_the_run_as_nccl_fails_the_call():
    ctx = _ctx(*ONE_DGX_H100, "communication.nccl_algo=NVLSTree")  # tuning.cc: no NVLSTree on a single node
    with pytest.raises(InfeasibleError, match="no algorithm/protocol available"):
        ctx.schedule("all_reduce", 1e6)
    with pytest.raises(InfeasibleError):
        nccl_choice("all_reduce", 1e6, 8, 1, NodeFabric(), NcclEnable(algo="NVLS"))


@pytest.mark.parametrize("overrides, key", [
    (["communication.backend=textbook", "communication.nccl_algo=Ring"], "communication.nccl_algo"),
    (["communication.backend=gloo", "communication.nccl_proto=LL"], "communication.nccl_proto"),
    (["communication.strategy=hierarchical", "communication.nccl_algo=Ring"], "communication.nccl_algo"),
    (["communication.nccl_algo=Rings"], "communication.nccl_algo"),
    (["communication.strategy=tree"], "communication.strategy"),
    (["communication.strategy=halving_doubling"], "communication.strategy"),
    (["communication.backend=gloo", "communication.nccl_socket_threads=2"], "communication.nccl_socket_threads"),
    (["communication.nccl_socket_threads=2"], "communication.nccl_socket_threads"),  # InfiniBand NICs: no sockets
    (["communication.ddp_average=per_bucket", "communication.bucketing=fusion"], "communication.ddp_average"),
    (["communication.ddp_average=per_bucket", "communication.compression={method: fp16}"],
     "communication.ddp_average"),
])
def test_refused_where_nothing_would_read_it(overrides, key):
    with pytest.raises(ScenarioError) as err:
        load_scenario(IB, NCCL + overrides)
    assert key in {i.path for i in err.value.issues}
