"""Rails: GPU j of g uses NIC floor(j*m/g) on both ends, paths stay least-cost, a machine pair's rails
take distinct spines, ring_channels, deterministic across processes; NVLink bridge pairs (12 bricks)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from simdist.collectives.schedule import Group
from simdist.topology.build import build_topology
from simdist.topology.intranode import rail_index
from simdist.topology.routing import Router, ring_channels
from tests.topology.factory import DGX_A100, PAIRS, UNIFORM, cluster


def vpath(t, ids):
    ends = t.links.ends
    return [ends[ids[0]][0]] + [ends[i][1] for i in ids]


def nics_on(path):
    return [v for v in path if "/nic" in v]


@pytest.mark.parametrize("g, m, expected", [(8, 8, list(range(8))), (8, 4, [0, 0, 1, 1, 2, 2, 3, 3]),
                                            (8, 1, [0] * 8), (8, 3, [0, 0, 0, 1, 1, 1, 2, 2]),
                                            (2, 4, [0, 2])])
def test_rail_index(g, m, expected):
    assert [rail_index(j, g, m) for j in range(g)] == expected


def test_eight_nics_eight_distinct_rails_each_side():
    t = build_topology(cluster(2, "single_switch", DGX_A100, nics=8))
    r = Router(t)
    used = [nics_on(vpath(t, r.path(j, 8 + j))) for j in range(8)]
    assert used == [[f"node0/nic{j}", f"node1/nic{j}"] for j in range(8)]


def test_four_nics_pairs_of_gpus_share_one():
    t = build_topology(cluster(2, "fat_tree", DGX_A100, nics=4, nodes_per_leaf=1))
    r = Router(t)
    for j in range(8):
        for key in range(5):
            assert nics_on(vpath(t, r.path(j, 8 + j, key))) == [f"node0/nic{j // 2}", f"node1/nic{j // 2}"]
    # the destination's rail, not the source's, is where a flow enters
    assert nics_on(vpath(t, r.path(0, 8 + 7))) == ["node0/nic0", "node1/nic3"]


def test_rail_paths_stay_least_cost():
    t = build_topology(cluster(4, "fat_tree", DGX_A100, nics=2, nodes_per_leaf=2))
    r = Router(t)
    cost = {}
    for u, v, d in t.graph.edges(data=True):
        from simdist.topology.search import edge_cost
        cost[(u, v)] = cost[(v, u)] = edge_cost(d["link"].effective_Bps * d.get("multiplicity", 1))
    for s in range(8):
        for d in (9, 14, 20, 31):
            p = vpath(t, r.path(s, d, 3))
            assert sum(cost[(a, b)] for a, b in zip(p, p[1:])) == r.distance(t.endpoints[s], t.endpoints[d])
            assert nics_on(p) == [f"node0/nic{rail_index(s, 8, 2)}", f"node{d // 8}/nic{rail_index(d % 8, 8, 2)}"]


def test_rails_of_a_machine_pair_take_distinct_spines():
    t = build_topology(cluster(8, "fat_tree", DGX_A100, nics=8, nodes_per_leaf=4, oversubscription=4.0))
    assert t.graph.graph["fabric"]["spines"] == 8  # one uplink per NIC-rate: a collision would halve a rail
    r = Router(t)
    for a, b in [(0, 4), (1, 5), (7, 2)]:
        spines = [next(v for v in vpath(t, r.path(8 * a + j, 8 * b + j)) if v.startswith("spine")) for j in range(8)]
        assert len(set(spines)) == 8


def test_ring_channels():
    t = build_topology(cluster(3, "single_switch", DGX_A100, nics=4))
    assert ring_channels(t, Group.flat(range(24), 8).nodes) == 4
    assert ring_channels(t, Group.flat(range(8), 8).nodes) == 1  # one node
    assert ring_channels(t, ((0, 1), (8, 9))) == 1  # both ranks of a node on NIC 0
    assert ring_channels(t, ((0, 2, 4), (8, 10, 12))) == 3
    t1 = build_topology(cluster(3, "single_switch", DGX_A100, nics=1))
    assert ring_channels(t1, Group.flat(range(24), 8).nodes) == 1


def test_nvlink_pairs_joined_by_the_whole_bridge():
    t = build_topology(cluster(1, "single_switch", PAIRS, gpus=4))
    i = t.links.index[("node0/gpu0", "node0/gpu1")]
    assert t.links.capacity_Bps[i] == pytest.approx(PAIRS.gpu_link.effective_Bps)  # gpu_link: the pair's bridge set
    assert vpath(t, Router(t).path(0, 1)) == ["node0/gpu0", "node0/gpu1"]


_SCRIPT = """
from tests.topology.factory import cluster, DGX_A100
from simdist.topology.build import build_topology
from simdist.topology.routing import Router
t = build_topology(cluster(8, "fat_tree", DGX_A100, nics=8, nodes_per_leaf=2))
r = Router(t)
print([r.path(k % 64, (k * 7 + 3) % 64, k) for k in range(300)])
"""


def test_rail_paths_deterministic_across_processes():
    outs = {subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": seed, "PYTHONPATH": "."}).stdout for seed in ("1", "2")}
    assert len(outs) == 1 and len(next(iter(outs))) > 100


def test_without_nics_nothing_is_railed():
    t = build_topology(cluster(2, "single_switch", UNIFORM, gpus=2, nics=1))
    assert t.graph.nodes["node0/gpu1"]["rail"] == "node0/nic0"
