"""Horovod's tensor fusion in the preset: fused buffers never exceed HOROVOD_FUSION_THRESHOLD (the preset's
64 MB, Horovod's default before v0.21), a buffer is launched on a tick of HOROVOD_CYCLE_TIME (5 ms then)
after its last tensor is ready (or when the communication stream frees). With interference the backward
stretches and each buffer keeps its planned wait after becoming ready (the plan's grid, in unslowed time)."""
from __future__ import annotations

from math import prod

import pytest

from simdist import api
from simdist.strategies.plan import build_plan

PRESET = "scenarios/presets/horovod.yaml"
CYCLE = 0.005


def _last_iteration(result):
    last = max(r.iteration for r in result.records)
    return [r for r in result.records if r.iteration == last and r.track in ("gpu:0", "comm:0")]


def test_preset_is_horovod_before_0_21():
    sc = api.load(PRESET)
    assert sc.communication.bucket_size_bytes == 64e6 and sc.communication.fusion_cycle_s == CYCLE
    assert sc.communication.bucketing.value == "fusion"


def test_fused_buffers_never_exceed_the_threshold_and_keep_backward_order():
    sc = api.load(PRESET)
    plan = build_plan(sc)
    grad = {"fp32": 4, "fp16": 2, "bf16": 2}[sc.workload.grad_dtype.value]
    sizes = [b.bucket.elems * grad for b in plan.buckets]
    assert len(sizes) >= 2 and all(s <= 64e6 for s in sizes)
    # each buffer is full: the first tensor of the next one would have overflowed it
    for cur, nxt in zip(plan.buckets, plan.buckets[1:]):
        assert (cur.bucket.elems + prod(nxt.bucket.shapes[0])) * grad > 64e6
    order = [b.bucket.ready_after_layer for b in plan.buckets]
    assert order == sorted(order, reverse=True)


@pytest.mark.parametrize("interference", [0.0])
def test_buffers_launch_on_cycle_ticks_from_the_backward_start(interference):
    over = {"cluster.nodes.0.gpu": {"base": "v100-sxm2-32gb", "comm_interference": interference}}
    sim = api.simulate(api.load(PRESET, over))
    est = api.estimate(api.load(PRESET, over))
    assert est.iteration_time_s == pytest.approx(sim.iteration_time_s, rel=1e-9)
    recs = _last_iteration(sim)
    backward = [r for r in recs if r.name.startswith("backward")]
    origin = backward[0].start_s
    ready = {int(r.name.split("(bucket")[1].split()[0].split("-")[0]): r.end_s for r in backward if "(bucket" in r.name}
    comm = sorted((r for r in recs if r.track == "comm:0"), key=lambda r: r.start_s)
    free = 0.0
    for r in comm:
        j = int(r.name.split()[0].removeprefix("bucket"))
        tick = origin + -(-(ready[j] - origin) // CYCLE) * CYCLE  # first tick at or after the buffer is ready
        assert r.start_s == pytest.approx(max(tick, free), abs=1e-9)
        free = r.end_s
    assert len(comm) == len(ready) >= 2


def test_with_interference_the_wait_keeps_its_planned_length():
    over = {"cluster.nodes.0.gpu": {"base": "v100-sxm2-32gb", "comm_interference": 0.4}}
    sim = api.simulate(api.load(PRESET, over))
    assert api.estimate(api.load(PRESET, over)).iteration_time_s == pytest.approx(sim.iteration_time_s, rel=1e-9)
    plain = api.simulate(api.load(PRESET, {"cluster.nodes.0.gpu": {"base": "v100-sxm2-32gb", "comm_interference": 0}}))
    assert sim.iteration_time_s > plain.iteration_time_s


def test_no_cycle_launches_when_ready_and_a_longer_cycle_never_helps():
    times = {}
    for cycle in ("0 s", "5 ms", "20 ms"):
        times[cycle] = api.estimate(api.load(PRESET, {"communication.fusion_cycle": cycle})).iteration_time_s
    assert times["0 s"] <= times["5 ms"] <= times["20 ms"]
    assert times["20 ms"] > times["0 s"]
