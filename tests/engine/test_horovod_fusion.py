"""Horovod's tensor fusion in the preset: each tick of HOROVOD_CYCLE_TIME (5 ms then) fuses the tensors ready
by then into buffers that never exceed HOROVOD_FUSION_THRESHOLD (the preset's 64 MB, Horovod's default before
v0.21); a buffer is launched on the tick after its last tensor is ready (or when the communication stream
frees). With interference the backward stretches and each buffer keeps its planned wait after becoming ready (the plan's grid, in unslowed time)."""
from __future__ import annotations

from math import prod

import pytest

from simdist import api
from simdist.compute import DTYPE_BYTES
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


def _layer_cycles(sc, plan):
    """Per layer (forward index): the cycle tick that picks its gradients up, by hand from the layer times."""
    from simdist.compute import layer_times

    cc = plan.classes[0]
    times = layer_times(sc.workload.model, sc.cluster.node_groups[0].gpu, cc.rank_class.batch,
                        sc.workload.precision.value, memory_format=sc.workload.memory_format)
    done, acc = [0.0] * len(times), 0.0
    for i in range(len(times) - 1, -1, -1):
        acc += times[i].bwd_s
        done[i] = acc
    return [-(-d // CYCLE) for d in done]


def test_fused_buffers_hold_one_cycles_tensors_up_to_the_threshold_in_backward_order():
    """Horovod's coordinator fuses, each cycle, the tensors every rank has ready by then (up to the threshold):
    a buffer never waits for tensors of a later cycle, and it is full only when one cycle has more to send."""
    sc = api.load(PRESET)
    plan = build_plan(sc)
    grad = DTYPE_BYTES[sc.workload.grad_dtype]
    cycles = _layer_cycles(sc, plan)
    sizes = [b.bucket.elems * grad for b in plan.buckets]
    assert len(sizes) >= 2 and all(s <= 64e6 for s in sizes)
    model = sc.workload.model
    layer_of = {}  # a bucket's tensors -> their layers, in backward order
    grads = model.gradients_backward_order()
    pos = 0
    for b in plan.buckets:
        layer_of[b.bucket.index] = [grads[pos + i][0] for i in range(len(b.bucket.shapes))]
        pos += len(b.bucket.shapes)
    assert pos == len(grads)  # every tensor in exactly one buffer, in backward order
    for cur, nxt in zip(plan.buckets, plan.buckets[1:]):
        mine = {cycles[i] for i in layer_of[cur.bucket.index]}
        assert len(mine) == 1  # one cycle's tensors
        next_cycle = cycles[layer_of[nxt.bucket.index][0]]
        full = (cur.bucket.elems + prod(nxt.bucket.shapes[0])) * grad > 64e6
        assert full or next_cycle > mine.pop()
    assert len({cycles[i] for b in plan.buckets for i in layer_of[b.bucket.index][:1]}) >= 2
    order = [b.bucket.ready_after_layer for b in plan.buckets]
    assert order == sorted(order, reverse=True)


def test_without_a_cycle_or_overlap_buffers_fill_to_the_threshold():
    """No cycle (or no overlap: every gradient ready at once): buffers are cut by size alone, each full."""
    for over in ({"communication.fusion_cycle": "0 s"}, {"communication.overlap": False}):
        sc = api.load(PRESET, over)
        plan = build_plan(sc)
        grad = DTYPE_BYTES[sc.workload.grad_dtype]
        for cur, nxt in zip(plan.buckets, plan.buckets[1:]):
            assert (cur.bucket.elems + prod(nxt.bucket.shapes[0])) * grad > 64e6
    with_cycle = build_plan(api.load(PRESET))
    assert len(with_cycle.buckets) > len(plan.buckets)


@pytest.mark.parametrize("interference", [0.0])
def test_buffers_launch_on_cycle_ticks_from_the_backward_start(interference):
    over = {"cluster.nodes.0.gpu": {"base": "v100-sxm2-32gb", "comm_interference": interference}}
    sim = api.simulate(api.load(PRESET, over))
    est = api.estimate(api.load(PRESET, over))
    assert est.iteration_time_s == pytest.approx(sim.iteration_time_s, rel=1e-9)
    recs = _last_iteration(sim)
    negotiation = build_plan(api.load(PRESET, over)).negotiation_s
    backward = [r for r in recs if r.name.startswith("backward")]
    origin = backward[0].start_s
    ready = {int(r.name.split("(bucket")[1].split()[0].split("-")[0]): r.end_s for r in backward if "(bucket" in r.name}
    comm = sorted((r for r in recs if r.track == "comm:0"), key=lambda r: r.start_s)
    by_bucket: dict[int, list] = {}  # a buffer's tasks: its copy in, all-reduce and copy out (Horovod's fusion buffer)
    for r in comm:
        by_bucket.setdefault(int(r.name.split()[0].removeprefix("bucket")), []).append(r)
    free = 0.0
    for j, tasks in by_bucket.items():
        tick = origin + -(-(ready[j] - origin) // CYCLE) * CYCLE  # first tick at or after the buffer is ready
        assert tasks[0].start_s == pytest.approx(max(tick + negotiation, free), abs=1e-9)  # after the cache agreement
        assert [t.name.split(" ", 1)[1] for t in tasks if "fusion copy" in t.name] in ([], ["fusion copy in",
                                                                                         "fusion copy out"])
        free = tasks[-1].end_s
    assert len(by_bucket) == len(ready) >= 2


def test_with_interference_the_wait_keeps_its_planned_length():
    over = {"cluster.nodes.0.gpu": {"base": "v100-sxm2-32gb", "comm_interference": 0.4}}
    sim = api.simulate(api.load(PRESET, over))
    assert api.estimate(api.load(PRESET, over)).iteration_time_s == pytest.approx(sim.iteration_time_s, rel=1e-9)
    plain = api.simulate(api.load(PRESET, {"cluster.nodes.0.gpu": {"base": "v100-sxm2-32gb", "comm_interference": 0}}))
    assert sim.iteration_time_s > plain.iteration_time_s


def test_cycle_length_trades_early_launches_against_per_buffer_costs():
    """Short cycles launch small buffers early (each paying a collective's launch and latency), long ones wait
    to gather more: on the preset 5 ms beats both 1 ms and 20 ms, and a cycle past the whole backward leaves only
    the wait, slower than static full buffers launched when ready ('0 s')."""
    times, buckets = {}, {}
    for cycle in ("0 s", "1 ms", "5 ms", "20 ms", "100 ms"):
        sc = api.load(PRESET, {"communication.fusion_cycle": cycle})
        times[cycle] = api.estimate(sc).iteration_time_s
        buckets[cycle] = len(build_plan(sc).buckets)
    assert buckets["1 ms"] > buckets["5 ms"] > buckets["20 ms"] >= buckets["0 s"]
    assert times["5 ms"] < min(times["1 ms"], times["20 ms"], times["0 s"])
    assert times["5 ms"] < times["20 ms"] < times["100 ms"]
    assert times["100 ms"] > times["0 s"]
