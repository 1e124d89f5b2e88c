"""Each GPU's price in a result's cost carries its basis and date (catalog), or 'given' (the scenario's own),
and the text report prints them; every dated catalog price cites where it was read."""
from __future__ import annotations

import re
from pathlib import Path

import simdist
from simdist.io import catalog
from simdist.report import cost_text

ROOT = Path(__file__).resolve().parents[2]


def test_catalog_price_carries_basis_and_date():
    cost = simdist.estimate(str(ROOT / "scenarios/default.yaml")).to_dict()["cost"]
    gpu = catalog.gpus()["a100-sxm4-80gb"]
    assert cost["gpu_price_source"] == {"a100-sxm4-80gb": {"basis": gpu.price_basis, "date": gpu.price_date}}
    assert gpu.price_basis and re.fullmatch(r"\d{4}-\d\d|unknown", gpu.price_date)
    text = cost_text(cost)
    assert gpu.price_basis in text and f"price date {gpu.price_date}" in text
    assert f"a100-sxm4-80gb at ${gpu.price_per_hour_usd:.4g}/GPU-hour" in text


def test_a_given_price_says_given():
    spec = simdist.load(str(ROOT / "scenarios/default.yaml"),
                        {"cluster.nodes.0.gpu": {"base": "a100-sxm4-80gb", "price_per_hour_usd": 1.5}})
    cost = simdist.estimate(spec).to_dict()["cost"]
    assert cost["gpu_price_source"] == {"a100-sxm4-80gb": {"basis": "given", "date": ""}}
    assert "given (price date -)" in cost_text(cost)


def test_dated_catalog_prices_name_their_source_and_undated_ones_say_so():
    for key, gpu in catalog.gpus().items():
        if gpu.price_date == "unknown":
            assert "UNCERTAIN" in gpu.price_basis, key
        else:  # a dated price names the month inside its basis too, or the source that dates it
            year = gpu.price_date[:4]
            assert year in gpu.price_basis, (key, gpu.price_basis)
