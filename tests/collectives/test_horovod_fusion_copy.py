"""Horovod's fusion buffer (nccl_operations.cc NCCLAllreduce::Execute): a response of several tensors is copied
into the buffer before the all-reduce and out after, on Horovod's stream; one tensor is reduced in place."""
from __future__ import annotations

import pytest

from simdist import api
from simdist.compute import DEFAULT_MEMORY_EFFICIENCY, launch_overhead_s
from simdist.strategies.buckets import HOROVOD_BATCHED_D2D_CAPACITY, Bucket, fusion_copy_s, negotiation_s
from simdist.strategies.plan import build_plan

PRESET = "scenarios/presets/horovod.yaml"


def test_copy_is_one_read_and_one_write_of_the_buffer_plus_its_launches():
    three = Bucket(0, ((1000,), (2000,), (3000,)), 6000, 0)
    # hand calculation: 64 MB through 720 GB/s of HBM, read and written: 2 x 64e6 / 720e9 = 178 us, one launch
    assert fusion_copy_s(three, 64e6, 720e9, 5e-6) == pytest.approx(2 * 64e6 / 720e9 + 5e-6)
    many = Bucket(0, tuple((10,) for _ in range(HOROVOD_BATCHED_D2D_CAPACITY + 1)), 1610, 0)
    assert fusion_copy_s(many, 0.0, 720e9, 5e-6) == pytest.approx(2 * 5e-6)  # 161 tensors: two batched launches
    assert fusion_copy_s(Bucket(0, ((4096,),), 4096, 0), 64e6, 720e9, 5e-6) == 0.0  # in place


def test_the_plan_copies_fused_buckets_only_and_ddp_none():
    sc = api.load(PRESET)
    plan = build_plan(sc)
    gpu = sc.cluster.node_groups[0].gpu
    bw = gpu.memory_bandwidth_Bps * DEFAULT_MEMORY_EFFICIENCY
    cc = plan.classes[0]
    assert len(cc.fusion_copy_s) == len(plan.buckets)
    for bc, copy in zip(plan.buckets, cc.fusion_copy_s):
        size = sum(s for _, s in bc.collectives)
        expected = 2 * size / bw + launch_overhead_s() if len(bc.bucket.shapes) > 1 else 0.0
        assert copy == pytest.approx(expected)
    assert any(cc.fusion_copy_s)
    ddp = build_plan(api.load(PRESET, {"communication.bucketing": "ddp", "communication.fusion_cycle": "0 s"}))
    assert ddp.classes[0].fusion_copy_s == ()


def test_copies_run_on_the_communication_stream_around_the_all_reduce():
    sim = api.simulate(api.load(PRESET))
    last = max(r.iteration for r in sim.records)
    comm = [r for r in sim.records if r.iteration == last and r.track == "comm:0"]
    copies = build_plan(api.load(PRESET)).classes[0].fusion_copy_s
    for j, copy in enumerate(copies):
        mine = sorted((r for r in comm if r.name.split()[0] == f"bucket{j}"), key=lambda r: r.start_s)
        if copy:
            assert [r.name.split(" ", 1)[1] for r in (mine[0], mine[-1])] == ["fusion copy in", "fusion copy out"]
            assert mine[0].end_s - mine[0].start_s == pytest.approx(copy)
        else:
            assert not any("fusion copy" in r.name for r in mine)
    assert any(copies)


def test_each_cycle_agrees_on_the_cache_in_one_small_all_reduce():
    """Hand calculation: 64 ranks, recursive doubling, 6 rounds of one controller message; the preset's 16 nodes
    on 5 us InfiniBand NICs: 30 us after every cycle tick; one node: shared memory, not charged."""
    assert negotiation_s(64, 5e-6) == pytest.approx(30e-6)
    assert negotiation_s(65, 5e-6) == pytest.approx(35e-6) and negotiation_s(1, 5e-6) == 0.0
    plan = build_plan(api.load(PRESET))
    assert plan.negotiation_s == pytest.approx(6 * 5e-6)
    one_node = build_plan(api.load(PRESET, {"cluster.nodes.0.count": 1}))
    assert one_node.negotiation_s == 0.0
    ddp = build_plan(api.load(PRESET, {"communication.bucketing": "ddp", "communication.fusion_cycle": "0 s"}))
    assert ddp.negotiation_s == 0.0
