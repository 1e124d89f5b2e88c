"""Gradient bucketing in backward order, DDP style."""
from simdist.strategies.buckets import make_buckets
from simdist.workload.specs import LayerSpec, ModelSpec


def _model(sizes):
    layers = tuple(LayerSpec(f"l{i}", "linear", n, 2.0 * n, 1, 1, 1, ((n,),)) for i, n in enumerate(sizes))
    return ModelSpec("toy", "mlp", layers)


def test_buckets_follow_backward_order_and_cap():
    m = _model([100, 200, 300, 400])  # backward produces 400, 300, 200, 100
    buckets = make_buckets(m, bucket_size_bytes=700 * 4, bytes_per_elem=4)
    assert [b.elems for b in buckets] == [700, 300]
    assert [b.ready_after_layer for b in buckets] == [2, 0]
    assert sum(b.elems for b in buckets) == 1000


def test_oversized_tensor_gets_its_own_bucket():
    m = _model([10, 5000, 10])
    buckets = make_buckets(m, bucket_size_bytes=100 * 4, bytes_per_elem=4)
    assert [b.elems for b in buckets] == [10, 5000, 10]


def test_first_bucket_cap():
    m = _model([100] * 10)
    buckets = make_buckets(m, bucket_size_bytes=500 * 4, bytes_per_elem=4, first_bucket_bytes=200 * 4)
    assert [b.elems for b in buckets] == [200, 500, 300]


def test_one_bucket_when_cap_exceeds_model():
    m = _model([100] * 10)
    assert len(make_buckets(m, 1e12, 4)) == 1
