"""Synchronisation modes (asp, ssp, local_sgd), static stragglers and the statistical-efficiency keys."""
from __future__ import annotations

import pytest

from simdist.errors import ScenarioError
from tests.strategies.scenario_runner import run_with

PS = {
    "name": "sync",
    "cluster": {
        "nodes": [{"count": 8, "gpu": "v100-sxm2-32gb", "gpus_per_node": 1, "intra_node": "pcie-gen3",
                   "nic": {"bandwidth": "200 Gb/s", "latency": "5 us", "transport": "rdma"}}],
        "fabric": {"topology": "single_switch"},
    },
    "workload": {"model": "resnet50", "batch_per_gpu": 64, "precision": "fp16"},
    "communication": {"strategy": "ps", "ps": {"servers": 4, "placement": "dedicated"}, "bucket_size": "25 MB"},
    "run": {"iterations": 6, "warmup": 2},
}
STRAGGLER = {"events": [{"at": "0 s", "kind": "straggler", "target": "gpu:3", "slowdown": 2.0}]}


def _run(changes: dict | None = None, fidelity: str = "", base: dict = PS):
    return run_with(base, changes, fidelity)


@pytest.mark.parametrize("fidelity", ["simulate", "estimate"])
def test_ssp_with_bound_zero_equals_bsp(fidelity):
    bsp = _run(fidelity=fidelity)
    ssp = _run({"training.sync": "ssp", "training.staleness": 0}, fidelity=fidelity)
    assert ssp.iteration_time_s == pytest.approx(bsp.iteration_time_s, rel=1e-9)
    assert ssp.throughput.samples_per_s == pytest.approx(bsp.throughput.samples_per_s, rel=1e-9)
    assert ssp.to_dict()["sync"]["staleness"] == {"mean": 0.0, "max": 0}


def test_asp_staleness_is_n_minus_one_with_equal_speeds():
    for count in (4, 8):
        r = _run({"training.sync": "asp", "cluster.nodes.0.count": count})
        st = r.to_dict()["sync"]["staleness"]
        assert st["mean"] == pytest.approx(count - 1, rel=0.05)
        assert count - 1 <= st["max"] <= 2 * (count - 1)


def test_asp_with_one_straggler_keeps_the_others_pace_while_bsp_drops_to_it():
    asp = _run({"training.sync": "asp"}).to_dict()["sync"]
    asp_s = _run({"training.sync": "asp", "failures": STRAGGLER}).to_dict()["sync"]
    rates, slow_rates = asp["per_worker_samples_per_s"], asp_s["per_worker_samples_per_s"]
    for w in range(8):
        if w != 3:
            assert slow_rates[w] == pytest.approx(rates[w], rel=0.03)
    assert slow_rates[3] < 0.6 * rates[3]
    assert asp_s["stragglers"] == {"gpu:3": 2.0}
    bsp = _run()
    bsp_s = _run({"failures": STRAGGLER})
    worker = bsp_s.to_dict()["sync"]["per_worker_samples_per_s"]
    assert worker == [worker[3]] * 8  # everyone at the straggler's pace
    assert worker[3] == pytest.approx(slow_rates[3], rel=0.1)
    assert bsp_s.throughput.samples_per_s < 0.6 * bsp.throughput.samples_per_s
    assert bsp_s.breakdown_s.compute == pytest.approx(2 * bsp.breakdown_s.compute)


def test_ssp_bound_sits_between_bsp_and_asp_with_a_straggler():
    bsp = _run({"failures": STRAGGLER}).throughput.samples_per_s
    ssp = _run({"training.sync": "ssp", "training.staleness": 2, "failures": STRAGGLER}).throughput.samples_per_s
    asp = _run({"training.sync": "asp", "failures": STRAGGLER}).throughput.samples_per_s
    assert bsp * (1 - 1e-9) <= ssp <= asp * (1 + 1e-9)


def test_ssp_staleness_is_bounded():
    r = _run({"training.sync": "ssp", "training.staleness": 1, "failures": STRAGGLER})
    st = r.to_dict()["sync"]["staleness"]
    # a worker may run s iterations ahead of the slowest: at most (s + 1) updates of each other worker
    assert 0 < st["max"] <= 2 * 7


