"""Where each codec runs and what it costs there, against hand calculations: CPU op pricing, a CPU device's
share of the reference core, the torch-hook op sequences on a CPU, and BytePS's worker/server path."""
from __future__ import annotations

import dataclasses
import math

import pytest

from simdist.compression import Int8Codec, Kernel, OneBitCodec, PowerSgdCodec, RandomKCodec, TopKCodec
from simdist.compression.base import Bucket
from simdist.compression.cpu import REFERENCE_CORE, CpuProcessor
from simdist.compression.placement import (BYTEPS_WORKER_THREADS, CodecSite, bucket_codec_cost, byteps_compress,
                                           byteps_decompress, byteps_payload_bytes, codec_path, device_cpu,
                                           heap_accesses, ps_pushers)
from simdist.engine.simulation import simulate
from simdist.io.load import load_data
from simdist.scenario import CompressionMethod
from simdist.strategies.plan import build_plan
from tests.compression.hw import A100

R = REFERENCE_CORE
MLP = [s for _ in range(8) for s in ((1024,), (1024, 1024))]  # the emulated cluster's MLP, 8.4 M fp32
N_MLP = 8 * (1024 + 1024 * 1024)
CPU_CORE = dataclasses.replace(A100, key="cpu-test", vendor="cpu", memory_bandwidth_Bps=R.stream_Bps / 2)


def test_cpu_stream_op_closed_form():
    cpu = CpuProcessor.reference(cores=2.0)
    k = Kernel("add", 12e6, launches=3, alloc_bytes=4e6)
    assert cpu.kernel_time_s(k) == pytest.approx(3 * R.op_overhead_s + (12e6 / R.stream_Bps + 4e6 / R.first_touch_Bps) / 2)
    mm = Kernel("mm", 1.0, flops=1e9)
    assert cpu.kernel_time_s(mm) == pytest.approx(R.op_overhead_s + 1e9 / R.gemm_flops / 2)  # compute-bound


@pytest.mark.parametrize("op,rate", [("rng", R.rng_per_s), ("randperm", R.randperm_per_s), ("topk", R.topk_per_s),
                                     ("gather", R.gather_per_s), ("scatter", R.scatter_per_s)])
def test_cpu_counted_ops_use_their_measured_rate(op, rate):
    k = Kernel(op, 1e9, op=op, count=1e6)  # bytes_moved is the GPU's figure; a CPU prices the count
    assert CpuProcessor.reference().kernel_time_s(k) == pytest.approx(R.op_overhead_s + 1e6 / rate)


def test_randomk_on_a_cpu_is_its_permutation_of_the_whole_bucket():
    codec = RandomKCodec(ratio=0.01)
    enc = codec.encode_kernels(MLP, 4, 4)
    perm = next(k for k in enc if k.name == "randperm")
    assert perm.count == N_MLP  # randperm(n)[:k]: all n elements, not k
    t = CpuProcessor.reference().kernel_time_s(perm)
    assert t == pytest.approx(5 * R.op_overhead_s + N_MLP / R.randperm_per_s + 8 * N_MLP / R.first_touch_Bps)
    assert t > 0.1  # about 0.2 s of one core for 8.4 M elements: the GPU roofline's microseconds were the error
    assert codec.encode_time_s(MLP, A100, 4, 4) < 1e-3


def test_int8_decode_hand_calculation_on_a_cpu():
    # sum.float() (1 + 4 bytes), * scale (12), / (levels x N) (8), each allocating 4 bytes per element, then the
    # hook's buf.copy_ of the result into the bucket (8, in place)
    n = N_MLP
    dec = Int8Codec().decode_kernels(MLP, 4, 4)
    expected = 4 * R.op_overhead_s + (n * 5 + 12 * n + 8 * n + 8 * n) / R.stream_Bps + 3 * 4 * n / R.first_touch_Bps
    assert CpuProcessor.reference().time_s(dec) == pytest.approx(expected)


