"""A TPU slice as a torus3d fabric of one-chip nodes (catalog tpu-v4 / tpu-v5p): six ICI links per chip, the
wrap-around links that the optical circuit switches close across the cube faces, the slice's bisection."""
from __future__ import annotations

import math

import pytest
import yaml

from simdist.engine.context import build_context
from simdist.io.load import load_data
from simdist.scenario import Fidelity
from simdist.topology.bisection import bisection_bandwidth_Bps


def _topology(tpu: str, dims: list[int]):
    chips = math.prod(dims)
    data = yaml.safe_load(f"""
name: slice
cluster:
  nodes:
    - {{count: {chips}, gpu: {tpu}, gpus_per_node: 1, intra_node: {tpu}, nic: {{link: ici-{tpu[4:]}}}}}
  fabric: {{topology: torus3d, dims: {dims}, link: ici-{tpu[4:]}}}
workload: {{benchmark: {{op: all_reduce, sizes: ["1 MB"]}}}}
communication: {{strategy: torus3d, backend: textbook}}
""")
    return build_context(load_data(data), Fidelity.ESTIMATE).topology


def _index(x: int, y: int, z: int, dims: list[int]) -> int:
    return (x * dims[1] + y) * dims[2] + z


@pytest.mark.parametrize("tpu,dims", [("tpu-v4", [4, 4, 4]), ("tpu-v5p", [8, 4, 4])])
def test_every_chip_has_six_ici_links_to_six_distinct_neighbours(tpu, dims):
    t = _topology(tpu, dims)
    link_Bps = {"tpu-v4": 45e9, "tpu-v5p": 100e9}[tpu]
    n = math.prod(dims)
    for i in range(n):
        fabric = [(v, d) for _, v, d in t.graph.edges(f"node{i}/nic0", data=True) if d["kind"] == "fabric"]
        assert len(fabric) == 6 and len({v for v, _ in fabric}) == 6
        assert all(d.get("multiplicity", 1) == 1 for _, d in fabric)
        assert all(d["link"].name == f"ici-{tpu[4:]}" and d["link"].bandwidth_Bps == link_Bps for _, d in fabric)
    edges = [d for _, _, d in t.graph.edges(data=True) if d["kind"] == "fabric"]
    assert len(edges) == 3 * n  # six per chip, each shared by two chips
    assert t.graph.graph["fabric"]["kind"] == "torus3d" and tuple(t.graph.graph["fabric"]["dims"]) == tuple(dims)
    assert t.graph.graph["fabric"]["complete"] is True


@pytest.mark.parametrize("dims", [[4, 4, 4], [8, 4, 4]])
def test_wraparound_closes_every_dimension(dims):
    """The cube faces' links: chip (X-1, y, z) is a neighbour of (0, y, z), and likewise along y and z."""
    t = _topology("tpu-v4", dims)
    X, Y, Z = dims
    for a, b in [((0, 1, 2), (X - 1, 1, 2)), ((2, 0, 1), (2, Y - 1, 1)), ((1, 2, 0), (1, 2, Z - 1))]:
        assert t.graph.has_edge(f"node{_index(*a, dims)}/nic0", f"node{_index(*b, dims)}/nic0")
    # and no link skips a position: (0, 0, 0) and (2, 0, 0) are two hops apart
    assert not t.graph.has_edge("node0/nic0", f"node{_index(2, 0, 0, dims)}/nic0")


def test_chip_reaches_its_router_over_the_six_links_worth_without_latency():
    t = _topology("tpu-v4", [4, 4, 4])
    ((_, hub, edge),) = t.graph.edges("node0/gpu0", data=True)
    assert edge["link"].bandwidth_Bps == 6 * 45e9 and edge["link"].latency_s == 0
    router = t.graph.edges[hub, "node0/nic0"]["link"]
    assert router.bandwidth_Bps >= 6 * 45e9 and router.latency_s == 0


def test_a_full_v4_pod_has_googles_bisection_bandwidth():
    """16x16x16 chips: a cut across one side crosses 16 x 16 rings twice, 512 ICI links of 45 GB/s = 23.04 TB/s at
    line rate (the effective figure is 0.90 of it); Google's TPU v4 documentation: 'bisection bandwidth per Pod
    24 TB/s'."""
    effective = bisection_bandwidth_Bps(_topology("tpu-v4", [16, 16, 16]))
    assert effective == pytest.approx(512 * 45e9 * 0.90, rel=1e-12)
    assert effective / 0.90 == pytest.approx(24e12, rel=0.05)