@pytest.mark.parametrize("strategy", ["ring", "ps"])
@pytest.mark.parametrize("fidelity", ["simulate", "estimate"])
def test_local_sgd_divides_communication_per_iteration_by_h(strategy, fidelity):
    changes = {"communication.strategy": strategy, "training.sync": "local_sgd"}
    if strategy != "ps":  # PS settings are refused without a parameter server
        changes["communication.ps"] = {}
    one = _run({**changes, "training.local_steps": 1}, fidelity=fidelity)
    four = _run({**changes, "training.local_steps": 4}, fidelity=fidelity)
    assert four.breakdown_s.communication == pytest.approx(one.breakdown_s.communication / 4, rel=1e-9)
    s1, s4 = one.to_dict()["sync"], four.to_dict()["sync"]
    assert s4["wire_bytes_per_iteration"] == pytest.approx(s1["wire_bytes_per_iteration"] / 4)
    assert four.iteration_time_s < one.iteration_time_s
    # a round is H iterations of compute (with each worker's own optimizer step) plus one exchange
    b = one.breakdown_s
    assert one.iteration_time_s == pytest.approx(b.compute + b.optimizer + b.communication + b.compression, rel=1e-9)


def test_ps_server_load_is_reported():
    r = _run({"cluster.nodes.0.nic.bandwidth": "10 Gb/s"})
    servers = r.to_dict()["sync"]["servers"]
    assert [s["endpoint"] for s in servers] == [8, 9, 10, 11]
    for s in servers:
        assert s["in_Bps"] == pytest.approx(s["out_Bps"])
        assert 0 < s["link_utilization_in"] <= 1 + 1e-9
        # 8 workers push a quarter of the gradients to each server per iteration
        grads = r.to_dict()["sync"]["wire_bytes_per_iteration"]
        assert s["in_Bps"] == pytest.approx(8 * grads / 4 / r.iteration_time_s)
    asp = _run({"training.sync": "asp", "cluster.nodes.0.nic.bandwidth": "10 Gb/s"}).to_dict()
    assert asp["sync"]["aggregate_samples_per_s"] == pytest.approx(asp["throughput"]["samples_per_s"])
    assert all(s["in_Bps"] > 0 for s in asp["sync"]["servers"])


def test_async_modes_need_a_parameter_server():
    with pytest.raises(ScenarioError, match="training.sync"):
        _run({"training.sync": "asp", "communication.strategy": "ring", "communication.ps": {}})


def test_async_is_deterministic():
    a = _run({"training.sync": "asp", "failures": STRAGGLER}).to_dict()
    assert a == _run({"training.sync": "asp", "failures": STRAGGLER}).to_dict()


@pytest.mark.parametrize("event", [
    {"at": "0 s", "kind": "node_down", "target": "node:1"},
    {"at": "1 h", "kind": "straggler", "target": "gpu:1", "slowdown": 1.5},
])
def test_dynamic_failures_need_run_duration(event):
    """Anything but a static straggler runs on the goodput timeline, which needs the simulated wall time."""
    with pytest.raises(ScenarioError, match=r"run\.duration"):
        _run({"failures": {"events": [event]}})


def test_convergence_factor_scales_time_to_target():
    plain = _run().to_dict()["statistical_efficiency"]
    assert plain["relative_time_to_target"] == 1.0 and plain["assumed"]
    r = _run({"training.convergence_factor": 1.25, "communication.compression": {"method": "fp16"},
              "cluster.nodes.0.nic.bandwidth": "10 Gb/s"})
    se = r.to_dict()["statistical_efficiency"]
    assert se["effective_samples_per_s"] == pytest.approx(r.throughput.samples_per_s / 1.25)
    base = _run({"cluster.nodes.0.nic.bandwidth": "10 Gb/s"}).throughput.samples_per_s
    assert se["relative_time_to_target"] == pytest.approx(1.25 * base / r.throughput.samples_per_s)
