"""Every result carries `cost`, priced once in simulate(): training, benchmark and failure (goodput) runs."""
from __future__ import annotations

import copy

import pytest

from simdist.engine.simulation import simulate
from simdist.io.load import load_data, load_scenario
from simdist.planner.rows import result_values
from simdist.report import print_result

TRAIN = {
    "name": "cost",
    "cluster": {"nodes": [{"count": 2, "gpu": "a100-sxm4-80gb", "gpus_per_node": 2, "intra_node": "pcie-gen4",
                           "nic": {"bandwidth": "100 Gb/s", "latency": "2 us", "transport": "rdma"}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": "resnet50", "batch_per_gpu": 32, "precision": "fp16"},
    "run": {"iterations": 3, "warmup": 1},
}


def _price(scenario) -> float:
    return sum(g.count * g.gpus_per_node * g.gpu.price_per_hour_usd for g in scenario.cluster.node_groups)


def test_a_training_result_carries_its_price_per_hour_and_per_sample():
    s = load_data(copy.deepcopy(TRAIN))
    r = simulate(s, fidelity="estimate")
    cost = r.to_dict()["cost"]
    assert cost["price_per_hour_usd"] == pytest.approx(4 * s.cluster.node_groups[0].gpu.price_per_hour_usd)
    assert cost["price_per_hour_usd"] > 0
    assert cost["per_sample_usd"] == pytest.approx(cost["price_per_hour_usd"] / 3600 / r.throughput.samples_per_s)
    assert cost["per_token_usd"] is None  # resnet50 has no tokens
    assert cost["per_useful_sample_usd"] is None  # no failures
    assert "$" in print_result(s, r) and "/sample" in print_result(s, r)


def test_the_planner_row_reads_the_result_cost():
    s = load_data(copy.deepcopy(TRAIN))
    r = simulate(s, fidelity="estimate")
    row = result_values(s, r)
    assert row["cost_per_hour_usd"] == r.cost.price_per_hour_usd
    assert row["cost_per_sample_usd"] == r.cost.per_sample_usd


def test_a_user_price_moves_the_cost():
    data = copy.deepcopy(TRAIN)
    data["cluster"]["nodes"][0]["gpu"] = {"base": "a100-sxm4-80gb", "price_per_hour_usd": 1.0}
    r = simulate(load_data(data), fidelity="estimate")
    assert r.to_dict()["cost"]["price_per_hour_usd"] == pytest.approx(4.0)


def test_a_benchmark_result_gets_its_price_per_hour_only():
    s = load_scenario("scenarios/examples/nvswitch-8gpu-allreduce.yaml")
    cost = simulate(s, fidelity="estimate").to_dict()["cost"]
    assert cost == {"price_per_hour_usd": pytest.approx(_price(s))}


def test_a_failure_run_prices_the_useful_sample_by_the_goodput_ratio():
    data = copy.deepcopy(TRAIN)
    data["cluster"]["fabric"] = {"topology": "fat_tree", "nodes_per_leaf": 2,
                                 "link": {"bandwidth": "100 Gb/s", "latency": "1 us"}}
    data["failures"] = {"recovery": {"policy": "checkpoint_restart", "checkpoint_interval": "1 h",
                                     "checkpoint_write": "30 s", "detection": "1 min", "restart": "4 min"},
                        "events": [{"at": "150 min", "kind": "node_down", "target": "node:1"}]}
    data["run"] = {"duration": "24 h", "warmup": 2}
    r = simulate(load_data(data), fidelity="estimate")
    cost, ratio = r.to_dict()["cost"], r.goodput.ratio
    assert 0 < ratio < 1
    assert cost["per_useful_sample_usd"] == pytest.approx(cost["per_sample_usd"] / ratio)
    assert result_values(load_data(data), r)["goodput_ratio"] == ratio
