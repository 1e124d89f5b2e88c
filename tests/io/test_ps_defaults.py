"""The parameter-server block's defaults: one server per worker node and node-level aggregation (BytePS's and
MXNet's dist kvstore's layout), gpu aggregation where a node cannot aggregate; explicit values kept as given."""
from __future__ import annotations

import copy

from simdist.io.load import load_data
from simdist.io.overrides import set_path
from simdist.scenario import PsAggregation, PsPlacement

REAL_CATALOGS = True  # tests/io/conftest.py: the shipped catalogs, not its stand-ins

BASE = {
    "cluster": {"nodes": [{"count": 4, "gpu": "v100-sxm2-32gb", "gpus_per_node": 4, "intra_node": "pcie-gen3",
                           "nic": {"bandwidth": "25 Gb/s", "latency": "5 us", "transport": "rdma"}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": "resnet50", "batch_per_gpu": 32, "precision": "fp16"},
    "communication": {"strategy": "ps"},
    "run": {"iterations": 3, "warmup": 1},
}


def _comm(changes: dict | None = None):
    data = copy.deepcopy(BASE)
    for dotted, value in (changes or {}).items():
        set_path(data, dotted.split("."), value)
    return load_data(data).communication


def test_unset_servers_and_aggregation_are_one_server_per_node_aggregating_per_node():
    c = _comm()
    assert (c.ps_servers, c.ps_placement, c.ps_aggregation) == (4, PsPlacement.COLOCATED, PsAggregation.NODE)
    assert _comm({"cluster.nodes.0.count": 2}).ps_servers == 2
    assert _comm({"communication.ps.placement": "dedicated"}).ps_servers == 4  # a server machine per worker


def test_explicit_values_are_kept():
    c = _comm({"communication.ps": {"servers": 1, "aggregation": "gpu"}})
    assert (c.ps_servers, c.ps_aggregation) == (1, PsAggregation.GPU)
    assert _comm({"communication.ps.servers": 3}).ps_aggregation == PsAggregation.NODE


def test_aggregation_defaults_to_gpu_where_a_node_cannot_aggregate():
    for sync in ("asp", "ssp"):  # asynchronous workers are single GPUs (node is refused there)
        assert _comm({"training.sync": sync}).ps_aggregation == PsAggregation.GPU
    hybrid = _comm({"training.sync": "hybrid", "training.hybrid_switch": 1})
    assert hybrid.ps_aggregation == PsAggregation.GPU  # its first phase is asp
    mixed = copy.deepcopy(BASE["cluster"]["nodes"][0])
    mixed.update({"count": 1, "gpus_per_node": 2})
    c = _comm({"cluster.nodes": [BASE["cluster"]["nodes"][0], mixed]})  # 4 and 2 GPUs per node
    assert (c.ps_servers, c.ps_aggregation) == (5, PsAggregation.GPU)


def test_without_a_parameter_server_the_unset_block_is_not_reported_as_set():
    c = _comm({"communication.strategy": "ring"})  # relevance rules refuse a changed ps key off ps: none here
    assert (c.ps_servers, c.ps_aggregation) == (1, PsAggregation.GPU)
