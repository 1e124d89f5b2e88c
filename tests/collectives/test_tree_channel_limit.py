"""NCCL's per-channel tree throughput (tuning.cc perChMaxTreeBws) on two nodes: the links alone would let
the double binary tree run near twice the NIC rate, NCCL's tree channels cannot; the tuner then keeps the
ring where NCCL does (DGX A100 with 4 or 8 HDR NICs) and the tree where the NICs are slow (4 x 100G EFA)."""
from __future__ import annotations

import pytest

from simdist.collectives.backends import nccl_candidate
from simdist.collectives.nccl import nccl_predicted_time_s
from simdist.collectives.protocols import tree_algbw_cap_Bps
from simdist.engine.context import build_context
from simdist.io.load import load_scenario
from simdist.scenario import Fidelity

A100 = "validation/published/scenarios/nccl-dgx-a100.yaml"


def _ctx(*overrides):
    return build_context(load_scenario(A100, ["cluster.nodes.0.count=2", *overrides]), Fidelity.ESTIMATE)


def test_cap_values_are_nccls():
    # Ampere on 2 nodes: 23.6 GB/s of tree bus bandwidth per channel, algbw half of it, one channel per NIC
    assert tree_algbw_cap_Bps("Simple", 1, 8, 2) == pytest.approx(0.5 * 8 * 23.6e9)
    assert tree_algbw_cap_Bps("Simple", 0, 4, 5) == pytest.approx(0.5 * 4 * 10.0e9)  # Volta, 3+ nodes
    assert tree_algbw_cap_Bps("LL", 1, 8, 2) is None and tree_algbw_cap_Bps("Simple", None, 8, 2) is None


@pytest.mark.parametrize("nics,bw", [(8, "200 Gb/s"), (4, "200 Gb/s")])
def test_dgx_a100_two_nodes_keeps_the_ring(nics, bw):
    ctx = _ctx(f"cluster.nodes.0.nic.count={nics}", f"cluster.nodes.0.nic.bandwidth={bw}")
    fabric, timer = ctx._tuning()["fabric"], ctx._tuning()["timer"]
    assert fabric.arch_index == 1  # NVLink3: Ampere
    size = 4e9
    free = timer(nccl_candidate("all_reduce", "tree", "Simple", size, ctx.group, fabric=fabric, channels=ctx.channels))
    held = timer(nccl_candidate("all_reduce", "tree", "Simple", size, ctx.group, fabric=fabric, channels=ctx.channels,
                                timer=timer))
    cap = tree_algbw_cap_Bps("Simple", 1, nics, 2)
    assert free < size / cap <= held  # the links alone would beat the channels' limit
    assert held == pytest.approx(size / cap, rel=0.02)  # held to it (plus the fill and launch)
    assert ctx.schedule("all_reduce", size).algorithm.startswith("ring/")
    # NCCL's own closed form agrees: ring
    t = {a: nccl_predicted_time_s("all_reduce", a, "Simple", size, 16, 2, fabric) for a in ("ring", "tree")}
    assert t["ring"] < t["tree"]


def test_slow_nics_keep_the_tree_on_two_nodes():
    ctx = _ctx("cluster.nodes.0.gpu=a100-sxm4-40gb", "cluster.nodes.0.nic.count=4",
               "cluster.nodes.0.nic.bandwidth=100 Gb/s")
    assert ctx.schedule("all_reduce", 1e9).algorithm.startswith("tree/")
