"""Loading files: every malformed input is one ScenarioError naming the path; check_file lists all issues."""
from __future__ import annotations

import copy
import pytest
import yaml

from simdist.errors import ScenarioError
from simdist.io.load import check_file, load_scenario

from tests.io.conftest import MINIMAL


def _error(path, overrides=()) -> ScenarioError:
    with pytest.raises(ScenarioError) as e:
        load_scenario(path, overrides)
    return e.value


def _with(change: dict) -> dict:
    d = copy.deepcopy(MINIMAL)
    for dotted, value in change.items():
        node = d
        parts = dotted.split(".")
        for p in parts[:-1]:
            node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
        node[parts[-1]] = value
    return d


def test_missing_file(tmp_path):
    err = _error(tmp_path / "nope.yaml")
    assert "does not exist" in str(err) and "nope.yaml" in str(err)


def test_folder_instead_of_file(tmp_path):
    assert "folder" in str(_error(tmp_path))


def test_unreadable_file(write, monkeypatch):
    p = write(MINIMAL)

    def deny(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(type(p), "read_text", deny)
    err = _error(p)
    assert "cannot read" in str(err) and "Permission denied" in str(err)


def test_binary_file(tmp_path):
    p = tmp_path / "bin.yaml"
    p.write_bytes(b"\xff\xfe\x00garbage")
    assert "UTF-8" in str(_error(p))


def test_broken_yaml_says_the_line(write):
    p = write("name: x\ncluster:\n  nodes: [1, 2\nworkload: {}\n")
    err = _error(p)
    assert "not valid YAML" in str(err) and "line 4" in str(err)


@pytest.mark.parametrize("text, words", [("", "empty"), ("- 1\n- 2\n", "list"), ("just a string\n", "str")])
def test_top_level_must_be_a_mapping(write, text, words):
    err = _error(write(text))
    assert err.issues[0].path == "" and words in str(err) and "mapping" in str(err)


def test_duplicate_keys_are_reported(write):
    p = write("cluster: {}\nworkload: {}\ncluster: {}\n")
    assert any(i.path == "cluster" and "duplicate" in i.message for i in check_file(p))


@pytest.mark.parametrize("change, path, words", [
    ({"clustre": 1}, "clustre", "did you mean 'cluster'"),
    ({"cluster.nodes.0.nic.bandwith": "1 Gb/s"}, "cluster.nodes.0.nic.bandwith", "did you mean 'bandwidth'"),
    ({"cluster.fabric.topolgy": "ring"}, "cluster.fabric.topolgy", "did you mean 'topology'"),
    ({"workload.model": {"gpt": {"layers": 1, "hidden": 8, "heads": 2, "vocab": 3, "hiden": 9}}},
     "workload.model.gpt.hiden", "did you mean 'hidden'"),
    ({"cluster.nodes.0.count": "8"}, "cluster.nodes.0.count", "integer"),
    ({"cluster.nodes.0.count": 0}, "cluster.nodes.0.count", "positive integer"),
    ({"cluster.nodes.0.count": -3}, "cluster.nodes.0.count", "positive integer"),
    ({"cluster.nodes.0.count": 2.5}, "cluster.nodes.0.count", "integer"),
    ({"cluster.nodes.0.count": True}, "cluster.nodes.0.count", "integer"),
    ({"cluster.nodes.0.nic.bandwidth": 100}, "cluster.nodes.0.nic.bandwidth", "bandwidth like"),
    ({"cluster.nodes.0.nic.bandwidth": "100Gbps"}, "cluster.nodes.0.nic.bandwidth", "did you mean '100 Gb/s'"),
    ({"cluster.nodes.0.nic.bandwidth": "100 GB"}, "cluster.nodes.0.nic.bandwidth", "unknown unit"),
    ({"cluster.nodes.0.nic.latency": "3"}, "cluster.nodes.0.nic.latency", "unit is missing"),
    ({"cluster.nodes.0.nic.efficiency": 0}, "cluster.nodes.0.nic.efficiency", "positive"),
    ({"cluster.nodes.0.nic.efficiency": 1.2}, "cluster.nodes.0.nic.efficiency", "<= 1"),
    ({"cluster.nodes.0.nic.efficiency": ".9"}, "cluster.nodes.0.nic.efficiency", "number"),
    ({"cluster.nodes.0.nic.transport": "infiniband"}, "cluster.nodes.0.nic.transport", "'rdma' or 'tcp'"),
    ({"cluster.nodes.0.nic": 5}, "cluster.nodes.0.nic", "catalog key or a mapping"),
    ({"cluster.nodes.0.nic": {"latency": "1 us"}}, "cluster.nodes.0.nic.bandwidth", "required"),
    ({"cluster.nodes.0.gpu": "a100"}, "cluster.nodes.0.gpu", "'a100-sxm4-80gb'"),
    ({"cluster.nodes.0.intra_node": "nvswitch"}, "cluster.nodes.0.intra_node", "'nvswitch-a100'"),
    ({"cluster.nodes.0.nic": "ib-hdr2"}, "cluster.nodes.0.nic", "'ib-hdr'"),
    ({"cluster.fabric.link": "eth100"}, "cluster.fabric.link", "'eth-100g'"),
    ({"cluster.fabric.link": {"link": "ib"}}, "cluster.fabric.link.link", "'ib-hdr'"),
    ({"cluster.nodes.0.intra_node": {"base": "nvs"}}, "cluster.nodes.0.intra_node.base", "'nvswitch-a100'"),
    ({"cluster.nodes.0.intra_node": {"bandwidth": "1 GB/s", "layout": "pcie"}}, "cluster.nodes.0.intra_node.layout", "switch"),
    ({"cluster.nodes": []}, "cluster.nodes", "at least 1"),
    ({"cluster.nodes": {"count": 1}}, "cluster.nodes", "list"),
    ({"cluster.fabric.topology": "fattree"}, "cluster.fabric.topology", "did you mean 'fat_tree'"),
    ({"cluster.fabric.oversubscription": 0}, "cluster.fabric.oversubscription", "expected a positive number"),
    ({"cluster.fabric.oversubscription": -2}, "cluster.fabric.oversubscription", "expected a positive number"),
    ({"cluster.nodes.0.nic.efficiency": 2}, "cluster.nodes.0.nic.efficiency", "expected a number <= 1"),
    ({"cluster.fabric.levels": 4}, "cluster.fabric.levels", "2"),
    ({"workload.model": "resnet"}, "workload.model", "'resnet50'"),
    ({"workload.model": ["resnet50"]}, "workload.model", "catalog key"),
    ({"workload.model": {"torch": "no colon", "input_shape": [3]}}, "workload.model.torch", "module"),
    ({"workload.precision": "fp64"}, "workload.precision", "expected one of"),
    ({"workload.benchmark": {"op": "all_reduce", "sizes": [1024]}}, "workload.benchmark.sizes.0", "bare number"),
    ({"communication.overlap": "yes"}, "communication.overlap", "true or false"),
    ({"communication.bucket_size": "25"}, "communication.bucket_size", "unit is missing"),
    ({"communication.compression.ratio": 2}, "communication.compression.ratio", "<= 1"),
    ({"communication.ps.servers": 0}, "communication.ps.servers", "positive"),
    ({"training.parallelism.zero": 4}, "training.parallelism.zero", "<= 3"),
    ({"training.staleness": -1}, "training.staleness", ">= 0"),
    ({"failures.events": [{"at": "1 h", "kind": "node_down", "target": "rack:1"}]}, "failures.events.0.target",
     "'node:N'"),
    ({"failures.events": [{"at": 3600, "kind": "node_down", "target": "node:1"}]}, "failures.events.0.at",
     "duration like"),
    ({"failures.random.gpu_mtbf": "0 h"}, "failures.random.gpu_mtbf", "positive"),
    ({"run.fidelity": "fast"}, "run.fidelity", "'simulate' or 'estimate'"),
    ({"name": ""}, "name", "non-empty"),
])
def test_malformed_values_name_the_path(write, change, path, words):
    err = _error(write(_with(change)))
    assert path in [i.path for i in err.issues], str(err)
    assert words in str(err), str(err)


def test_required_sections(write):
    err = _error(write({"name": "x"}))
    assert [i.path for i in err.issues] == ["cluster", "workload"]
    assert all("required" in i.message for i in err.issues)


def test_check_file_reports_all_issues_in_file_order(write):
    text = (
        "name: x\n"
        "cluster:\n"
        "  nodes:\n"
        "    - count: 0\n"                                   # line 4
        "      gpu: a100\n"                                  # line 5
        "      gpus_per_node: 4\n"
        "      intra_node: nvswitch-a100\n"
        "      nic: {bandwidth: 100Gbps}\n"                  # line 8
        "workload:\n"
        "  model: resnet50\n"
        "  batch_per_gpu: 64\n"
        "communication: {overlap: maybe, bucket_size: 25}\n"  # line 12
        "run: {iteratons: 3}\n"                              # line 13
    )
    issues = check_file(write(text))
    assert [i.path for i in issues] == [
        "cluster.nodes.0.count", "cluster.nodes.0.gpu", "cluster.nodes.0.nic.bandwidth",
        "communication.overlap", "communication.bucket_size", "run.iteratons"]
    assert check_file(write(MINIMAL, "ok.yaml")) == []


def test_error_message_lists_every_issue(write):
    err = _error(write(_with({"cluster.nodes.0.count": 0, "run.seed": -1})))
    assert "cluster.nodes.0.count" in str(err) and "run.seed" in str(err)


def test_relative_paths_resolve_against_the_scenario_folder(tmp_path, write, monkeypatch):
    (tmp_path / "sub" / "prof").mkdir(parents=True)
    (tmp_path / "sub" / "prof" / "c.json").write_text("{}")
    (tmp_path / "sub" / "net.graphml").write_text("<graphml/>")
    d = _with({"calibration": "prof/c.json", "cluster.fabric": {"topology": "custom", "graphml": "net.graphml"}})
    p = write(d, "sub/s.yaml")
    monkeypatch.chdir(tmp_path)
    s = load_scenario(p)
    assert s.calibration == str(tmp_path / "sub" / "prof" / "c.json")
    assert s.cluster.fabric.graphml == str(tmp_path / "sub" / "net.graphml")
    assert s.name == "s"


def test_scenario_and_check_agree(write):
    p = write(yaml.safe_dump(_with({"cluster.nodes.0.count": 3})))
    assert check_file(p) == [] and load_scenario(p).cluster.num_nodes == 3
