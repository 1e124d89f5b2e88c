"""Defaults a user would expect: no intra_node needed, a documented PCIe interior otherwise, named in the summary."""
from __future__ import annotations

import copy

from simdist.engine.simulation import simulate
from simdist.io.load import load_data
from simdist.report import cluster_summary

REAL_CATALOGS = True
BASE = {"cluster": {"nodes": [{"count": 2, "gpu": "a100-sxm4-40gb", "nic": "ib-hdr"}]},
        "workload": {"model": "resnet50", "batch_per_gpu": 16}, "run": {"iterations": 3, "warmup": 1}}


def test_one_gpu_node_needs_no_intra_node():
    s = load_data(copy.deepcopy(BASE))
    g = s.cluster.node_groups[0]
    assert g.gpus_per_node == 1 and g.intra_node.key == "pcie-gen4" and g.intra_node_default
    assert simulate(s, "estimate").iteration_time_s > 0


def test_multi_gpu_node_gets_the_pcie_default_and_the_summary_names_it():
    d = copy.deepcopy(BASE)
    d["cluster"]["nodes"][0]["gpus_per_node"] = 4
    s = load_data(d)
    summary, _ = cluster_summary(s)
    assert summary["intra-node"] == "pcie-gen4 (default: no intra_node given)"
    result = simulate(s, "estimate").to_dict()
    assert result["links_used"]["intra_node"][0] == {**result["links_used"]["intra_node"][0],
                                                     "intra_node": "pcie-gen4", "default": True, "layout": "pcie"}
    d["cluster"]["nodes"][0]["intra_node"] = "pcie-gen4"
    explicit = load_data(d)
    assert not explicit.cluster.node_groups[0].intra_node_default
    assert cluster_summary(explicit)[0]["intra-node"] == "pcie-gen4"
    assert simulate(explicit, "estimate").iteration_time_s == simulate(s, "estimate").iteration_time_s
