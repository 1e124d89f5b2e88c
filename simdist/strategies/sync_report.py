"""Figures the synchronisation modes report: per-worker throughput, staleness, server load, wire bytes.

Plain functions over the logs and the plan, so both fidelities and every mode build the same keys
(documented in docs/model.md, "Synchronisation modes").
"""
from __future__ import annotations

import statistics
from typing import Mapping, Sequence

from simdist.results.records import SyncSummary
from simdist.scenario import Scenario, StrategyKind, SyncMode
from simdist.strategies.async_ps import worker_payload_bytes
from simdist.strategies.plan import IterationPlan


def worker_iteration_s(finish_s: Sequence[float], warmup: int) -> float:
    """Mean time between one worker's iteration ends (the first from time 0), after `warmup` iterations."""
    gaps = [b - a for a, b in zip([0.0, *finish_s[:-1]], finish_s)]
    steady = gaps[warmup:] or gaps[-1:]
    return statistics.fmean(steady)


def staleness_stats(samples: Sequence[int]) -> dict[str, float]:
    """Mean and max of the observed staleness (0 when every update was fresh)."""
    if not samples:
        return {"mean": 0.0, "max": 0}
    return {"mean": statistics.fmean(samples), "max": max(samples)}


def wire_bytes_per_iteration(plan: IterationPlan) -> float:
    """Bytes one worker contributes per exchange: its payload of every codec collective of every bucket."""
    return sum(worker_payload_bytes(op, size, plan.dp) for bc in plan.buckets for op, size in bc.collectives)


def ps_bytes_per_exchange(plan: IterationPlan, ranks: Sequence[int], servers: Sequence[int],
                          gpus_per_worker: int = 1) -> dict[int, float]:
    """Bytes each server receives in one exchange of every worker (and sends back: pull = push).
    `gpus_per_worker` > 1: node-aggregated PS, each GPU pushes 1/g of its node's sum (collectives/ps.py)."""
    per_worker = wire_bytes_per_iteration(plan) / max(1, len(servers)) / max(1, gpus_per_worker)
    return {sv: per_worker * sum(1 for w in ranks if w != sv) for sv in servers}


def server_load(topology, servers: Sequence[int], in_bytes: Mapping[int, float], out_bytes: Mapping[int, float],
                elapsed_s: float, utilization: Mapping[str, float] | None) -> list[dict]:
    """Per server: bytes/s in and out, and the busiest utilisation of its own links in each direction
    (None without flows, i.e. under `estimate`)."""
    into_of, out_of = _busiest_by_vertex(utilization) if utilization is not None else ({}, {})
    out = []
    for sv in servers:
        vertex = topology.endpoints[sv]
        row = {"endpoint": int(sv), "vertex": vertex,
               "in_Bps": in_bytes.get(sv, 0.0) / elapsed_s if elapsed_s > 0 else 0.0,
               "out_Bps": out_bytes.get(sv, 0.0) / elapsed_s if elapsed_s > 0 else 0.0,
               "link_utilization_in": None, "link_utilization_out": None}
        if utilization is not None:
            row["link_utilization_in"] = round(into_of.get(vertex, 0.0), 6)
            row["link_utilization_out"] = round(out_of.get(vertex, 0.0), 6)
        out.append(row)
    return out


def _busiest_by_vertex(utilization: Mapping[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """({vertex: the busiest utilisation of the links into it}, {vertex: ... out of it}) from the
    "u->v" link names, in one pass (was two scans of every link per server: ~0.3 s at 16,384 GPUs)."""
    into: dict[str, float] = {}
    outof: dict[str, float] = {}
    for name, u in utilization.items():
        a, _, b = name.partition("->")
        if u > into.get(b, -1.0):
            into[b] = u
        if u > outof.get(a, -1.0):
            outof[a] = u
    return into, outof


def servers_row(scenario: Scenario, ctx, in_bytes, out_bytes, elapsed_s, simulated: bool) -> list[dict] | None:
    """`sync.servers`: each parameter server's load (None without one), link utilisation where simulated."""
    if scenario.communication.strategy != StrategyKind.PS:
        return None
    util = ctx.network.link_utilization(ctx.env.now) if simulated and ctx.env.now > 0 else None
    return server_load(ctx.topology, ctx.servers, in_bytes, out_bytes, elapsed_s, util)


def sync_summary(scenario: Scenario, plan: IterationPlan, rates: list[float], period: int,
                 staleness: dict[str, float], servers: list[dict] | None, **asynchronous) -> SyncSummary:
    """A data-parallel run's `sync`: per-worker rates, wire bytes, stragglers, staleness and servers
    (`asynchronous`: the asp / ssp figures, aggregate_samples_per_s and staleness_bound)."""
    t = scenario.training
    stragglers = sorted((r, c.rank_class.slowdown) for c in plan.classes if c.rank_class.slowdown != 1.0
                        for r in c.rank_class.ranks)
    return SyncSummary(t.sync.value, rates, min(rates), max(rates), wire_bytes_per_iteration(plan) / period,
                       {f"gpu:{r}": x for r, x in stragglers}, staleness, servers,
                       local_steps=period if t.sync == SyncMode.LOCAL_SGD else None, **asynchronous)