def test_codec_paths():
    assert codec_path(CompressionMethod.NONE, A100, True).encode is CodecSite.NONE
    assert codec_path(CompressionMethod.INT8, A100, False).encode is CodecSite.WORKER_GPU
    cpu = codec_path(CompressionMethod.TOPK, CPU_CORE, False)
    assert (cpu.encode, cpu.decode, cpu.server) == (CodecSite.WORKER_CPU, CodecSite.WORKER_CPU, None)
    assert codec_path(CompressionMethod.ONEBIT, A100, False).framework == "deepspeed compressed_allreduce"
    bps = codec_path(CompressionMethod.ONEBIT, A100, True)
    assert (bps.framework, bps.encode, bps.server) == ("byteps compressor", CodecSite.WORKER_CPU, CodecSite.SERVER_CPU)
    assert codec_path(CompressionMethod.POWERSGD, A100, True).server is None  # BytePS has no PowerSGD: the hook


def test_a_cpu_device_runs_at_its_share_of_the_reference_core():
    assert device_cpu(CPU_CORE).cores == pytest.approx(0.5)
    assert device_cpu(dataclasses.replace(CPU_CORE, memory_bandwidth_Bps=1e12)).cores == 1.0
    codec = TopKCodec(ratio=0.01)
    cost = bucket_codec_cost(codec, MLP, CPU_CORE, 4, 4, codec_path(codec.method, CPU_CORE, False))
    ops = codec.encode_kernels(MLP, 4, 4)
    overhead = sum(k.launches for k in ops) * R.op_overhead_s
    assert cost.encode_s == pytest.approx(overhead + 2 * (CpuProcessor.reference().time_s(ops) - overhead))


def test_byteps_onebit_hand_calculation():
    n, workers, servers = N_MLP, 4, 2
    codec = OneBitCodec()
    path = codec_path(codec.method, A100, True)
    cost = bucket_codec_cost(codec, MLP, A100, 4, workers, path, servers)
    assert cost.ps_payload_bytes == math.ceil(n / 32) * 4 + 4 == byteps_payload_bytes(codec.method, Bucket.of(MLP, 4), 0)
    worker = CpuProcessor.reference(BYTEPS_WORKER_THREADS)
    # worker: e += g (12 B/elem), sum |x| (4), pack (4 + 1/8), error update (8 + 1/8); unpack (1/8 + 4)
    enc = 4 * R.op_overhead_s + n * (12 + 4 + 4.125 + 8.125) / R.stream_Bps / 4
    assert cost.encode_s == pytest.approx(enc)
    assert cost.decode_s == pytest.approx(worker.time_s([Kernel("unpack", n / 8 + 4 * n)]))
    # server, one thread: each of the 4 pushes decompressed and each of the 4 pulls recompressed, on its shard
    c = n / servers
    one = R.op_overhead_s + (c / 8 + 4 * c) / R.stream_Bps + 2 * R.op_overhead_s + (4 * c + 4 * c + c / 8) / R.stream_Bps
    assert cost.server_s == pytest.approx(workers * one)


def _scenario(vendor: str = "nvidia", strategy: str = "ring", method: str = "onebit", gpus_per_node: int = 1,
              aggregation: str = "gpu", **extra):
    gpu = {"name": "dev", "vendor": vendor, "peak_flops": {"fp32": "20 TFLOP/s"}, "memory": "40 GB",
           "memory_bandwidth": "1 TB/s"}
    comm = {"strategy": strategy, "compression": {"method": method, **extra}, "bucket_size": "40 MB"}
    if strategy == "ps":
        comm["ps"] = {"servers": 2, "placement": "colocated", "server": "cpu", "aggregation": aggregation}
    d = {"cluster": {"nodes": [{"count": 4, "gpu": gpu, "gpus_per_node": gpus_per_node,
                                "nic": {"bandwidth": "10 Gb/s", "latency": "20 us", "transport": "tcp"}}]},
         "workload": {"model": "resnet50", "batch_per_gpu": 32}, "communication": comm,
         "run": {"fidelity": "estimate"}}
    return load_data(d)


def test_plan_charges_the_cpu_path_and_the_result_names_it():
    s = _scenario(vendor="cpu", method="randomk", ratio=0.01)
    plan = build_plan(s)
    device = s.cluster.node_groups[0].gpu
    codec = RandomKCodec(ratio=0.01)
    expect = [bucket_codec_cost(codec, bc.bucket.shapes, device, 4, 4, codec_path(codec.method, device, False))
              for bc in plan.buckets]
    assert plan.slowest.encode_s == tuple(c.encode_s for c in expect)
    ran = simulate(s).to_dict()["strategy"]["compression_ran"]["runs_on"]
    assert ran["encode"] == ran["decode"] == "worker_cpu" and ran["server"] is None
    assert ran["encode_s"] == pytest.approx(sum(c.encode_s for c in expect))


