"""What compression really ran in a run: per-bucket codec or dense fallback, and the bytes that cross links.

A codec falls back to the dense all_reduce for a bucket it cannot shrink (codecs' `plan`); this report
makes that visible in the result (`strategy.compression_ran`) and the text table instead of the result
naming the requested method alone. Bytes are per worker per exchange: `wire` (the payload a worker
contributes) and `link` (what a rank sends when the collectives run as rings, nccl-tests' bus bytes),
next to the dense all_reduce's link bytes.
"""
from __future__ import annotations

from typing import Sequence

from simdist.compression.base import Codec, Shapes, dense_plan, Bucket
from simdist.compression.placement import bucket_codec_cost, codec_path, describe, ps_pushers
from simdist.compression.registry import make_codec
from simdist.scenario import Scenario, StrategyKind


def compression_report(codec: Codec, bucket_shapes: Sequence[Shapes], grad_bytes_per_elem: float,
                       n_workers: int, runs_on: dict[str, object] | None = None) -> dict[str, object]:
    """`requested`, `ran` (one line), bucket counts, the fallback reasons, per-worker bytes, and `runs_on`
    (codec_runs_on: where the codec ran and its seconds per iteration) when given."""
    requested = codec.method.value
    compressed = fallback = 0
    reasons: dict[str, None] = {}
    wire = link = dense_link = 0.0
    for shapes in bucket_shapes:
        plan = codec.plan(shapes, grad_bytes_per_elem, n_workers)
        wire += plan.wire_bytes(n_workers)
        link += plan.bus_bytes(n_workers)
        dense_link += dense_plan(Bucket.of(shapes, grad_bytes_per_elem)).bus_bytes(n_workers)
        if plan.compressed:
            compressed += 1
        elif Bucket.of(shapes, grad_bytes_per_elem).numel:
            fallback += 1
            if requested != "none":
                reasons.setdefault(codec.fallback_reason(shapes, grad_bytes_per_elem, n_workers), None)
    total = compressed + fallback
    if requested == "none":
        ran = "none"
    elif fallback == 0:
        ran = requested
    elif compressed == 0:
        ran = f"none: dense all_reduce in all {total} buckets ({requested} fell back)"
    else:
        ran = f"{requested} in {compressed} of {total} buckets, dense all_reduce in {fallback} (fell back)"
    return {"requested": requested, "ran": ran, "buckets": total, "compressed_buckets": compressed,
            "dense_fallback_buckets": fallback if requested != "none" else 0, "fallback_reasons": list(reasons),
            "wire_bytes_per_worker": wire, "link_bytes_per_worker": link, "dense_link_bytes_per_worker": dense_link,
            **({"runs_on": runs_on} if runs_on is not None else {})}


def codec_runs_on(scenario: Scenario, bucket_shapes: Sequence[Shapes], grad_bytes_per_elem: float,
                  n_workers: int) -> dict[str, object]:
    """Where the scenario's codec runs on its first node group's device (framework, encode, decode, server:
    compression.placement) and its seconds per exchange of all buckets on each side (`server_s`: one
    server's re-coding of its shards, BytePS only)."""
    spec = scenario.communication.compression
    cal = scenario.compute_calibration
    codec = make_codec(spec, cal.codec_cost_factor(spec.method.value) if cal else 1.0)
    device = scenario.cluster.node_groups[0].gpu
    comm = scenario.communication
    path = codec_path(codec.method, device, comm.strategy == StrategyKind.PS)
    pushers = ps_pushers(scenario, n_workers)
    costs = [bucket_codec_cost(codec, s, device, grad_bytes_per_elem, n_workers, path, comm.ps_servers, pushers)
             for s in bucket_shapes]
    return {**describe(path), "encode_s": sum(c.encode_s for c in costs),
            "decode_s": sum(c.decode_s for c in costs), "server_s": sum(c.server_s for c in costs)}
