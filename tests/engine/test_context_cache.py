"""The per-process estimate context cache: reused exactly when nothing it depends on changed, results
byte-identical to a freshly built cluster, bounded, and never used by simulate."""
from __future__ import annotations

import copy
import dataclasses

import pytest

from simdist.engine.context import SCHEDULE_KEYS, context_key, cluster_key
from simdist.engine.context_cache import ContextCache, process_cache
from simdist.engine.simulation import simulate
from simdist.io.load import load_data
from simdist.io.overrides import set_path
from simdist.results.writers import result_json
from simdist.scenario import CommunicationSpec

BASE = {
    "name": "cache",
    "cluster": {"nodes": [{"count": 4, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                           "nic": {"bandwidth": "100 Gb/s", "latency": "2 us", "count": 4, "transport": "rdma"}}],
                "fabric": {"topology": "fat_tree", "nodes_per_leaf": 2,
                           "link": {"bandwidth": "100 Gb/s", "latency": "1 us"}}},
    "workload": {"model": "resnet50", "batch_per_gpu": 64, "precision": "fp16"},
    "communication": {"strategy": "ring", "bucket_size": "25 MB"},
    "run": {"iterations": 3, "warmup": 1},
}
# one server, every GPU pushing: each PS variant below differs from it (with the default per-node layout a 1 MB
# partition splits none of the 25 MB buckets' 0.8 MB pushes)
PS = {"communication.strategy": "ps", "communication.ps.servers": 1, "communication.ps.aggregation": "gpu"}
HIER = {"communication.strategy": "hierarchical"}
H100 = {"communication.backend": "nccl", "cluster.nodes.0.gpu": "h100-sxm5-80gb",
        "cluster.nodes.0.intra_node": "nvswitch-h100"}
NCCL_TCP = {"communication.backend": "nccl",
            "cluster.nodes.0.nic": {"bandwidth": "100 Gb/s", "latency": "25 us", "count": 1, "transport": "tcp"}}

# Every CommunicationSpec field -> (the base it is varied on, the variant): schedule keys must not be
# served a context built for another value; every other key must give the same bytes on a reused context.
VARIANTS = {
    "strategy": ({}, {"communication.strategy": "tree"}),
    "backend": ({}, {"communication.backend": "nccl"}),
    "hierarchical_intra": (HIER, {**HIER, "communication.hierarchical.intra": "tree"}),
    "hierarchical_inter": (HIER, {**HIER, "communication.hierarchical.inter": "tree"}),
    "ps_servers": (PS, {**PS, "communication.ps.servers": 4}),
    "ps_placement": (PS, {**PS, "communication.ps.placement": "dedicated"}),
    "ps_aggregation": (PS, {**PS, "communication.ps.aggregation": "node"}),
    "ps_server": (PS, {**PS, "communication.ps.server": "cpu"}),
    "ps_partition_bytes": (PS, {**PS, "communication.ps.partition": "1 MB"}),
    "bucket_size_bytes": ({}, {"communication.bucket_size": "5 MB"}),
    "first_bucket_bytes": ({}, {"communication.first_bucket_size": "1 MiB"}),
    "bucketing": ({}, {"communication.bucketing": "fusion"}),
    "fusion_cycle_s": ({}, {"communication.fusion_cycle": "5 ms"}),
    "ddp_average": ({}, {"communication.ddp_average": "per_bucket"}),
    "overlap": ({}, {"communication.overlap": False}),
    "gradient_as_bucket_view": ({}, {"communication.gradient_as_bucket_view": True}),
    "compression": ({}, {"communication.compression": {"method": "powersgd", "rank": 4}}),
    # CollNet needs SHARP switches, which are refused without it: the variant changes the fabric too
    # NVLS runs on third-generation NVSwitch nodes only: the base is H100 nodes, where NVLSTree is on
    "nvls": (H100, {**H100, "communication.nvls": False}),
    "collnet": ({"communication.backend": "nccl"},
                {"communication.backend": "nccl", "cluster.fabric.sharp": True, "communication.collnet": True}),
    "nccl_algo": (H100, {**H100, "communication.nccl_algo": "Ring"}),
    "nccl_proto": ({"communication.backend": "nccl"}, {"communication.backend": "nccl", "communication.nccl_proto": "LL"}),
    "nccl_socket_threads": ({**NCCL_TCP}, {**NCCL_TCP, "communication.nccl_socket_threads": 2}),
}


