"""The DESIGN.md example resolves to the right SI numbers; defaults and cross-field rules."""
from __future__ import annotations

import copy

import pytest

from simdist.errors import ScenarioError
from simdist.hardware.specs import IntraNodeLayout, TopologyKind
from simdist.io.load import check_data, load_data, load_scenario
from simdist.scenario import CollectiveOp, Fidelity, Precision, StrategyKind

from tests.io.conftest import A100, LINKS, MINIMAL, NVSWITCH, resolved


def _paths(err: ScenarioError) -> list[str]:
    return [i.path for i in err.issues]


def test_design_example_is_refused_by_the_run_rules(example_file):
    """Every key resolves, but as one scenario it does not run: ps.servers under ring, failures without
    run.duration. Loading (check, run) says both at once, in file order."""
    with pytest.raises(ScenarioError) as err:
        load_scenario(example_file)
    assert _paths(err.value) == ["communication.ps.servers", "run.duration"]


def test_design_example_resolves_to_si(example_file, example_dict):
    s = resolved(example_dict, example_file.parent)
    assert s.name == "resnet50-64xa100-ring"
    c = s.cluster
    assert c.num_nodes == 8 and c.num_gpus == 64
    g = c.node_groups[0]
    assert g.gpu is A100 and g.intra_node is NVSWITCH and g.gpus_per_node == 8
    assert g.nic.count == 1
    assert g.nic.link.bandwidth_Bps == pytest.approx(25e9)
    assert g.nic.link.latency_s == pytest.approx(3e-6)
    assert g.nic.link.efficiency == 0.9  # rdma default from the catalog
    assert g.nic.link.transport == "rdma"
    f = c.fabric
    assert f.topology is TopologyKind.FAT_TREE and f.nodes_per_leaf == 4 and f.oversubscription == 1.0
    assert f.link.bandwidth_Bps == pytest.approx(25e9) and f.link.latency_s == pytest.approx(1e-6)
    assert f.link.efficiency == 0.9
    w = s.workload
    assert w.model.name == "resnet50" and w.model.params == 25_548_624 and w.model.tokens_per_sample == 2048
    assert w.batch_per_gpu == 64 and w.global_batch is None
    assert w.precision is Precision.FP16 and w.grad_dtype is Precision.FP32
    assert s.training.parallelism.dp == 64 and s.training.parallelism.tp == 1
    cm = s.communication
    assert cm.strategy is StrategyKind.RING and cm.ps_servers == 4 and cm.bucket_size_bytes == 25e6
    assert cm.overlap is True and cm.fusion_cycle_s == 0.0
    ev = s.failures.events
    assert [e.at_s for e in ev] == [7200.0, 3600.0, 0.0]
    assert ev[1].factor == 0.5 and ev[1].duration_s == 600.0 and ev[2].slowdown == 1.3
    assert s.failures.random.gpu_mtbf_s == pytest.approx(50000 * 3600.0)
    assert s.failures.random.repair_s == 1800.0
    r = s.failures.recovery
    assert (r.checkpoint_interval_s, r.checkpoint_write_s, r.restart_s) == (1800.0, 60.0, 300.0)
    assert s.run.iterations == 50 and s.run.fidelity is Fidelity.SIMULATE
    assert s.calibration == str(example_file.parent / "calibration" / "my-cluster.json")


def test_minimal_defaults():
    s = load_data(MINIMAL, name="mini")
    assert s.name == "mini"
    assert s.cluster.fabric.topology is TopologyKind.SINGLE_SWITCH
    nic = s.cluster.node_groups[0].nic.link
    assert (nic.bandwidth_Bps, nic.latency_s, nic.efficiency) == (12.5e9, 2e-6, 0.9)
    assert s.cluster.fabric.link == nic  # fabric.link defaults to the first group's NIC link
    assert s.training.parallelism.dp == 8  # all GPUs
    assert s.run.iterations == 50 and s.run.warmup == 2 and s.failures is None


def test_tcp_nic_takes_tcp_defaults_and_efficiency_overrides():
    d = copy.deepcopy(MINIMAL)
    d["cluster"]["nodes"][0]["nic"] = {"bandwidth": "25 Gb/s", "transport": "tcp", "count": 2}
    d["cluster"]["fabric"] = {"link": {"bandwidth": "100 Gb/s", "efficiency": 0.5}}
    s = load_data(d)
    nic = s.cluster.node_groups[0].nic
    assert nic.count == 2 and nic.line_link.latency_s == 25e-6 and nic.line_link.efficiency == 0.6 and not nic.gpudirect
    fab = s.cluster.fabric.link
    assert fab.efficiency == 0.5 and fab.latency_s == 25e-6 and fab.transport == "tcp"


