"""`simdist plan --objective goodput`: ranks by useful throughput (rate x goodput ratio) under failures."""
from __future__ import annotations

import copy

import pytest

from simdist.errors import ScenarioError
from simdist.io.sweep_load import check_goodput, load_point, plan_spec
from simdist.planner.plan import search
from simdist.planner.plan_report import format_plan

BASE = {  # 8 GPUs, one node lost at 150 min of a 24 h run: the checkpoint interval sets the lost work
    "name": "plan-goodput",
    "cluster": {
        "nodes": [{"count": 4, "gpu": "a100-sxm4-80gb", "gpus_per_node": 2, "intra_node": "pcie-gen4",
                   "nic": {"bandwidth": "100 Gb/s", "latency": "2 us", "transport": "rdma"}}],
        "fabric": {"topology": "fat_tree", "nodes_per_leaf": 2, "link": {"bandwidth": "100 Gb/s", "latency": "1 us"}},
    },
    "workload": {"model": "resnet50", "batch_per_gpu": 32, "precision": "fp16"},
    "failures": {"recovery": {"policy": "checkpoint_restart", "checkpoint_interval": "1 h",
                              "checkpoint_write": "30 s", "detection": "1 min", "restart": "4 min"},
                 "events": [{"at": "150 min", "kind": "node_down", "target": "node:1"}]},
    "run": {"duration": "24 h", "warmup": 2},
}
AXES = ["failures.recovery.checkpoint_interval=10 min,1 h,2 h,6 h", "communication.strategy=ring,ps"]


def test_goodput_ranks_by_rate_times_goodput_ratio():
    plan = search(plan_spec({}, AXES, {"objective": "goodput", "confirm": 1}), copy.deepcopy(BASE), load_point, jobs=1)
    useful = [r["samples_per_s"] * r["goodput_ratio"] for r in plan.ranked]
    assert len(plan.ranked) == 8 and useful == sorted(useful, reverse=True)
    best = plan.ranked[0]
    # 6 h checkpoints lose the whole 150 min; 10 min ones cost 144 writes of 30 s; 2 h loses 29.5 min and wins
    assert (best["failures.recovery.checkpoint_interval"], best["communication.strategy"]) == ("2 h", "ring")
    assert best["confirmed"] and 0 < best["goodput_ratio"] < 1
    six = next(r for r in plan.ranked if r["failures.recovery.checkpoint_interval"] == "6 h"
               and r["communication.strategy"] == "ring")
    assert six["goodput_ratio"] == pytest.approx((1440 - 150 - 5 - 3 * 0.5) / 1440, abs=2e-3)
    text = format_plan(plan, plan_spec({}, AXES, {"objective": "goodput"}))
    assert "goodput_ratio" in text and "useful samples/s" in text


def test_throughput_ignores_the_ratio_and_goodput_does_not():
    thr = search(plan_spec({}, AXES, {"objective": "throughput", "confirm": 0}), copy.deepcopy(BASE), load_point,
                 jobs=1)
    # every ring point has the same healthy rate; throughput cannot tell the intervals apart
    rates = {r["samples_per_s"] for r in thr.ranked if r["communication.strategy"] == "ring"}
    assert max(rates) == pytest.approx(min(rates))


def test_goodput_without_failures_is_a_one_line_error():
    base = copy.deepcopy(BASE)
    del base["failures"]
    base["run"] = {"iterations": 3}
    with pytest.raises(ScenarioError, match="goodput needs a failures section") as err:
        check_goodput(plan_spec({}, ["communication.strategy=ring,ps"], {"objective": "goodput"}), base)
    assert "\n" not in str(err.value)
