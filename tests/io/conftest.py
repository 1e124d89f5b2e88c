"""Fake catalogs for the io tests: small, fixed, so expectations are hand-checkable.

The real simdist.io.catalog, simdist.workload, simdist.topology.validate and
simdist.workload.torch_import are written by other engineers; these stand-ins follow the agreed
signatures and are swapped in (sys.modules / attributes) for every test in this folder unless the
test module sets REAL_CATALOGS = True.
"""
from __future__ import annotations

import math
import sys
import textwrap
import types
from pathlib import Path

import pytest
import yaml

from simdist.errors import Issue, ScenarioError
from simdist.scenario import Scenario
from simdist.io.catalog import TransportDefault, gpu_spec
from simdist.hardware.specs import GpuSpec, IntraNodeLayout, IntraNodeSpec, LinkSpec
from simdist.units import parse_flops, parse_size
from simdist.workload.specs import LayerSpec, ModelSpec

A100 = GpuSpec("a100-sxm4-80gb", "A100 SXM4 80GB", "nvidia", {"fp32": 19.5e12, "fp16": 312e12}, 80e9, 2.0e12, 400, 4.0)
V100 = GpuSpec("v100-sxm2-32gb", "V100 SXM2 32GB", "nvidia", {"fp32": 15.7e12, "fp16": 125e12}, 32e9, 0.9e12, 300, 2.5)
LINKS = {
    "ib-hdr": LinkSpec(25e9, 1.5e-6, 0.92, "ib-hdr", "rdma"),
    "eth-100g": LinkSpec(12.5e9, 10e-6, 0.7, "eth-100g", "tcp"),
}
NVSWITCH = IntraNodeSpec("nvswitch-a100", IntraNodeLayout.SWITCH, LinkSpec(300e9, 2e-6, 0.8, "nvlink3", "nvlink"),
                         nic_attach="switch")
CUBE = IntraNodeSpec("dgx1-cube-mesh", IntraNodeLayout.CUBE_MESH, LinkSpec(25e9, 2e-6, 0.8, "nvlink2", "nvlink"),
                     pcie_link=LinkSpec(16e9, 1e-6, 0.8, "pcie3", "pcie"), gpus=8)
TRANSPORT = {
    "rdma": TransportDefault("rdma", 0.9, 2e-6, source="fake rdma default"),
    "tcp": TransportDefault("tcp", 0.6, 25e-6, source="fake tcp default"),
    "nvlink": TransportDefault("nvlink", 0.85, 1e-6),
    "pcie": TransportDefault("pcie", 0.8, 1e-6),
    "socket": TransportDefault("socket", 0.7, 1e-6),
}


def _transport_default(transport: str) -> TransportDefault:
    return TRANSPORT[transport]


def _layer(i: int, params: int) -> LayerSpec:
    return LayerSpec(f"l{i}", "linear", params, 2.0 * params, 1.0, 1.0, 1.0, ((params,),))


def _model(name: str, params: list[int], tokens: int | None = None) -> ModelSpec:
    return ModelSpec(name, "custom", tuple(_layer(i, p) for i, p in enumerate(params)), tokens)


MODELS = {"resnet50": [9408, 25_548_624 - 9408], "bert-large": [340_000_000], "gpt3-1.3b": [1_300_000_000]}


def _get_model(key: str, seq_len: int | None) -> ModelSpec:
    return _model(key, MODELS[key], seq_len)  # KeyError for unknown keys, as agreed


def _parametric(layers, hidden, heads, vocab, seq_len, ffn_hidden=None) -> ModelSpec:
    ffn = ffn_hidden or 4 * hidden
    block = 4 * hidden * hidden + 2 * hidden * ffn
    return _model(f"gpt-{layers}x{hidden}", [vocab * hidden] + [block] * layers, seq_len)


def _from_layers(layers: list[dict], name: str) -> ModelSpec:
    out = []
    for i, layer in enumerate(layers):
        p = layer.get("params")
        if not isinstance(p, int) or isinstance(p, bool) or p < 0:
            raise ScenarioError(Issue(f"{i}.params", f"got {p!r}; expected a parameter count"))
        out.append(p)
    return _model(name, out)


def _import_model(factory: str, input_shape: tuple[int, ...]) -> ModelSpec:
    if not factory.startswith("torchvision."):
        raise ScenarioError(Issue("", f"cannot import {factory!r}"))
    return _model(factory.split(":")[1], [1000, 2000])


def _validate_cluster(cluster, server_hosts: int = 0) -> list[Issue]:
    f = cluster.fabric
    if f.dims is not None and math.prod(f.dims) != cluster.num_nodes:
        return [Issue("cluster.fabric.dims", f"got {list(f.dims)}; {cluster.num_nodes} nodes do not fill it")]
    if f.nodes_per_leaf is not None and f.nodes_per_leaf > cluster.num_nodes:
        return [Issue("cluster.fabric.nodes_per_leaf", "larger than the cluster")]
    if f.topology == "ring" and cluster.num_nodes < 3:
        return [Issue("cluster.fabric.topology", f"a ring needs at least 3 nodes, got {cluster.num_nodes}")]
    return []