def test_catalog_link_keys_and_overrides():
    d = copy.deepcopy(MINIMAL)
    d["cluster"]["nodes"][0]["nic"] = "ib-hdr"
    d["cluster"]["fabric"] = {"link": {"link": "ib-hdr", "efficiency": 0.75}}
    s = load_data(d)
    assert s.cluster.node_groups[0].nic.link is LINKS["ib-hdr"]
    assert s.cluster.fabric.link == LINKS["ib-hdr"].with_(efficiency=0.75)


def test_inline_intra_node_and_layout_default_gpu_count():
    d = copy.deepcopy(MINIMAL)
    g = d["cluster"]["nodes"][0]
    g["intra_node"] = {"bandwidth": "300 GB/s", "latency": "2 us"}
    s = load_data(d)
    intra = s.cluster.node_groups[0].intra_node
    assert intra.layout is IntraNodeLayout.SWITCH and intra.gpu_link.bandwidth_Bps == 300e9
    assert intra.gpu_link.efficiency == 0.85  # nvlink default
    g["intra_node"] = "dgx1-cube-mesh"
    del g["gpus_per_node"]
    assert load_data(d).cluster.node_groups[0].gpus_per_node == 8
    g["gpus_per_node"] = 4
    with pytest.raises(ScenarioError) as e:
        load_data(d)
    assert _paths(e.value) == ["cluster.nodes.0.gpus_per_node"]


def test_inline_gpu_is_checked_by_the_schema():
    d = copy.deepcopy(MINIMAL)
    d["cluster"]["nodes"][0]["gpu"] = {"name": "X", "peak_flops": {"fp32": "10 TFLOP/s", "fp16": "100 TFLOP/s"}, "memory": "16 GB",
                                       "memory_bandwidth": "1 TB/s"}
    gpu = load_data(d).cluster.node_groups[0].gpu
    assert (gpu.name, gpu.memory_bytes, gpu.peak_flops, gpu.memory_bandwidth_Bps) == ("X", 16e9, {"fp32": 1e13, "fp16": 1e14},
                                                                                 1e12)
    d["cluster"]["nodes"][0]["gpu"] = {"peak_flops": {"fp32": "10 TFLOP/s", "fp16": "100 TFLOP/s"}, "memory_bandwidth": "1 TB/s"}
    with pytest.raises(ScenarioError) as e:
        load_data(d)
    assert [str(i) for i in e.value.issues] == ["cluster.nodes.0.gpu.memory: required key is missing"]


