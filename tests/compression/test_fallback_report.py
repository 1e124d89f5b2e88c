"""A fallback is never silent: the result and the text table say what compression ran, and the dense
fallback is decided on the bytes that cross links (not on per-worker payloads)."""
from __future__ import annotations

import pytest

from simdist.compression import make_codec
from simdist.compression.base import Bucket, dense_plan
from simdist.compression.report import compression_report
from simdist.compression.sparse import TopKCodec
from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.compare_input import check_codec
from simdist.io.load import load_data
from simdist.report import print_result
from simdist.scenario import CompressionMethod, CompressionSpec

BUCKET = [(2500, 1000), (1000, 3500), (10000,), (240000,)]  # 25 MB of fp32


def _run(method: str, workers: int, **params):
    d = {"cluster": {"nodes": [{"count": workers, "gpu": "a100-sxm4-40gb", "nic": "ib-hdr"}]},
         "workload": {"model": "resnet50", "batch_per_gpu": 32},
         "communication": {"compression": {"method": method, **params}}, "run": {"fidelity": "estimate"}}
    s = load_data(d)
    return s, simulate(s)


def test_int8_at_128_workers_says_it_ran_dense_and_why():
    s, r = _run("int8", 128)
    ran = r.to_dict()["strategy"]["compression_ran"]
    assert ran["requested"] == "int8" and ran["compressed_buckets"] == 0
    assert ran["dense_fallback_buckets"] == ran["buckets"] > 0 and ran["ran"].startswith("none: dense")
    assert any("int32" in reason for reason in ran["fallback_reasons"])
    assert r.breakdown_s.compression == 0.0  # no codec kernels run, and the result says so
    table = print_result(s, r)
    assert "int8 fell back" in table and "int32" in table
    s16, r16 = _run("int8", 16)
    assert r16.to_dict()["strategy"]["compression_ran"]["ran"] == "int8" and r16.breakdown_s.compression > 0
    assert "fell back" not in print_result(s16, r16)


def test_topk_gather_at_512_workers_is_measured_in_link_bytes_and_falls_back():
    codec = TopKCodec(ratio=0.02)
    b = Bucket.of(BUCKET, 4)
    gather = codec._compressed_plan(b, 512)
    dense = dense_plan(b)
    # the per-worker payload is 4% of dense (values + indices), but a gather of 512 of them sends ~10x dense
    assert gather.wire_bytes(512) == pytest.approx(0.04 * dense.wire_bytes(512), rel=1e-3)
    assert gather.bus_bytes(512) > 5 * dense.bus_bytes(512)
    plan = codec.plan(BUCKET, 4, 512)
    assert not plan.compressed and plan.bus_bytes(512) == dense.bus_bytes(512)
    assert "bytes over the links" in codec.fallback_reason(BUCKET, 4, 512)
    assert codec.plan(BUCKET, 4, 16).compressed and codec.fallback_reason(BUCKET, 4, 16) == ""


def test_report_gives_wire_and_link_bytes():
    rep = compression_report(TopKCodec(ratio=0.01), [BUCKET], 4, 16)
    plan = TopKCodec(ratio=0.01).plan(BUCKET, 4, 16)
    assert rep["wire_bytes_per_worker"] == pytest.approx(plan.wire_bytes(16))
    assert rep["link_bytes_per_worker"] == pytest.approx(plan.bus_bytes(16)) == pytest.approx(15 * plan.wire_bytes(16))
    assert rep["dense_link_bytes_per_worker"] == pytest.approx(2 * 15 / 16 * 25e6)
    assert rep["ran"] == "topk" and rep["fallback_reasons"] == []
    none = compression_report(make_codec(CompressionSpec()), [BUCKET], 4, 16)
    assert none["ran"] == "none" and none["dense_fallback_buckets"] == 0


@pytest.mark.parametrize("workers", [2, 8, 64, 512])
@pytest.mark.parametrize("method,params", [("topk", {"ratio": 0.01}), ("randomk", {"ratio": 0.01}), ("onebit", {}),
                                           ("int8", {}), ("fp16", {}), ("powersgd", {"rank": 4})])
def test_compression_never_sends_more_over_links_than_dense(method, params, workers):
    codec = make_codec(CompressionSpec(CompressionMethod(method), **params))
    assert codec.plan(BUCKET, 4, workers).bus_bytes(workers) <= dense_plan(Bucket.of(BUCKET, 4)).bus_bytes(workers)


def test_error_feedback_off_is_refused_where_there_is_none():
    with pytest.raises(ScenarioError, match="communication.compression.error_feedback"):
        check_codec(CompressionSpec(CompressionMethod.INT8, error_feedback=False))
    make_codec(CompressionSpec(CompressionMethod.ONEBIT, error_feedback=False))