def _module(name: str, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    return mod


WORKLOAD_FAKES = {"get_model": _get_model, "model_keys": lambda: list(MODELS), "parametric_gpt": _parametric,
                  "parametric_bert": _parametric, "model_from_layers": _from_layers}

FAKES = {
    "simdist.io.catalog": _module(
        "simdist.io.catalog", gpus=lambda: {"a100-sxm4-80gb": A100, "v100-sxm2-32gb": V100},
        links=lambda: dict(LINKS), intra_nodes=lambda: {"nvswitch-a100": NVSWITCH, "dgx1-cube-mesh": CUBE},
        transport_default=_transport_default, gpu_spec=gpu_spec),
    "simdist.topology.validate": _module("simdist.topology.validate", validate_cluster=_validate_cluster),
    "simdist.workload.torch_import": _module("simdist.workload.torch_import", import_model=_import_model),
}


@pytest.fixture(autouse=True)
def fake_catalogs(monkeypatch, request):
    if getattr(request.module, "REAL_CATALOGS", False):
        return
    for name, mod in FAKES.items():
        monkeypatch.setitem(sys.modules, name, mod)
    import simdist.workload as workload  # the public model API: patch its functions, keep the package

    for attr, fn in WORKLOAD_FAKES.items():
        monkeypatch.setattr(workload, attr, fn, raising=False)


DESIGN_EXAMPLE = textwrap.dedent("""\
    name: resnet50-64xa100-ring
    cluster:
      nodes:
        - count: 8
          gpu: a100-sxm4-80gb
          gpus_per_node: 8
          intra_node: nvswitch-a100
          nic: {bandwidth: "200 Gb/s", latency: "3 us", count: 1, transport: rdma}
      fabric:
        topology: fat_tree
        nodes_per_leaf: 4
        oversubscription: 1.0
        link: {bandwidth: "200 Gb/s", latency: "1 us"}
    workload:
      model: resnet50
      batch_per_gpu: 64
      precision: fp16
      seq_len: 2048
      grad_dtype: fp32
    training:
      parallelism: {dp: 64, tp: 1, pp: 1, zero: 0}
      micro_batch: 1
      schedule: 1f1b
      sync: bsp
      staleness: 0
      local_steps: 1
      grad_accumulation: 1
      batch_split: equal
    communication:
      strategy: ring
      backend: textbook
      hierarchical: {intra: ring, inter: ring}
      ps: {servers: 4, placement: colocated}
      bucket_size: "25 MB"
      overlap: true
      compression: {method: none}
    failures:
      events:
        - {at: "2 h", kind: node_down, target: "node:3"}
        - {at: "1 h", kind: link_degrade, target: "link:leaf0-spine1", factor: 0.5, duration: "10 min"}
        - {at: "0 s", kind: straggler, target: "gpu:12", slowdown: 1.3}
      random: {gpu_mtbf: "50000 h", node_mtbf: "20000 h", link_mtbf: "100000 h", repair: "30 min"}
      recovery: {policy: checkpoint_restart, checkpoint_interval: "30 min", checkpoint_write: "60 s", restart: "5 min"}
    run:
      iterations: 50
      warmup: 2
      seed: 0
      replicas: 1
      fidelity: simulate
    calibration: calibration/my-cluster.json
    """)

MINIMAL = {
    "cluster": {"nodes": [{"count": 2, "gpu": "a100-sxm4-80gb", "gpus_per_node": 4, "intra_node": "nvswitch-a100",
                           "nic": {"bandwidth": "100 Gb/s"}}]},
    "workload": {"model": "resnet50", "batch_per_gpu": 32},
}


def resolved(data: dict, base_dir: "str | Path" = ".") -> "Scenario":
    """`data` validated and resolved to SI units without io.rules: the DESIGN example shows every key, some read
    only in other runs (ps.servers under ring, failure events without run.duration), so it resolves but a run (and
    `check`) refuses it."""
    from simdist.io.load import catalog_context
    from simdist.io.resolve import resolve
    from simdist.io.schema import ScenarioModel

    return resolve(ScenarioModel.model_validate(data, context=catalog_context()), base_dir)


@pytest.fixture
def example_dict() -> dict:
    return yaml.safe_load(DESIGN_EXAMPLE)


@pytest.fixture
def write(tmp_path: Path):
    """write(text_or_dict, name='s.yaml') -> path of a scenario file in tmp_path."""

    def _write(content, name: str = "s.yaml") -> Path:
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False))
        return p

    return _write


@pytest.fixture
def example_file(write, tmp_path) -> Path:
    (tmp_path / "calibration").mkdir()
    (tmp_path / "calibration" / "my-cluster.json").write_text("{}")
    return write(DESIGN_EXAMPLE, "example.yaml")