@pytest.mark.parametrize("gpu, line", [
    ({"peak_flops": {"fp32": "10 TFLOP/s", "fp16": "100 TFLOP/s"}, "memory": "16 GB", "memory_bandwidth": "1 TB/s", "memroy": "1 GB"},
     "cluster.nodes.0.gpu.memroy: unknown key 'memroy' (did you mean 'memory'?)"),
    ({"peak_flops": {"fp32": "10 TFLOP/s", "fp16": "100 TB/s"}, "memory": "16 GB", "memory_bandwidth": "1 TB/s"},
     "cluster.nodes.0.gpu.peak_flops.fp16: got '100 TB/s'"),
    ({"peak_flops": {"fp32": "10 TFLOP/s", "int4": "100 TFLOP/s"}, "memory": "16 GB", "memory_bandwidth": "1 TB/s"},
     "cluster.nodes.0.gpu.peak_flops.int4: got 'int4'; expected one of 'fp32'"),
    ({"peak_flops": {"fp32": "10 TFLOP/s", "fp16": "100 TFLOP/s"}, "memory": 16, "memory_bandwidth": "1 TB/s"},
     "cluster.nodes.0.gpu.memory: got 16; expected a size"),
    ({"peak_flops": {"fp32": "10 TFLOP/s", "fp16": "100 TFLOP/s"}, "memory": "16 GB", "memory_bandwidth": "1 TB/s",
      "compute_efficiency": {"fp16": 1.5}}, "cluster.nodes.0.gpu.compute_efficiency.fp16: got 1.5; expected a number <= 1"),
    ({"peak_flops": {"fp32": "10 TFLOP/s", "fp16": "100 TFLOP/s"}, "memory": "16 GB", "memory_bandwidth": "1 TB/s",
      "compute_efficiency": {"fp8": 0.5}}, "cluster.nodes.0.gpu.compute_efficiency.fp8: no peak_flops.fp8"),
    ({"peak_flops": {"fp16": "100 TFLOP/s"}, "memory": "16 GB", "memory_bandwidth": "1 TB/s"},
     "cluster.nodes.0.gpu.peak_flops: got fp16; expected fp32 among them"),
    ({"peak_flops": {"fp32": "10 TFLOP/s", "fp16": "100 TFLOP/s"}, "memory": "16 GB", "memory_bandwidth": "1 TB/s",
      "comm_interference": {"allreduce": 0.1}}, "cluster.nodes.0.gpu.comm_interference.allreduce: got 'allreduce'"),
    ({"peak_flops": {"fp32": "10 TFLOP/s", "fp16": "100 TFLOP/s"}, "memory": "16 GB", "memory_bandwidth": "1 TB/s",
      "price_date": "2024"}, "cluster.nodes.0.gpu.price_date: got '2024'; expected the month"),
    ({"base": "a100-sxm4-80gb", "price_per_hour_usd": -1},
     "cluster.nodes.0.gpu.price_per_hour_usd: got -1; expected a number >= 0"),
    ({"base": "a100-sxm4-80gb", "tdp_w": 300}, "cluster.nodes.0.gpu.tdp_w: unknown key 'tdp_w'"),  # the catalog's only
    ({"base": "a100", "memory": "40 GB"}, "cluster.nodes.0.gpu.base: got 'a100'; expected a GPU catalog key"),
])
def test_a_bad_inline_gpu_is_reported_at_its_key(gpu, line):
    d = copy.deepcopy(MINIMAL)
    d["cluster"]["nodes"][0]["gpu"] = gpu
    with pytest.raises(ScenarioError) as e:
        load_data(d)
    assert len(e.value.issues) == 1 and str(e.value.issues[0]).startswith(line), str(e.value)


@pytest.mark.parametrize("model, params", [
    ({"gpt": {"layers": 2, "hidden": 64, "heads": 4, "vocab": 100}}, 100 * 64 + 2 * (4 + 8) * 64 * 64),
    ({"bert": {"layers": 1, "hidden": 8, "heads": 2, "vocab": 10, "ffn_hidden": 16}}, 80 + 4 * 64 + 2 * 8 * 16),
    ({"layers": [{"params": 5}, {"params": 7}], "name": "tiny"}, 12),
    ({"torch": "torchvision.models:resnet18", "input_shape": [3, 224, 224]}, 3000),
])
def test_model_forms(model, params):
    d = copy.deepcopy(MINIMAL)
    d["workload"] = {"model": model, "batch_per_gpu": 1, "seq_len": 128}
    assert load_data(d).workload.model.params == params


def test_benchmark_workload():
    d = copy.deepcopy(MINIMAL)
    d["workload"] = {"benchmark": {"op": "all_gather", "sizes": ["1 MB", "1 GiB"]}}
    w = load_data(d).workload
    assert w.model is None and w.benchmark.op is CollectiveOp.ALL_GATHER
    assert w.benchmark.sizes_bytes == (1e6, 2.0**30)


