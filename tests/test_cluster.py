"""Placement, process groups, PS server placement and the choice of network model."""
from __future__ import annotations

import pytest
import simpy

from simdist.cluster import Placement, build_network, data_parallel_group, ps_server_endpoints
from simdist.collectives.schedule import CollectiveOp, Schedule, Step, Transfer
from simdist.errors import InfeasibleError
from simdist.hardware.specs import (ClusterSpec, FabricSpec, GpuSpec, IntraNodeLayout, IntraNodeSpec, LinkSpec,
                                    NicSpec, NodeGroupSpec, TopologyKind)
from simdist.network.analytical import AnalyticalNetwork
from simdist.network.flows import FlowNetwork
from simdist.topology.build import build_topology

GPU = GpuSpec("g", "g", "x", {"fp32": 1e12}, 80e9, 2e12, 400.0, 1.0)
INTRA = IntraNodeSpec("sw", IntraNodeLayout.SWITCH, LinkSpec(300e9, 2e-6))
NIC = NicSpec(LinkSpec(25e9, 3e-6, 0.9))


def cluster(*groups: tuple[int, int], kind=TopologyKind.SINGLE_SWITCH, **fabric) -> ClusterSpec:
    return ClusterSpec(tuple(NodeGroupSpec(c, GPU, per, INTRA, NIC) for c, per in groups),
                       FabricSpec(kind, LinkSpec(25e9, 1e-6), **fabric))


def test_identity_placement_on_a_mixed_cluster():
    p = Placement.identity(cluster((2, 4), (1, 2)))
    assert p.size == 10
    assert [p.node(r) for r in range(10)] == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert p.endpoint(7) == 7 and p.gpu(7) == 7


def test_placement_group_splits_by_node_in_rank_order():
    p = Placement((4, 0, 5, 1), (0, 0, 0, 0, 1, 1, 1, 1), tuple(range(8)))
    g = p.group()
    assert g.ranks == (4, 0, 5, 1)
    assert g.nodes == ((4, 5), (0, 1))


def test_data_parallel_group():
    c = cluster((2, 4), (1, 2))
    g = data_parallel_group(c, build_topology(c))
    assert g.ranks == tuple(range(10))
    assert g.nodes == ((0, 1, 2, 3), (4, 5, 6, 7), (8, 9))


def test_colocated_servers_spread_one_per_node_first():
    topo = build_topology(cluster((8, 4)))
    assert ps_server_endpoints(topo, 4, "colocated") == (0, 8, 16, 24)
    assert ps_server_endpoints(topo, 8, "colocated") == tuple(range(0, 32, 4))
    assert ps_server_endpoints(topo, 10, "colocated") == tuple(range(0, 32, 4)) + (1, 17)
    with pytest.raises(InfeasibleError, match="at most one per GPU"):  # io.resolve refuses it in a scenario
        ps_server_endpoints(topo, 33, "colocated")


def test_dedicated_servers_are_the_hosts_after_the_gpus():
    c = cluster((2, 4))
    topo = build_topology(c, server_hosts=2, server_nic=NIC)
    assert ps_server_endpoints(topo, 2, "dedicated") == (8, 9)
    with pytest.raises(AssertionError, match="3 dedicated server endpoints"):  # io.resolve builds as many hosts
        ps_server_endpoints(topo, 3, "dedicated")
    with pytest.raises(ValueError, match="somewhere"):
        ps_server_endpoints(topo, 1, "somewhere")


def test_build_network_by_fidelity():
    topo = build_topology(cluster((2, 4)))
    env = simpy.Environment()
    assert isinstance(build_network("estimate", env, topo), AnalyticalNetwork)
    assert isinstance(build_network("simulate", env, topo), FlowNetwork)
    with pytest.raises(ValueError, match="exact"):
        build_network("exact", env, topo)


def test_both_models_agree_on_a_ring_over_a_built_fat_tree():
    c = cluster((8, 4), kind=TopologyKind.FAT_TREE, nodes_per_leaf=2)
    topo = build_topology(c)
    n, size = c.num_gpus, 1e8
    step = Step(tuple(Transfer(i, (i + 1) % n, size / n) for i in range(n)), repeat=2 * (n - 1))
    ring = Schedule(CollectiveOp.ALL_REDUCE, "ring", size, ((step,),))
    env = simpy.Environment()
    flows = build_network("simulate", env, topo).schedule_time(ring)
    estimate = build_network("estimate", env, topo).schedule_time(ring)
    assert flows == pytest.approx(estimate, rel=1e-9)
    # the NIC (25 GB/s x 0.9) is the bottleneck of the pipelined ring
    assert flows > 2 * (n - 1) / n * size / (25e9 * 0.9)