def scenario(changes: dict | None = None):
    data = copy.deepcopy(BASE)
    for dotted, value in (changes or {}).items():
        set_path(data, dotted.split("."), value)
    return load_data(data)


def fresh_json(s) -> str:
    process_cache().clear()
    out = result_json(simulate(s, "estimate"))
    process_cache().clear()
    return out


def test_every_communication_key_is_classified():
    assert set(VARIANTS) == {f.name for f in dataclasses.fields(CommunicationSpec)}
    assert set(SCHEDULE_KEYS) < set(VARIANTS)


@pytest.mark.parametrize("key", sorted(VARIANTS))
def test_a_reused_context_gives_the_bytes_of_a_fresh_one_and_schedule_keys_invalidate(key):
    before, after = VARIANTS[key]
    warm, other = scenario(before), scenario(after)
    expected = fresh_json(other)
    simulate(warm, "estimate")  # the cache now holds warm's context
    cache = process_cache()
    hits = cache.stats.hits
    got = result_json(simulate(other, "estimate"))
    served = cache.stats.hits - hits
    assert got == expected
    assert got != result_json(simulate(warm, "estimate"))  # the variant changes the result: the test can fail
    if key in SCHEDULE_KEYS:
        assert context_key(warm) != context_key(other)
        assert served == 0  # built anew, not served warm's context
    else:
        assert context_key(warm) == context_key(other)
        assert served == 1


def test_asynchronous_estimates_on_a_reused_context_start_their_clock_at_zero():
    asp = {"training.sync": "asp", **PS}
    expected = fresh_json(scenario(asp))
    simulate(scenario(asp), "estimate")
    assert result_json(simulate(scenario({**asp, "communication.bucket_size": "25 MB"}), "estimate")) == expected
    assert result_json(simulate(scenario(asp), "estimate")) == expected


def test_a_sweep_in_any_order_gives_the_same_bytes_as_each_point_alone():
    points = [{"communication.bucket_size": b, "communication.strategy": st, "cluster.nodes.0.count": n}
              for n in (2, 4) for st in ("ring", "hierarchical") for b in ("4 MB", "25 MB")]
    alone = [fresh_json(scenario(p)) for p in points]
    process_cache().clear()
    warm = [result_json(simulate(scenario(p), "estimate")) for p in reversed(points)][::-1]
    assert warm == alone
    assert process_cache().stats.clusters_built == 2  # one per cluster


def test_cluster_changes_build_another_fabric():
    a, b = scenario(), scenario({"cluster.nodes.0.nic.bandwidth": "200 Gb/s"})
    assert cluster_key(a) != cluster_key(b)
    assert cluster_key(a) == cluster_key(scenario({"communication.strategy": "tree"}))
    dedicated = scenario({**PS, "communication.ps.placement": "dedicated"})
    assert cluster_key(dedicated) != cluster_key(scenario(PS))  # dedicated servers are extra hosts


def test_the_cache_is_bounded():
    cache = ContextCache(max_contexts=2, max_clusters=1)
    s = [scenario({"communication.strategy": st}) for st in ("ring", "tree", "halving_doubling")]
    for x in s:
        cache.context(x)
    assert len(cache) == 2 and cache.stats.clusters_built == 1
    cache.context(scenario({"cluster.nodes.0.count": 2}))  # a second fabric evicts the first and its contexts
    assert len(cache) == 1 and len(cache._clusters) == 1
    small = ContextCache(max_gpus=40)
    small.context(s[0])
    small.context(scenario({"cluster.nodes.0.count": 2}))  # 32 + 16 GPUs > 40: the older fabric goes
    assert len(small._clusters) == 1 and len(small) == 1


def test_simulate_never_uses_the_estimate_cache():
    process_cache().clear()
    simulate(scenario(), "simulate")
    assert len(process_cache()) == 0 and process_cache().stats.misses == 0