def test_byteps_plan_pushes_the_compressed_bytes_and_the_server_recodes():
    s = _scenario(strategy="ps", method="onebit")
    plan, dense = build_plan(s), build_plan(_scenario(strategy="ps", method="none"))
    device = s.cluster.node_groups[0].gpu
    path = codec_path(CompressionMethod.ONEBIT, device, True)
    for bc, bd in zip(plan.buckets, dense.buckets):
        cost = bucket_codec_cost(OneBitCodec(), bc.bucket.shapes, device, 4, 4, path, 2)
        assert bc.collectives == ((bd.collectives[0][0], cost.ps_payload_bytes),)
        assert bc.server_delay_s == pytest.approx(bd.server_delay_s + cost.server_s)
    ran = simulate(s).to_dict()["strategy"]["compression_ran"]["runs_on"]
    assert (ran["framework"], ran["server"]) == ("byteps compressor", "server_cpu") and ran["server_s"] > 0


def test_a_node_aggregated_server_recodes_once_per_node():
    node = _scenario(strategy="ps", gpus_per_node=2, aggregation="node")
    per_gpu = _scenario(strategy="ps", gpus_per_node=2)
    assert (ps_pushers(node, 8), ps_pushers(per_gpu, 8)) == (4, 8)
    a, b = build_plan(node).buckets[0], build_plan(per_gpu).buckets[0]
    device = node.cluster.node_groups[0].gpu
    path = codec_path(CompressionMethod.ONEBIT, device, True)
    one = bucket_codec_cost(OneBitCodec(), a.bucket.shapes, device, 4, 8, path, 2, 1).server_s
    assert a.server_delay_s - b.server_delay_s == pytest.approx((4 - 8) * one)


def test_byteps_topk_is_a_scan_and_a_heap_per_shard():
    n, k = 1_000_000, 10_000
    assert heap_accesses(n, k) == pytest.approx(k * (1 + math.log(100)) * math.log2(k))
    codec = TopKCodec(ratio=0.01)
    b = Bucket.of([(1000, 1000)], 4)
    path = codec_path(codec.method, A100, True)
    cost = bucket_codec_cost(codec, [(1000, 1000)], A100, 4, 4, path, servers=2, pushers=3)
    shard = Bucket(b.shapes, 4, n // 2)
    one = CpuProcessor.reference().time_s(byteps_decompress(codec.method, shard, k // 2)
                                          + byteps_compress(codec.method, shard, k // 2, False))
    assert cost.server_s == pytest.approx(3 * one)  # k split over the servers with the elements
    assert cost.ps_payload_bytes == k * 2 * 4


def test_byteps_leaves_small_buckets_dense_and_ignores_the_gather_crossover():
    codec = TopKCodec(ratio=0.01)
    path = codec_path(codec.method, A100, True)
    small = bucket_codec_cost(codec, [(100, 100)], A100, 4, 4, path, 2)  # 40 KB < BYTEPS_MIN_COMPRESS_BYTES
    assert (small.encode_s, small.server_s, small.ps_payload_bytes) == (0.0, 0.0, 40_000)
    # at 512 workers DDP's top-k all_gather would send more than the dense ring (dense fallback); BytePS's push
    # and pull of k pairs does not grow with the group
    assert not codec.plan(MLP, 4, 512).compressed
    big = bucket_codec_cost(codec, MLP, A100, 4, 512, path, 2, 64)
    assert big.ps_payload_bytes == math.ceil(0.01 * N_MLP) * 8 and big.encode_s > 0


def test_the_byteps_report_counts_push_and_pull_bytes():
    s = _scenario(strategy="ps", method="onebit")
    ran = simulate(s).to_dict()["strategy"]["compression_ran"]
    payload = ran["runs_on"]["ps_payload_bytes"]
    assert ran["wire_bytes_per_worker"] == payload and ran["link_bytes_per_worker"] == 2 * payload
    assert ran["compressed_buckets"] == ran["buckets"] and ran["ran"] == "onebit"
    plan = build_plan(s)
    assert payload == pytest.approx(sum(bc.collectives[0][1] for bc in plan.buckets))