@pytest.mark.parametrize("change, path", [
    ({"workload": {"model": "resnet50", "benchmark": {"op": "all_reduce", "sizes": ["1 MB"]}, "batch_per_gpu": 1}},
     "workload"),
    ({"workload": {"batch_per_gpu": 1}}, "workload"),
    ({"workload": {"model": "resnet50"}}, "workload.batch_per_gpu"),
    ({"workload": {"model": "resnet50", "batch_per_gpu": 2, "global_batch": 16}}, "workload.batch_per_gpu"),
    ({"workload": {"model": "resnet50", "global_batch": 12}}, "workload.global_batch"),
    ({"workload": {"model": {"gpt": {"layers": 2, "hidden": 64, "heads": 4, "vocab": 9}}, "batch_per_gpu": 1}},
     "workload.seq_len"),
    ({"workload": {"model": {"gpt": {"layers": 2, "hidden": 64, "heads": 5, "vocab": 9}}, "batch_per_gpu": 1,
                   "seq_len": 8}}, "workload.model.gpt.heads"),
    ({"workload": {"model": {"layers": [{"params": "x"}]}, "batch_per_gpu": 1}}, "workload.model.layers.0.params"),
    ({"workload": {"model": {"torch": "mypkg.models:net", "input_shape": [3]}, "batch_per_gpu": 1}},
     "workload.model.torch"),
    ({"training": {"parallelism": {"dp": 4}}}, "training.parallelism"),
    ({"training": {"parallelism": {"tp": 3}}}, "training.parallelism"),
    ({"training": {"parallelism": {"tp": 2, "pp": 2}, "micro_batch": 3}}, "training.micro_batch"),
    ({"communication": {"strategy": "ps", "ps": {"servers": 9}}}, "communication.ps.servers"),
    ({"communication": {"strategy": "hierarchical", "hierarchical": {"inter": "ps"}}},
     "communication.hierarchical.inter"),
    ({"failures": {"events": [{"at": "1 h", "kind": "node_down", "target": "node:2"}]}}, "failures.events.0.target"),
    ({"failures": {"events": [{"at": "1 h", "kind": "gpu_down", "target": "node:0"}]}}, "failures.events.0.target"),
    ({"failures": {"events": [{"at": "1 h", "kind": "link_degrade", "target": "link:x"}]}},
     "failures.events.0.factor"),
    ({"failures": {"events": [{"at": "1 h", "kind": "straggler", "target": "gpu:1", "slowdown": 0.5}]}},
     "failures.events.0.slowdown"),
    ({"run": {"iterations": 10, "duration": "1 h"}}, "run.duration"),
    ({"run": {"iterations": 2, "warmup": 2}}, "run.warmup"),
    ({"calibration": "nope.json"}, "calibration"),
    ({"cluster": {"fabric": {"topology": "custom"}}}, "cluster.fabric.graphml"),
    ({"cluster": {"fabric": {"topology": "torus2d", "dims": [2, 2, 2]}}}, "cluster.fabric.dims"),
    ({"cluster": {"fabric": {"topology": "torus2d", "dims": [2, 2]}}}, "cluster.fabric.dims"),  # too small
    ({"cluster": {"fabric": {"topology": "ring"}}}, "cluster.fabric.topology"),
])
def test_cross_field_rules_name_the_path(change, path):
    d = copy.deepcopy(MINIMAL)
    for section, value in change.items():
        if section == "cluster":
            d["cluster"].update(value)
        else:
            d[section] = value
    with pytest.raises(ScenarioError) as e:
        load_data(d)
    assert path in _paths(e.value), str(e.value)


def test_several_cross_field_issues_at_once():
    d = copy.deepcopy(MINIMAL)
    d["training"] = {"parallelism": {"dp": 3}}
    d["run"] = {"iterations": 1, "warmup": 5}
    d["calibration"] = "missing.json"
    paths = [i.path for i in check_data(d)]
    assert set(paths) == {"training.parallelism", "run.warmup", "calibration"}


def test_intra_node_base_with_link_override():
    d = copy.deepcopy(MINIMAL)
    d["cluster"]["nodes"][0]["intra_node"] = {"base": "nvswitch-a100", "efficiency": 0.6}
    intra = load_data(d).cluster.node_groups[0].intra_node
    assert intra.key == "nvswitch-a100" and intra.gpu_link == NVSWITCH.gpu_link.with_(efficiency=0.6)


def test_dedicated_servers_are_counted_by_the_topology_check(monkeypatch):
    import sys

    seen = []
    monkeypatch.setattr(sys.modules["simdist.topology.validate"], "validate_cluster",
                        lambda cluster, server_hosts=0: seen.append(server_hosts) or [])
    d = copy.deepcopy(MINIMAL)
    d["communication"] = {"strategy": "ps", "ps": {"servers": 3, "placement": "dedicated"}}
    load_data(d)
    d["communication"]["ps"]["placement"] = "colocated"
    load_data(d)
    assert seen == [3, 0]


def test_schema_defaults_equal_scenario_dataclass_defaults():
    from simdist.scenario import CommunicationSpec, ParallelismSpec, RunSpec, TrainingSpec

    s = load_data(MINIMAL)
    assert s.communication == CommunicationSpec()
    assert s.run == RunSpec()
    assert s.training == TrainingSpec(parallelism=ParallelismSpec(dp=8))
