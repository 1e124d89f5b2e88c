"""Every key of the scenario schema either changes a result or is refused with an error naming it.

The keys are ENUMERATED by walking the pydantic models of simdist/io/schema*.py, so a key added to the
schema without a case here fails `test_every_schema_key_has_a_case`. Each case runs a small scenario
(estimate fidelity where the key does not need events) with and without the change and compares the
whole result (JSON, per-iteration times); a refusal must be a ScenarioError whose issue names the key.
"""
from __future__ import annotations

import copy
import json
import types
import typing
from dataclasses import dataclass, field

import pytest
from pydantic import BaseModel

from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.load import load_data
from simdist.io.overrides import set_path
from simdist.io.schema import ScenarioModel
from simdist.results.writers import result_json

REAL_CATALOGS = True  # conftest: use the shipped catalogs

# Keys the engine branch (wip/engine) implements: run.duration, run.seed, run.replicas (refused > 1) and
# training.batch_split. In this branch they are still accepted without effect; the lead removes this list
# when the branches merge, and the strict xfail below fails as soon as one of them passes.
ENGINE_BRANCH_KEYS = {"run.duration", "run.seed", "run.replicas", "training.batch_split"}

DELETE = object()  # a change value that removes the key

BASE: dict = {
    "name": "every-key",
    "cluster": {"nodes": [{"count": 2, "gpu": "v100-sxm2-16gb", "gpus_per_node": 2, "intra_node": "pcie-gen3",
                           "nic": {"bandwidth": "10 Gb/s", "transport": "tcp"}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": "resnet50", "batch_per_gpu": 8},
    "run": {"iterations": 3, "warmup": 1, "fidelity": "estimate"},
}
G = "cluster.nodes.0"
FAST_NIC = {f"{G}.nic": "ib-hdr"}  # intra-node links then limit the ring
ONE_GPU = {f"{G}.gpus_per_node": 1, f"{G}.count": 4}
FAT = {**ONE_GPU, "cluster.fabric": {"topology": "fat_tree", "nodes_per_leaf": 2, "oversubscription": 2.0}}
GPT = {"workload.model": {"gpt": {"layers": 2, "hidden": 256, "heads": 4, "vocab": 1000}}, "workload.seq_len": 128}
BERT = {"workload.model": {"bert": {"layers": 2, "hidden": 256, "heads": 4, "vocab": 1000}}, "workload.seq_len": 128}
LAYERS = {"workload.model": {"layers": [{"name": "fc", "kind": "linear", "params": 1000000, "fwd_flops": 2000000}], "name": "a"}}
TORCH = {"workload.model": {"torch": "tests.workload.tiny_models:tiny_cnn", "input_shape": [1, 3, 8, 8]}}
BENCH = {"workload": {"benchmark": {"op": "all_reduce", "sizes": ["1 MB"]}}}
PS = {"communication.strategy": "ps"}
STRAGGLER = {"failures": {"events": [{"at": "0 s", "kind": "straggler", "target": "gpu:0", "slowdown": 2.0}]}}
SIM = {"run.fidelity": "simulate"}
GRAPHML = """<?xml version="1.0" encoding="UTF-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="host" for="node" attr.name="host" attr.type="string"/>
  <key id="bw" for="edge" attr.name="bandwidth" attr.type="string"/>
  <graph edgedefault="undirected">
    <node id="h0"><data key="host">true</data></node>
    <node id="h1"><data key="host">true</data></node>
    <node id="r0"/><node id="r1"/>
    <edge source="r0" target="r1"><data key="bw">{bw}</data></edge>
    <edge source="h0" target="r0"/><edge source="h1" target="r1"/>
  </graph>
</graphml>
"""


@dataclass(frozen=True)
class Case:
    change: dict  # dotted key -> value, applied on top of BASE + context
    context: dict = field(default_factory=dict)  # applied to both runs
    refused: bool = False  # True: the change must be a ScenarioError naming the key
    label: bool = False  # a name: it changes the labels of the result, not its figures


CASES: dict[str, Case] = {
    "name": Case({"name": "renamed"}, label=True),
    f"{G}.count": Case({f"{G}.count": 3}),
    f"{G}.gpu": Case({f"{G}.gpu": "a100-sxm4-40gb"}),
    f"{G}.gpus_per_node": Case({f"{G}.gpus_per_node": 4}),
    f"{G}.intra_node": Case({f"{G}.intra_node": "pcie-gen4"}, FAST_NIC),
    f"{G}.intra_node.link": Case({f"{G}.intra_node": {"link": "pcie-gen3"}}, {**FAST_NIC, f"{G}.intra_node": {"link": "nvlink2"}}),
    f"{G}.intra_node.bandwidth": Case({f"{G}.intra_node.bandwidth": "5 GB/s"}, {**FAST_NIC, f"{G}.intra_node": {"bandwidth": "300 GB/s"}}),
    f"{G}.intra_node.latency": Case({f"{G}.intra_node.latency": "50 us"}, {**FAST_NIC, f"{G}.intra_node": {"bandwidth": "300 GB/s"}}),
    f"{G}.intra_node.efficiency": Case({f"{G}.intra_node.efficiency": 0.01}, {**FAST_NIC, f"{G}.intra_node": {"bandwidth": "300 GB/s"}}),
    f"{G}.intra_node.transport": Case({f"{G}.intra_node.transport": "pcie"}, {**FAST_NIC, f"{G}.intra_node": {"bandwidth": "300 GB/s"}}),
    f"{G}.intra_node.base": Case({f"{G}.intra_node.base": "pcie-gen4"}, {**FAST_NIC, f"{G}.intra_node": {"base": "pcie-gen3"}}),
    f"{G}.intra_node.layout": Case({f"{G}.intra_node": {"bandwidth": "300 GB/s", "layout": "pcie"}}, refused=True),
    f"{G}.nic": Case({f"{G}.nic": "eth-1g"}),
    f"{G}.nic.link": Case({f"{G}.nic": {"link": "eth-25g"}}, {f"{G}.nic": {"link": "eth-10g"}}),
    f"{G}.nic.bandwidth": Case({f"{G}.nic.bandwidth": "25 Gb/s"}),
    f"{G}.nic.latency": Case({f"{G}.nic.latency": "500 us"}),
    f"{G}.nic.efficiency": Case({f"{G}.nic.efficiency": 0.3}),
    f"{G}.nic.transport": Case({f"{G}.nic.transport": "rdma"}),
    f"{G}.nic.count": Case({f"{G}.nic.count": 2}),
    f"{G}.nic.gpudirect": Case({f"{G}.nic.gpudirect": False}, {f"{G}.nic": {"bandwidth": "100 Gb/s", "transport": "rdma"}}),
    "cluster.fabric.topology": Case({"cluster.fabric.topology": "ring"}, ONE_GPU),
    "cluster.fabric.nodes_per_leaf": Case({"cluster.fabric.nodes_per_leaf": 1}, FAT),
    "cluster.fabric.oversubscription": Case({"cluster.fabric.oversubscription": 4.0}, FAT),
    "cluster.fabric.link": Case({"cluster.fabric.link": "eth-1g"}, FAT),
    "cluster.fabric.link.link": Case({"cluster.fabric.link": {"link": "eth-1g"}}, {**FAT, "cluster.fabric.link": {"link": "eth-10g"}}),
    "cluster.fabric.link.bandwidth": Case({"cluster.fabric.link.bandwidth": "1 Gb/s"}, {**FAT, "cluster.fabric.link": {"bandwidth": "10 Gb/s"}}),
    "cluster.fabric.link.latency": Case({"cluster.fabric.link.latency": "1 ms"}, {**FAT, "cluster.fabric.link": {"bandwidth": "10 Gb/s"}}),
    "cluster.fabric.link.efficiency": Case({"cluster.fabric.link.efficiency": 0.1}, {**FAT, "cluster.fabric.link": {"bandwidth": "10 Gb/s"}}),
    "cluster.fabric.link.transport": Case({"cluster.fabric.link.transport": "tcp"}, {**FAT, "cluster.fabric.link": {"bandwidth": "10 Gb/s", "transport": "rdma"}}),
    "cluster.fabric.levels": Case({"cluster.fabric.levels": 3}, {**FAT, f"{G}.count": 8, "cluster.fabric.leaves_per_pod": 2}),
    "cluster.fabric.leaves_per_pod": Case({"cluster.fabric.leaves_per_pod": 4},
                                          {**FAT, f"{G}.count": 16, "cluster.fabric.levels": 3, "cluster.fabric.leaves_per_pod": 2}),
    "cluster.fabric.dims": Case({"cluster.fabric.dims": [4, 1]}, {**ONE_GPU, "cluster.fabric": {"topology": "torus2d", "dims": [2, 2]}}),
    "cluster.fabric.graphml": Case({"cluster.fabric.graphml": "slow.graphml"},
                                   {f"{G}.gpus_per_node": 1, "cluster.fabric": {"topology": "custom", "graphml": "fast.graphml"}}),
    "workload.model": Case({"workload.model": "vgg16"}),
    **{f"workload.model.{fam}.{k}": Case({f"workload.model.{fam}.{k}": v}, ctx)
       for fam, ctx in (("gpt", GPT), ("bert", BERT))
       for k, v in (("layers", 3), ("hidden", 512), ("heads", 8), ("vocab", 5000), ("ffn_hidden", 256))},
    "workload.model.torch": Case({"workload.model.torch": "tests.workload.tiny_models:tiny_mlp",
                                  "workload.model.input_shape": [1, 8]}, TORCH),
    "workload.model.input_shape": Case({"workload.model.input_shape": [1, 3, 9, 9]}, TORCH),
    "workload.model.layers": Case({"workload.model.layers.0.params": 4000000}, LAYERS),
    "workload.model.name": Case({"workload.model.name": "b"}, LAYERS, label=True),
    "workload.benchmark.op": Case({"workload.benchmark.op": "all_gather"}, BENCH),
    "workload.benchmark.sizes": Case({"workload.benchmark.sizes": ["1 MB", "4 MB"]}, BENCH),
    "workload.batch_per_gpu": Case({"workload.batch_per_gpu": 16}),
    "workload.global_batch": Case({"workload.global_batch": 64}, {"workload.batch_per_gpu": DELETE, "workload.global_batch": 32}),
    "workload.precision": Case({"workload.precision": "fp16"}),
    "workload.seq_len": Case({"workload.seq_len": 256}, GPT),
    "workload.grad_dtype": Case({"workload.grad_dtype": "fp16"}),
    "training.parallelism.dp": Case({"training.parallelism.dp": 2}, refused=True),
    "training.parallelism.tp": Case({"training.parallelism.tp": 2}, refused=True),
    "training.parallelism.pp": Case({"training.parallelism.pp": 2}, refused=True),
    "training.parallelism.zero": Case({"training.parallelism.zero": 1}, refused=True),
    "training.micro_batch": Case({"training.micro_batch": 2}, refused=True),
    "training.schedule": Case({"training.schedule": "gpipe"}, refused=True),
    "training.sync": Case({"training.sync": "asp"}, {**PS, **SIM}),
    "training.staleness": Case({"training.staleness": 2}, {**PS, **SIM, **STRAGGLER, "training.sync": "ssp", "run.iterations": 6}),
    "training.local_steps": Case({"training.local_steps": 4}, {"training.sync": "local_sgd"}),
    "training.grad_accumulation": Case({"training.grad_accumulation": 2}),
    "training.batch_split": Case({"training.batch_split": "proportional"},
                                 {"cluster.nodes.1": {"count": 1, "gpu": "a100-sxm4-40gb", "gpus_per_node": 2,
                                                      "intra_node": "pcie-gen4", "nic": "eth-10g"}}),
    "training.optimizer": Case({"training.optimizer": "adam"}),
    "training.convergence_factor": Case({"training.convergence_factor": 2.0}),
    "communication.strategy": Case({"communication.strategy": "tree"}),
    "communication.backend": Case({"communication.backend": "gloo"}),
    "communication.hierarchical.intra": Case({"communication.hierarchical.intra": "tree"},
                                             {"communication.strategy": "hierarchical", f"{G}.gpus_per_node": 4, **FAST_NIC}),
    "communication.hierarchical.inter": Case({"communication.hierarchical.inter": "tree"},
                                             {"communication.strategy": "hierarchical", f"{G}.count": 4}),
    "communication.ps.servers": Case({"communication.ps.servers": 2}, PS),
    "communication.ps.placement": Case({"communication.ps.placement": "dedicated"}, PS),
    "communication.ps.aggregation": Case({"communication.ps.aggregation": "node"}, PS),
    "communication.ps.server": Case({"communication.ps.server": "cpu"}, PS),
    "communication.bucket_size": Case({"communication.bucket_size": "1 MB"}),
    "communication.first_bucket_size": Case({"communication.first_bucket_size": "1 MB"}),
    "communication.bucketing": Case({"communication.bucketing": "fusion"}),
    "communication.fusion_cycle": Case({"communication.fusion_cycle": "20 ms"}),
    "communication.overlap": Case({"communication.overlap": False}),
    "communication.compression.method": Case({"communication.compression.method": "fp16"}),
    "communication.compression.ratio": Case({"communication.compression.ratio": 0.1},
                                            {"communication.compression": {"method": "topk", "ratio": 0.01}}),
    "communication.compression.rank": Case({"communication.compression.rank": 8},
                                           {"communication.compression": {"method": "powersgd", "rank": 1}}),
    "communication.compression.error_feedback": Case({"communication.compression.error_feedback": False},
                                                     {"communication.compression": {"method": "topk", "ratio": 0.01}}),
    "failures.events.0.at": Case({"failures.events.0.at": "1 h"}, STRAGGLER, refused=True),
    "failures.events.0.kind": Case({"failures.events.0.kind": "node_down", "failures.events.0.target": "node:1",
                                    "failures.events.0.slowdown": DELETE}, STRAGGLER, refused=True),
    "failures.events.0.target": Case({"failures.events.0.target": "gpu:1"},
                                     {"failures": {"events": [STRAGGLER["failures"]["events"][0]] * 2}}),
    "failures.events.0.factor": Case({"failures.events.0.factor": 0.5}, STRAGGLER, refused=True),
    "failures.events.0.slowdown": Case({"failures.events.0.slowdown": 3.0}, STRAGGLER),
    "failures.events.0.duration": Case({"failures.events.0.duration": "1 h"}, STRAGGLER, refused=True),
    "failures.random.gpu_mtbf": Case({"failures.random": {"gpu_mtbf": "1000 h"}}, refused=True),
    "failures.random.node_mtbf": Case({"failures.random": {"node_mtbf": "1000 h"}}, refused=True),
    "failures.random.link_mtbf": Case({"failures.random": {"link_mtbf": "1000 h"}}, refused=True),
    "failures.random.repair": Case({"failures.random": {"repair": "1 h"}}, refused=True),
    "failures.recovery.policy": Case({"failures.recovery.policy": "elastic"}, STRAGGLER, refused=True),
    "failures.recovery.checkpoint_interval": Case({"failures.recovery.checkpoint_interval": "1 h"}, STRAGGLER, refused=True),
    "failures.recovery.checkpoint_write": Case({"failures.recovery.checkpoint_write": "10 s"}, STRAGGLER, refused=True),
    "failures.recovery.restart": Case({"failures.recovery.restart": "1 min"}, STRAGGLER, refused=True),
    "run.iterations": Case({"run.iterations": 5}, SIM),
    "run.duration": Case({"run.iterations": DELETE, "run.duration": "1 s"}, {**SIM, "run.iterations": DELETE}),
    "run.warmup": Case({"run.warmup": 2}, {**SIM, **STRAGGLER, "communication.strategy": "ps", "training.sync": "asp"}),
    "run.seed": Case({"run.seed": 7}, SIM),
    "run.replicas": Case({"run.replicas": 2}, refused=True),
    "run.fidelity": Case({"run.fidelity": "simulate"}),
    "calibration": Case({"calibration": "profile.json"}),
}


def _alternatives(annotation: object) -> list[object]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _alternatives(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [a for arg in typing.get_args(annotation) for a in _alternatives(arg)]
    if origin is list:
        return [("list", a) for a in _alternatives(typing.get_args(annotation)[0])]
    return [annotation]


def schema_keys(model: type[BaseModel] = ScenarioModel, prefix: str = "") -> list[str]:
    """Every settable key of the schema as a dotted path (list items as '.0'); a key that is both a value
    (a catalog key, a number) and a section (an inline mapping) is listed, then its sub-keys."""
    out: list[str] = []
    for name, info in model.model_fields.items():
        path = prefix + name
        subs, leaf = [], False
        for alt in _alternatives(info.annotation):
            is_list = isinstance(alt, tuple)
            alt = alt[1] if is_list else alt
            if isinstance(alt, type) and issubclass(alt, BaseModel):
                subs.append((alt, path + (".0" if is_list else "")))
            elif alt is not type(None):
                leaf = True
        if leaf:
            out.append(path)
        for sub, p in subs:
            out += [k for k in schema_keys(sub, p + ".") if k not in out]
    return out


def _apply(data: dict, changes: dict) -> None:
    for dotted, value in changes.items():
        parts = dotted.split(".")
        if value is DELETE:
            node = data
            for p in parts[:-1]:
                node = node[int(p)] if isinstance(node, list) else node[p]
            node.pop(parts[-1], None)
        elif parts[-1].isdigit() and parts[:-1] and isinstance(_get(data, parts[:-1]), list) \
                and int(parts[-1]) == len(_get(data, parts[:-1])):
            _get(data, parts[:-1]).append(copy.deepcopy(value))
        else:
            set_path(data, parts, copy.deepcopy(value))


def _get(data: object, parts: list[str]) -> object:
    for p in parts:
        data = data[int(p)] if isinstance(data, list) else data.get(p) if isinstance(data, dict) else None
    return data


def _files(tmp_path) -> None:
    (tmp_path / "fast.graphml").write_text(GRAPHML.replace("{bw}", "100 Gb/s"))
    (tmp_path / "slow.graphml").write_text(GRAPHML.replace("{bw}", "1 Gb/s"))
    (tmp_path / "profile.json").write_text(json.dumps(
        {"links": [{"transport": "tcp", "role": "nic", "latency_s": 1e-6, "efficiency": 0.5}]}))


ECHOES = ("scenario", "strategy", "links_used")  # parts of the result that repeat the scenario's settings


def _outcome(data: dict, tmp_path, label: bool = False) -> tuple[str, tuple[float, ...]]:
    """The result's figures (what was computed), without the parts that echo settings back, so that a key
    passes only by changing a figure; a label key compares the whole result."""
    result = simulate(load_data(data, base_dir=tmp_path))
    if label:
        return result_json(result), tuple(result.iterations)
    figures = {k: v for k, v in json.loads(result_json(result)).items() if k not in ECHOES}
    return json.dumps(figures, sort_keys=True), tuple(result.iterations)


def test_every_schema_key_has_a_case():
    keys = schema_keys()
    assert len(keys) > 90
    assert sorted(set(keys) - set(CASES)) == [], "schema keys without a case in CASES"
    assert sorted(set(CASES) - set(keys)) == [], "cases for keys the schema does not have"


@pytest.mark.parametrize("key", [pytest.param(k, marks=pytest.mark.xfail(
    strict=True, reason="implemented by the engine branch (ENGINE_BRANCH_KEYS)")) if k in ENGINE_BRANCH_KEYS else k
    for k in CASES])
def test_key_changes_the_result_or_is_refused(key, tmp_path):
    case = CASES[key]
    _files(tmp_path)
    base = copy.deepcopy(BASE)
    _apply(base, case.context)
    changed = copy.deepcopy(base)
    _apply(changed, case.change)
    if case.refused:
        with pytest.raises(ScenarioError) as err:
            _outcome(changed, tmp_path)
        named = [str(i) for i in err.value.issues  # the key, a section above it (refused whole) or a key inside it
                 if i.path and (i.path == key or key.startswith(i.path + ".") or i.path.startswith(key + "."))]
        assert named, f"{key}: refused, but no issue names it: {err.value}"
        assert all("\n" not in str(i) for i in err.value.issues)
        return
    before = _outcome(base, tmp_path, case.label)
    after = _outcome(changed, tmp_path, case.label)
    assert before != after, f"{key}: accepted, but the result did not change"


UNUSED_IN_CONTEXT = [  # (key, change): accepted by the schema, read by no run of this workload -> refused
    # (an alternative strategy's or sync mode's parameters, e.g. ps.servers under ring, stay accepted: a sweep
    # or --set switching to it reads them, and CASES shows each of them changes a result)
    ("workload.precision", {**BENCH, "workload.precision": "fp16"}),
    ("communication.bucket_size", {**BENCH, "communication.bucket_size": "1 MB"}),
    ("communication.compression", {**BENCH, "communication.compression.method": "fp16"}),
    ("training", {**BENCH, "training.grad_accumulation": 2}),
    ("failures.events.0.slowdown", {"failures": {"events": [{"at": "0 s", "kind": "link_degrade", "target": "link:x",
                                                             "factor": 0.5, "slowdown": 2.0}]}}),
]


@pytest.mark.parametrize("key,change", UNUSED_IN_CONTEXT, ids=[k for k, _ in UNUSED_IN_CONTEXT])
def test_a_key_nothing_reads_in_its_context_is_refused(key, change, tmp_path):
    data = copy.deepcopy(BASE)
    _apply(data, change)
    with pytest.raises(ScenarioError) as err:
        _outcome(data, tmp_path)
    assert any(i.path == key for i in err.value.issues), str(err.value)
