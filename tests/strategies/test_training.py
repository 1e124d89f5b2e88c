"""The data-parallel training iteration: invariants and the claims of the training issue."""
from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from simdist.engine.simulation import simulate
from simdist.io.load import load_data
from simdist.io.overrides import set_path
from simdist.strategies.plan import build_plan
from tests.strategies.scenario_runner import run_with

BASE = {
    "name": "t",
    "cluster": {
        "nodes": [{"count": 4, "gpu": "v100-sxm2-32gb", "gpus_per_node": 4, "intra_node": "pcie-gen3",
                   "nic": {"bandwidth": "25 Gb/s", "latency": "10 us", "transport": "tcp"}}],
        "fabric": {"topology": "single_switch"},
    },
    "workload": {"model": "resnet50", "batch_per_gpu": 32, "precision": "fp16"},
    "communication": {"strategy": "ring", "bucket_size": "25 MB", "overlap": True},
    "run": {"iterations": 4, "warmup": 1},
}


def _run(changes: dict | None = None, fidelity: str = "", base: dict = BASE):
    return run_with(base, changes, fidelity)


def _grad_copies(changes: dict | None = None) -> tuple[float, ...]:
    """DDP's per-bucket copies back into .grad after the backward (strategies/buckets.grad_copy_back_s)."""
    data = copy.deepcopy(BASE)
    for dotted, value in (changes or {}).items():
        set_path(data, dotted.split("."), value)
    return build_plan(load_data(data)).classes[0].grad_copy_s


def test_result_fields():
    r = _run()
    assert r.iteration_time_s > 0
    assert r.throughput.samples_per_s == pytest.approx(16 * 32 / r.iteration_time_s)
    assert 0 < r.scaling_efficiency <= 1
    b = r.breakdown_s
    assert b.compute > 0 and b.communication > 0
    assert r.iteration_time_s >= b.compute + b.optimizer - 1e-12
    assert r.memory.fits and r.memory.per_gpu_bytes > 0
    assert r.links and all(0 < l.utilization <= 1 + 1e-9 for l in r.links)


def test_overlap_never_slower_than_no_overlap():
    on = _run({"communication.overlap": True})
    off = _run({"communication.overlap": False})
    assert on.iteration_time_s <= off.iteration_time_s
    assert on.breakdown_s.exposed_communication < off.breakdown_s.exposed_communication


def test_no_overlap_iteration_is_compute_plus_communication():
    """Compute, then the exchanges, DDP's copy of the last bucket back into .grad (each earlier bucket's runs while
    the next bucket's exchange does), then the optimizer."""
    r = _run({"communication.overlap": False})
    b = r.breakdown_s
    last_copy = _grad_copies({"communication.overlap": False})[-1]
    assert r.iteration_time_s == pytest.approx(b.compute + b.communication + last_copy + b.optimizer, rel=1e-9)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([1, 10, 25, 40, 100, 200]), st.sampled_from([1.5, 2, 4, 10]))
def test_more_bandwidth_never_slower(gbps, factor):
    slow = _run({"cluster.nodes.0.nic.bandwidth": f"{gbps} Gb/s"})
    fast = _run({"cluster.nodes.0.nic.bandwidth": f"{gbps * factor} Gb/s"})
    assert fast.iteration_time_s <= slow.iteration_time_s * (1 + 1e-12)


def test_ps_one_server_slower_than_ring_for_vgg16_on_16_workers():
    base = copy.deepcopy(BASE)
    base["cluster"]["nodes"][0].update(count=16, gpus_per_node=1)
    base["workload"] = {"model": "vgg16", "batch_per_gpu": 32, "precision": "fp16"}
    ring = _run(base=base)
    ps = _run({"communication.strategy": "ps", "communication.ps": {"servers": 1, "placement": "dedicated"}}, base=base)
    assert ps.iteration_time_s > 2 * ring.iteration_time_s


def test_sharded_ps_beats_single_server():
    one = _run({"communication.strategy": "ps", "communication.ps": {"servers": 1, "placement": "colocated"}})
    many = _run({"communication.strategy": "ps", "communication.ps": {"servers": 4, "placement": "colocated"}})
    assert many.iteration_time_s < one.iteration_time_s


def test_estimate_matches_simulate_without_contention():
    sim = _run({"communication.overlap": False})
    est = _run({"communication.overlap": False}, fidelity="estimate")
    assert est.iteration_time_s == pytest.approx(sim.iteration_time_s, rel=1e-6)
    assert est.fidelity == "estimate"


def test_grad_accumulation_amortises_communication():
    one = _run()
    four = _run({"training.grad_accumulation": 4})
    assert four.throughput.samples_per_s > one.throughput.samples_per_s
    assert four.breakdown_s.compute == pytest.approx(4 * one.breakdown_s.compute)


def test_global_batch_equals_batch_per_gpu_times_gpus():
    a = _run()
    data = copy.deepcopy(BASE)
    del data["workload"]["batch_per_gpu"]
    data["workload"]["global_batch"] = 16 * 32
    b = simulate(load_data(data))
    assert b.iteration_time_s == pytest.approx(a.iteration_time_s)


def test_transformers_report_tokens():
    r = _run({"workload": {"model": "gpt2", "batch_per_gpu": 4, "precision": "bf16", "seq_len": 512}})
    assert r.throughput.tokens_per_s == pytest.approx(r.throughput.samples_per_s * 512)


def test_single_gpu_has_full_scaling_efficiency():
    base = copy.deepcopy(BASE)
    base["cluster"]["nodes"][0].update(count=1, gpus_per_node=1)
    r = _run(base=base)
    assert r.scaling_efficiency == pytest.approx(1.0)
    assert r.breakdown_s.communication == 0


def test_compression_reduces_communication_on_slow_links():
    none = _run({"cluster.nodes.0.nic.bandwidth": "10 Gb/s"})
    fp16 = _run({"cluster.nodes.0.nic.bandwidth": "10 Gb/s", "communication.compression": {"method": "fp16"}})
    assert fp16.breakdown_s.communication < 0.6 * none.breakdown_s.communication
    assert fp16.breakdown_s.compression > 0


def test_fusion_cycle_delays_launches():
    plain = _run({"communication.strategy": "hierarchical"})
    cycled = _run({"communication.strategy": "hierarchical", "communication.fusion_cycle": "20 ms"})
    assert cycled.iteration_time_s >= plain.iteration_time_s


def test_deterministic():
    assert _run().to_dict() == _run().to_dict()


@pytest.mark.parametrize("key, value", [
    ("training.sync", "asp"),  # asp and ssp need a parameter server; BASE uses a ring
    ("training.sync", "ssp"),
    ("training.parallelism", {"dp": 4, "tp": 4, "pp": 1}),
])
def test_unimplemented_modes_are_clear_errors(key, value):
    from simdist.errors import ScenarioError

    with pytest.raises(ScenarioError, match=key.split(".")[0]):
        _run({key: value})


@pytest.mark.parametrize("strategy", ["halving_doubling", "hierarchical", "torus2d", "ps"])
@pytest.mark.parametrize("method", [{"method": "topk", "ratio": 0.01}, {"method": "onebit"}])
def test_codecs_needing_all_gather_fall_back_to_ring_where_the_strategy_has_none(strategy, method):
    data = copy.deepcopy(BASE)
    data["cluster"]["nodes"][0]["count"] = 3  # 12 ranks: no power of two
    r = _run({"communication.strategy": strategy, "communication.compression": method}, base=data)
    assert r.iteration_time_s > 0
