"""What each extra DDP bucket costs: its all-reduce call (NCCL's per-call latency on the chosen algorithm) and,
with the early reducer's average (communication.ddp_average: per_bucket), a division kernel on the compute
stream as it fills; and how the reducer's copy of the reduced buckets back into .grad after the backward hides
behind a large last bucket's all-reduce but not behind a small one's. Two DGX-1 (4 x 100 Gb/s InfiniBand each),
ResNet-50 fp32, batch 32, 1 MB against 25 MB buckets."""
from __future__ import annotations

import pytest

from simdist.compute import DEFAULT_LAUNCH_OVERHEAD_S
from simdist.engine.context import build_context
from simdist.engine.simulation import simulate
from simdist.io.load import load_scenario
from simdist.scenario import Fidelity
from simdist.strategies.buckets import Bucket, bucket_prescale_s, grad_copy_back_s, shifted_by_prescale
from simdist.strategies.plan import build_plan

BASE = "validation/published/scenarios/ddp-resnet50-dgx.yaml"
TWO_DGX1 = ["cluster.nodes.0.count=2", "workload.precision=fp32", "workload.batch_per_gpu=32",
            "cluster.fabric={topology: single_switch}", "communication.first_bucket_size=null",
            "run.fidelity=estimate"]


NO_INTERFERENCE = "cluster.nodes.0.gpu={base: v100-sxm2-16gb, comm_interference: 0}"


def _load(bucket: str, *extra: str):
    return load_scenario(BASE, TWO_DGX1 + [f"communication.bucket_size={bucket}", *extra])


def test_copy_back_hand_calculation():
    # 3 tensors, 1e6 fp32 elements: 4 MB read and written at 720 GB/s, plus a copy kernel per tensor
    bucket = Bucket(0, ((500, 1000), (250, 1000), (250, 1000)), 1_000_000, 0)
    assert grad_copy_back_s(bucket, 4, 720e9, 5e-6) == pytest.approx(2 * 4e6 / 720e9 + 3 * 5e-6)


def test_small_buckets_leave_the_whole_copy_back_after_the_backward():
    """Without interference, 1 MB buckets: every all-reduce but the last (0.6 MB, 74 us) ends long before the
    backward does, so the copies run back to back after it: the step is forward + backward + every bucket's copy
    (2 x 102,228,128 B / 720 GB/s + 161 tensors x 5 us = 1.089 ms) + the optimizer. With 25 MB buckets the first
    three buckets' copies run while the last bucket's all-reduce does, so the step grows by less."""
    plan = build_plan(_load("1 MB", NO_INTERFERENCE))
    cc = plan.classes[0]
    assert sum(cc.grad_copy_s) == pytest.approx(2 * 102_228_128 / 720e9 + 161 * DEFAULT_LAUNCH_OVERHEAD_S)
    step = simulate(_load("1 MB", NO_INTERFERENCE)).iteration_time_s
    assert step == pytest.approx(cc.fwd_s + cc.bwd_s + sum(cc.grad_copy_s) + cc.optimizer_s, rel=1e-9)
    large = build_plan(_load("25 MB", NO_INTERFERENCE)).classes[0]
    assert simulate(_load("25 MB", NO_INTERFERENCE)).iteration_time_s < (
        large.fwd_s + large.bwd_s + sum(large.grad_copy_s) + large.optimizer_s + 0.7e-3)


def test_no_copy_back_where_the_reducer_does_not_run():
    """Horovod's fusion buffer is copied out on its own stream (fusion_copy_s); a parameter server's workers and
    DeepSpeed's 1-bit compressed all-reduce do not go through DDP's reducer."""
    for extra in ("communication.bucketing=fusion", "communication.compression={method: onebit}"):
        assert build_plan(_load("25 MB", extra)).classes[0].grad_copy_s == ()


def test_prescale_kernel_hand_calculation():
    # 1 MB read and written at 720 GB/s, plus one launch
    assert bucket_prescale_s(1e6, 720e9, 5e-6) == pytest.approx(2e6 / 720e9 + 5e-6)
    ready, extra = shifted_by_prescale([1.0, 2.0, 3.0], [0.1, 0.2, 0.3])
    assert ready == pytest.approx((1.1, 2.3, 3.6)) and extra == pytest.approx(0.6)


def test_an_extra_bucket_costs_its_call_latency():
    """in_copy (today's reducer): a bucket's only cost of its own is its all-reduce call; NCCL's per-call latency
    makes 35 calls of about 1 MB take longer than 4 of 25 MB for the same bytes."""
    small, large = build_plan(_load("1 MB")), build_plan(_load("25 MB"))
    assert (len(small.buckets), len(large.buckets)) == (35, 4)
    ctx = build_context(_load("1 MB"), Fidelity.ESTIMATE)
    calls = lambda plan: sum(ctx.collective_time(op, size) for b in plan.buckets for op, size in b.collectives)
    assert calls(small) > calls(large) * 1.2


def test_per_bucket_average_costs_a_launch_per_bucket_on_the_compute_stream():
    """per_bucket: every bucket's division runs on the compute stream, so the step grows by the sum of the
    kernels; the bytes are the whole gradient read and written once either way, so 1 MB buckets pay
    (35 - 4) more launches than 25 MB ones: 31 x 5 us = 155 us (hand calculation)."""
    grown = {}
    for bucket in ("1 MB", "25 MB"):
        before = simulate(_load(bucket)).iteration_time_s
        after = simulate(_load(bucket, "communication.ddp_average=per_bucket")).iteration_time_s
        grown[bucket] = after - before
        plan = build_plan(_load(bucket, "communication.ddp_average=per_bucket"))
        assert grown[bucket] == pytest.approx(plan.classes[0].bwd_s - build_plan(_load(bucket)).classes[0].bwd_s,
                                              rel=1e-6)
    assert grown["1 MB"] - grown["25 MB"] == pytest.approx(31 * DEFAULT_LAUNCH_OVERHEAD_S, rel=1e-6)


def test_one_megabyte_buckets_are_slower_on_two_dgx1():
    """Measured slower with 1 MB buckets. 35 calls keep NCCL's kernels (and their SMs, the catalog's interference)
    beside the backward for 4.9 ms against 3.2, and nothing hides the copy back into .grad after the backward,
    where 25 MB buckets copy three buckets while the last one's all-reduce runs."""
    for average in ("in_copy", "per_bucket"):
        small = simulate(_load("1 MB", f"communication.ddp_average={average}")).iteration_time_s
        large = simulate(_load("25 MB", f"communication.ddp_average={average}")).iteration_time_s
        assert small > large

