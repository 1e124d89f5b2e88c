"""Invariants over random buckets: compression never adds wire bytes, plans are self-consistent."""
import math

from hypothesis import given, settings, strategies as st

from simdist.collectives.schedule import CollectiveOp
from simdist.compression import (Bf16Codec, Fp16Codec, Int8Codec, NoCompression, OneBitCodec, PowerSgdCodec,
                                 RandomKCodec, TopKCodec)
from tests.compression.hw import A100

shapes_st = st.lists(st.lists(st.integers(1, 300), min_size=1, max_size=4).map(tuple), min_size=1, max_size=5)
ratio_st = st.floats(1e-4, 1.0, exclude_min=False)
rank_st = st.integers(1, 64)
workers_st = st.integers(1, 512)
elem_st = st.sampled_from([1, 2, 4, 8])
ef_st = st.booleans()


@st.composite
def codecs(draw):
    kind = draw(st.integers(0, 7))
    ef = draw(ef_st)
    return [NoCompression(), Fp16Codec(), Bf16Codec(), Int8Codec(min_levels=draw(st.integers(1, 64))),
            OneBitCodec(error_feedback=ef), TopKCodec(ratio=draw(ratio_st), error_feedback=ef),
            RandomKCodec(ratio=draw(ratio_st), error_feedback=ef),
            PowerSgdCodec(rank=draw(rank_st), error_feedback=ef)][kind]


def numel(shapes):
    return sum(math.prod(s) for s in shapes)


@settings(max_examples=300, deadline=None)
@given(codecs(), shapes_st, elem_st, workers_st)
def test_compression_never_increases_wire_bytes(codec, shapes, elem, n):
    dense = numel(shapes) * elem
    plan = codec.plan(shapes, elem, n)
    assert 0 < plan.wire_bytes(n) <= dense
    assert codec.wire_bytes(shapes, elem, n) == plan.wire_bytes(n)
    if plan.compressed:
        assert plan.wire_bytes(n) < dense
    else:
        assert plan.collectives == ((CollectiveOp.ALL_REDUCE, dense),) and plan.summable


@settings(max_examples=200, deadline=None)
@given(codecs(), shapes_st, elem_st, workers_st)
def test_costs_are_non_negative_and_zero_without_compression(codec, shapes, elem, n):
    enc = codec.encode_time_s(shapes, A100, elem, n)
    dec = codec.decode_time_s(shapes, A100, n, elem)
    state = codec.error_feedback_bytes(shapes, elem, n)
    assert enc >= 0 and dec >= 0 and state >= 0
    if not codec.plan(shapes, elem, n).compressed:
        assert enc == dec == state == 0


@settings(max_examples=200, deadline=None)
@given(shapes_st, ratio_st, workers_st)
def test_sparse_plans_summability(shapes, ratio, n):
    topk, randk = TopKCodec(ratio=ratio).plan(shapes, 4, n), RandomKCodec(ratio=ratio).plan(shapes, 4, n)
    assert randk.summable
    assert topk.summable is not topk.compressed  # gathered pairs cannot be summed on the way
    # shared-seed random-k sends values only: never more than top-k's pairs
    assert randk.wire_bytes(n) <= topk.wire_bytes(n)


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 2000), st.integers(2, 2000), rank_st)
def test_powersgd_single_matrix(m, cols, r):
    plan = PowerSgdCodec(rank=r).plan([(m, cols)], 4, 8)
    rr = min(m, cols, r)
    if (m + cols) * rr * 2 < m * cols:
        assert plan.wire_bytes(8) == 4 * rr * (m + cols)
    else:
        assert not plan.compressed


@settings(max_examples=100, deadline=None)
@given(shapes_st, st.integers(1, 64))
def test_higher_rank_never_sends_fewer_bytes(shapes, r):
    assert PowerSgdCodec(rank=r).wire_bytes(shapes, 4, 8) <= PowerSgdCodec(rank=r + 1).wire_bytes(shapes, 4, 8)


@settings(max_examples=100, deadline=None)
@given(shapes_st, ratio_st, ratio_st, workers_st)
def test_keeping_more_elements_never_sends_fewer_bytes(shapes, a, b, n):
    lo, hi = min(a, b), max(a, b)
    for codec in (TopKCodec, RandomKCodec):
        assert codec(ratio=lo).wire_bytes(shapes, 4, n) <= codec(ratio=hi).wire_bytes(shapes, 4, n)


@settings(max_examples=100, deadline=None)
@given(codecs(), shapes_st, elem_st, workers_st)
def test_summary_agrees_with_the_single_questions(codec, shapes, elem, n):
    s = codec.summary(shapes, A100, n, elem)
    assert s.plan == codec.plan(shapes, elem, n)
    assert s.wire_bytes == codec.wire_bytes(shapes, elem, n)
    assert s.encode_s == codec.encode_time_s(shapes, A100, elem, n)
    assert s.decode_s == codec.decode_time_s(shapes, A100, n, elem)
    assert s.state_bytes == codec.error_feedback_bytes(shapes, elem, n)
