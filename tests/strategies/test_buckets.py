"""Gradient bucketing in backward order: PyTorch DDP's rule (checked against torch's own assignment)
and Horovod's tensor fusion rule."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdist.strategies.buckets import make_buckets
from simdist.workload.specs import LayerSpec, ModelSpec


def _model(sizes):
    layers = tuple(LayerSpec(f"l{i}", "linear", n, 2.0 * n, 1, 1, 1, ((n,),)) for i, n in enumerate(sizes))
    return ModelSpec("toy", "mlp", layers)


def test_fusion_buckets_follow_backward_order_and_never_exceed_the_cap():
    m = _model([100, 200, 300, 400])  # backward produces 400, 300, 200, 100
    buckets = make_buckets(m, bucket_size_bytes=700 * 4, bytes_per_elem=4, rule="fusion")
    assert [b.elems for b in buckets] == [700, 300]
    assert [b.ready_after_layer for b in buckets] == [2, 0]
    assert sum(b.elems for b in buckets) == 1000


def test_fusion_cycles_cut_buffers_at_each_tick_and_within_a_tick_by_the_cap():
    """Horovod fuses each cycle's ready tensors: layers 3 and 2 ready by tick 1, layers 1 and 0 by tick 2."""
    m = _model([100, 200, 300, 400])  # backward produces 400 (layer 3), 300, 200, 100
    cycles = [2, 2, 1, 1]  # per layer, forward index
    buckets = make_buckets(m, bucket_size_bytes=10_000 * 4, bytes_per_elem=4, rule="fusion", cycle_of_layer=cycles)
    assert [b.elems for b in buckets] == [700, 300]  # 400 + 300 at tick 1, 200 + 100 at tick 2
    assert [b.ready_after_layer for b in buckets] == [2, 0]
    capped = make_buckets(m, bucket_size_bytes=500 * 4, bytes_per_elem=4, rule="fusion", cycle_of_layer=cycles)
    assert [b.elems for b in capped] == [400, 300, 300]  # the cap still splits tick 1's 700
    one_tick = make_buckets(m, bucket_size_bytes=10_000 * 4, bytes_per_elem=4, rule="fusion", cycle_of_layer=[1] * 4)
    assert [b.elems for b in one_tick] == [1000]
    with pytest.raises(ValueError, match="fusion"):
        make_buckets(m, 1e6, 4, rule="ddp", cycle_of_layer=cycles)


def test_ddp_buckets_close_once_they_reach_the_cap():
    m = _model([100, 200, 300, 400])
    buckets = make_buckets(m, bucket_size_bytes=600 * 4, bytes_per_elem=4)  # rule="ddp" by default
    assert [b.elems for b in buckets] == [700, 300]  # 400 + 300 crosses 600: closes with the 300 in it
    assert [b.ready_after_layer for b in buckets] == [2, 0]
    assert [b.elems for b in make_buckets(m, 700 * 4, 4)] == [700, 300]  # exactly the cap closes too


def test_oversized_tensor_under_each_rule():
    m = _model([10, 5000, 10])
    assert [b.elems for b in make_buckets(m, 100 * 4, 4, rule="fusion")] == [10, 5000, 10]
    assert [b.elems for b in make_buckets(m, 100 * 4, 4, rule="ddp")] == [5010, 10]


def test_first_bucket_cap():
    m = _model([100] * 10)
    assert [b.elems for b in make_buckets(m, 500 * 4, 4, first_bucket_bytes=200 * 4, rule="fusion")] == [200, 500, 300]
    assert [b.elems for b in make_buckets(m, 500 * 4, 4, first_bucket_bytes=200 * 4)] == [200, 500, 300]


def test_one_bucket_when_cap_exceeds_model_and_unknown_rule():
    m = _model([100] * 10)
    assert len(make_buckets(m, 1e12, 4)) == 1 and len(make_buckets(m, 1e12, 4, rule="fusion")) == 1
    with pytest.raises(ValueError, match="bucketing"):
        make_buckets(m, 1e6, 4, rule="horovod")


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 5000), min_size=1, max_size=12), cap=st.integers(1, 20000),
       first=st.one_of(st.none(), st.integers(1, 20000)))
def test_ddp_rule_matches_torch_compute_bucket_assignment(sizes, cap, first):
    torch = pytest.importorskip("torch")
    dist = pytest.importorskip("torch.distributed")
    params = [torch.empty(n) for n in sizes][::-1]  # DDP hands the Reducer the parameters reversed
    limits = [cap * 4] if first is None else [first * 4, cap * 4]
    indices, _ = dist._compute_bucket_assignment_by_size(params, limits, [False] * len(params))
    ours = make_buckets(_model(sizes), cap * 4, 4, first_bucket_bytes=None if first is None else first * 4)
    assert [b.elems for b in ours] == [sum(params[i].numel() for i in b) for b in indices]


def test_scenario_keys_reach_the_plan():
    from pathlib import Path

    from simdist.io.load import load_scenario
    from simdist.strategies.plan import build_plan

    default = Path(__file__).resolve().parents[2] / "scenarios" / "default.yaml"  # 25 MiB after a 1 MiB first
    plan = build_plan(load_scenario(default))
    sizes = [b.bucket.size_bytes(4) for b in plan.buckets]
    assert 2**20 <= sizes[0] < 25 * 2**20 and all(s >= 25 * 2**20 for s in sizes[1:-1])
    fusion = build_plan(load_scenario(default, ["communication.bucketing=fusion",
                                                "communication.first_bucket_size=25 MiB"]))
    assert all(b.bucket.size_bytes(4) <= 25 * 2**20 for b in fusion.buckets)
    assert sum(b.bucket.elems for b in fusion.buckets) == sum(b.bucket.elems for b in plan.buckets)
