"""What a result costs: the cluster's price per hour from each GPU's price_per_hour_usd, per sample and per token.

Prices are the catalog's indicative figures (each with its basis and date, `simdist catalog gpus`, carried
into the result as `gpu_price_source`) unless the scenario gives its own with an inline GPU spec. Under failures the cost per *useful* sample uses the
goodput ratio (useful time / wall time). Dedicated PS server hosts are not priced (no GPU price).
"""
from __future__ import annotations

from typing import Any

from simdist.results.records import TrainingCost

HOUR_S = 3600.0


def cluster_price_per_hour(scenario: Any) -> float:
    """Every GPU of every node group at its price per GPU-hour."""
    return sum(g.count * g.gpus_per_node * g.gpu.price_per_hour_usd for g in scenario.cluster.node_groups)


def cost_summary(scenario: Any, samples_per_s: float | None, tokens_per_s: float | None,
                 goodput_ratio: float | None = None) -> TrainingCost:
    """{price_per_hour_usd, per_sample_usd, per_token_usd, per_useful_sample_usd, per_useful_token_usd,
    gpu_price_per_hour_usd, gpu_price_source}: each GPU's price with its basis and date, so a reader can see
    what the cost rests on (a catalog list price of some month, or the scenario's own)."""
    price = cluster_price_per_hour(scenario)
    per_s = price / HOUR_S

    def per(rate: float | None, ratio: float | None = 1.0) -> float | None:
        if not price or not rate or ratio is None or ratio <= 0:
            return None
        return per_s / (rate * ratio)

    kinds, sources = {}, {}
    for g in scenario.cluster.node_groups:
        kinds[g.gpu.key] = g.gpu.price_per_hour_usd
        sources[g.gpu.key] = price_source(g.gpu)
    return TrainingCost(price, per(samples_per_s), per(tokens_per_s),
                        per(samples_per_s, goodput_ratio) if goodput_ratio is not None else None,
                        per(tokens_per_s, goodput_ratio) if goodput_ratio is not None else None, kinds, sources)


def price_source(gpu: Any) -> dict[str, str]:
    """Where a GPU's price comes from: {basis, date}; a price set in the scenario is basis 'given', date ''."""
    return {"basis": gpu.price_basis or "given", "date": gpu.price_date or ""}
