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
from simdist.compression.placement import bucket_codec_cost, byteps_compresses, codec_path, describe, ps_pushers
from simdist.compression.registry import make_codec
from simdist.scenario import Scenario, StrategyKind


BYTEPS_DENSE = ("BytePS pushes a bucket uncompressed below BYTEPS_MIN_COMPRESS_BYTES (65536) or when the "
                "compressed form would not be smaller")


def compression_report(codec: Codec, bucket_shapes: Sequence[Shapes], grad_bytes_per_elem: float,
                       n_workers: int, runs_on: dict[str, object] | None = None) -> dict[str, object]:
    """`requested`, `ran` (one line), bucket counts, the fallback reasons, per-worker bytes, and `runs_on`
    (codec_runs_on: where the codec ran and its seconds per iteration) when given. On BytePS's path
    (runs_on has ps_payload_bytes) a bucket compresses by BytePS's rule, and the bytes are the push's
    (`wire`) and the push's plus the pull's (`link`, against the dense bucket's two ways)."""
    requested = codec.method.value
    byteps = runs_on is not None and runs_on.get("ps_payload_bytes") is not None
    compressed = fallback = 0
    reasons: dict[str, None] = {}
    wire = link = dense_link = 0.0
    for shapes in bucket_shapes:
        b = Bucket.of(shapes, grad_bytes_per_elem)
        plan = codec.plan(shapes, grad_bytes_per_elem, n_workers)
        wire += plan.wire_bytes(n_workers)
        link += plan.bus_bytes(n_workers)
        dense_link += dense_plan(b).bus_bytes(n_workers)
        if byteps_compresses(codec, b) if byteps else plan.compressed:
            compressed += 1
        elif b.numel:
            fallback += 1
            if requested != "none":
                reasons.setdefault(BYTEPS_DENSE if byteps else
                                   codec.fallback_reason(shapes, grad_bytes_per_elem, n_workers), None)
    total = compressed + fallback
    if requested == "none":
        ran = "none"
    elif fallback == 0:
        ran = requested
    elif compressed == 0:
        ran = f"none: dense all_reduce in all {total} buckets ({requested} fell back)"
    else:
        ran = f"{requested} in {compressed} of {total} buckets, dense all_reduce in {fallback} (fell back)"
    if byteps:  # push and pull through the worker's NIC, no ring
        wire, link = float(runs_on["ps_payload_bytes"]), 2.0 * float(runs_on["ps_payload_bytes"])
        dense_link = 2.0 * sum(Bucket.of(s, grad_bytes_per_elem).dense_bytes for s in bucket_shapes)
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
    out = {**describe(path), "encode_s": sum(c.encode_s for c in costs),
           "decode_s": sum(c.decode_s for c in costs), "server_s": sum(c.server_s for c in costs)}
    if path.server is not None:  # BytePS: what each worker pushes (and pulls), compressed or dense per bucket
        out["ps_payload_bytes"] = sum(c.ps_payload_bytes or 0.0 for c in costs)
    return out
