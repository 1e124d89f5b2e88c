"""The loader against the real catalogs (hardware, models, topology validation), no fakes."""
from __future__ import annotations

import copy

import pytest

from simdist.errors import ScenarioError
from simdist.io.load import check_data, load_data, load_scenario
from tests.io.conftest import resolved

REAL_CATALOGS = True  # conftest: do not swap in the fake catalogs for this module

pytest.importorskip("simdist.io.catalog")
pytest.importorskip("simdist.workload.inline")
pytest.importorskip("simdist.topology.validate")


def test_design_example_with_real_catalogs(example_file, example_dict):
    s = resolved(example_dict, example_file.parent)
    g = s.cluster.node_groups[0]
    assert g.gpu.key == "a100-sxm4-80gb" and g.gpu.memory_bytes > 70e9
    assert g.intra_node.key == "nvswitch-a100"
    assert g.nic.link.bandwidth_Bps == pytest.approx(25e9) and g.nic.link.latency_s == pytest.approx(3e-6)
    assert 0 < g.nic.link.efficiency <= 1 and g.nic.link.transport == "rdma"
    assert s.workload.model.name == "resnet50" and 20e6 < s.workload.model.params < 30e6
    assert s.cluster.num_gpus == 64 and s.training.parallelism.dp == 64


def test_real_catalog_errors_are_issues(example_dict):
    d = copy.deepcopy(example_dict)
    del d["calibration"]
    d["cluster"]["nodes"][0]["gpu"] = "a100"
    d["workload"]["model"] = "resnet-50"
    paths = [i.path for i in check_data(d)]
    assert paths == ["cluster.nodes.0.gpu", "workload.model"]


def test_inline_layers_error_is_placed(example_dict):
    d = copy.deepcopy(example_dict)
    del d["calibration"]
    d["workload"]["model"] = {"layers": [{"name": "a", "kind": "linear", "params": "many"}]}
    with pytest.raises(ScenarioError) as e:
        load_data(d)
    assert all(i.path.startswith("workload.model.layers") for i in e.value.issues), str(e.value)


def test_real_parametric_gpt_and_benchmark(example_dict):
    d = copy.deepcopy(example_dict)
    del d["calibration"]
    d["workload"]["model"] = {"gpt": {"layers": 2, "hidden": 256, "heads": 4, "vocab": 1000}}
    s = resolved(d)
    assert s.workload.model.params > 2 * 12 * 256 * 256 and s.workload.model.tokens_per_sample == 2048
    d["workload"] = {"benchmark": {"op": "all_reduce", "sizes": ["1 MB", "1 GB"]}}
    assert resolved(d).workload.benchmark.sizes_bytes == (1e6, 1e9)
