"""Cost per hour, per sample and per useful sample, from the GPUs' prices."""
from __future__ import annotations

from pathlib import Path

import pytest

from simdist.io.load import load_scenario
from simdist.results.cost import cluster_price_per_hour, cost_summary

ROOT = Path(__file__).resolve().parents[2]


def test_price_and_per_sample_cost():
    scenario = load_scenario(ROOT / "scenarios/default.yaml")  # 16 nodes x 8 A100 80GB
    price = 128 * scenario.cluster.node_groups[0].gpu.price_per_hour_usd
    assert cluster_price_per_hour(scenario) == pytest.approx(price)
    cost = cost_summary(scenario, samples_per_s=1000.0, tokens_per_s=None, goodput_ratio=0.5)
    assert cost.per_sample_usd == pytest.approx(price / 3600 / 1000)
    assert cost.per_useful_sample_usd == pytest.approx(2 * cost.per_sample_usd)
    assert cost.per_token_usd is None and cost.gpu_price_per_hour_usd == {"a100-sxm4-80gb": price / 128}
