"""Encode/decode cost model: roofline closed forms, growth with size and N, and when top-k pays off."""
import pytest

from simdist.compression import (Bucket, Fp16Codec, Int8Codec, Kernel, KernelCostModel, NoCompression, OneBitCodec,
                                 PowerSgdCodec, RandomKCodec, TopKCodec)
from simdist.compression.sparse import topk_crossover_workers
from simdist.hardware.specs import GpuSpec
from tests.compression.hw import A100, SLOW

CODECS = [Fp16Codec(), Int8Codec(), OneBitCodec(), TopKCodec(ratio=0.01), RandomKCodec(ratio=0.01),
          PowerSgdCodec(rank=4)]
BUCKET_25MB = [(2500, 1000), (1000, 3500), (10000,), (240000,)]  # 6.25 M fp32 = 25 MB


def test_bucket_is_25_MB():
    assert NoCompression().wire_bytes(BUCKET_25MB, 4, 8) == 25e6


def test_memory_bound_kernel_closed_form():
    cost = KernelCostModel(launch_overhead_s=5e-6, memory_efficiency=0.8)
    # 1.6 GB at 2 TB/s x 0.8 = 1 ms, plus one launch
    assert cost.kernel_time_s(Kernel("k", 1.6e9), A100) == pytest.approx(1e-3 + 5e-6)
    assert cost.kernel_time_s(Kernel("k", 0.0, launches=3), A100) == pytest.approx(15e-6)


def test_compute_bound_kernel_uses_fp32_peak_and_efficiency():
    cost = KernelCostModel(launch_overhead_s=0.0, flops_efficiency=0.5)
    assert cost.kernel_time_s(Kernel("mm", 1.0, flops=19.5e12 * 0.5), A100) == pytest.approx(1.0)
    gpu = GpuSpec("g", "g", "x", {"fp32": 10e12}, 1e9, 1e12, 1, 1, compute_efficiency={"fp32": 0.25})
    assert KernelCostModel(launch_overhead_s=0.0).kernel_time_s(Kernel("mm", 0.0, 10e12), gpu) == pytest.approx(4.0)
    # the default efficiency when the GPU gives none
    assert KernelCostModel(launch_overhead_s=0.0).kernel_time_s(Kernel("mm", 0.0, 19.5e12), A100) == \
        pytest.approx(1 / 0.7)


def test_calibration_scales_every_figure():
    base = TopKCodec(ratio=0.01)
    twice = TopKCodec(ratio=0.01, cost=KernelCostModel(calibration=2.0))
    assert twice.encode_time_s(BUCKET_25MB, A100) == pytest.approx(2 * base.encode_time_s(BUCKET_25MB, A100))
    assert twice.decode_time_s(BUCKET_25MB, A100, 8) == pytest.approx(2 * base.decode_time_s(BUCKET_25MB, A100, 8))


def test_fp16_cast_time_closed_form():
    # torch's fp16_compress_hook: to(float16) reads 4 and writes 2 bytes per element, div_ reads and writes 2;
    # the decode's copy_ reads 2 and writes 4; one launch per op
    n = 6.25e6
    assert Fp16Codec().encode_time_s(BUCKET_25MB, A100) == pytest.approx(2 * 5e-6 + n * (6 + 4) / 1.6e12)
    assert Fp16Codec().decode_time_s(BUCKET_25MB, A100, 8) == pytest.approx(5e-6 + n * 6 / 1.6e12)


def test_no_compression_costs_nothing():
    assert NoCompression().encode_time_s(BUCKET_25MB, A100) == 0.0
    assert NoCompression().decode_time_s(BUCKET_25MB, A100, 8) == 0.0
    assert NoCompression().error_feedback_bytes(BUCKET_25MB) == 0.0


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.method.value)
def test_encode_time_grows_with_bucket_size(codec):
    times = [codec.encode_time_s([(m, 1000)], A100, 4, 8) for m in (100, 1000, 10000, 100000)]
    assert all(a < b for a, b in zip(times, times[1:]))
    assert codec.encode_time_s([(10000, 1000)], SLOW, 4, 8) > times[2]  # slower GPU, slower codec


def test_topk_decode_is_n_scatter_adds():
    kernels = TopKCodec(ratio=0.01).decode_kernels(BUCKET_25MB, 16)
    index_add = [k for k in kernels if k.name == "index_add"][0]
    assert index_add.count == 16 * 62500 and index_add.op == "scatter"  # one index_add_ of all N x k pairs
    times = [TopKCodec(ratio=0.01).decode_time_s(BUCKET_25MB, A100, n) for n in (2, 8, 64, 99)]  # below crossover
    assert all(a < b for a, b in zip(times, times[1:]))
    # randomk's values are summed on the wire: one scatter, whatever N
    assert RandomKCodec(ratio=0.01).decode_time_s(BUCKET_25MB, A100, 2) == \
        RandomKCodec(ratio=0.01).decode_time_s(BUCKET_25MB, A100, 512)


def test_topk_selection_passes_are_charged():
    t4 = TopKCodec(ratio=0.01).encode_time_s(BUCKET_25MB, A100)
    t8 = TopKCodec(ratio=0.01, select_passes=8).encode_time_s(BUCKET_25MB, A100)
    assert t8 - t4 == pytest.approx(4 * (25e6 / 1.6e12 + 5e-6))


def test_powersgd_flops_per_matrix():
    m, n, r = 4096, 1024, 8
    enc = PowerSgdCodec(rank=r).encode_kernels([(m, n)])
    dec = PowerSgdCodec(rank=r).decode_kernels([(m, n)], 8)
    flops = {k.name: k.flops for k in enc + dec}
    assert flops["P=MQ"] == flops["Q=MtP"] == flops["M=PQt"] == 2 * m * n * r
    # torch's _orthogonalize: Householder QR (torch.linalg.qr) above rank 2 in fp32, Gram-Schmidt otherwise
    assert flops["orthogonalize"] == 4 * m * r * r
    gs = {k.name: k for k in PowerSgdCodec(rank=r).decode_kernels([(m, n)], 8, 2)}["orthogonalize"]
    assert (gs.flops, gs.launches) == (2 * m * r * r, 2 * r + 4 * (r - 1))
    r2 = {k.name: k for k in PowerSgdCodec(rank=2).decode_kernels([(m, n)], 8)}["orthogonalize"]
    assert r2.flops == 2 * m * 2 * 2


def test_error_feedback_adds_encode_work():
    with_ef = TopKCodec(ratio=0.01).encode_time_s(BUCKET_25MB, A100)
    without = TopKCodec(ratio=0.01, error_feedback=False).encode_time_s(BUCKET_25MB, A100)
    assert with_ef > without
    assert OneBitCodec().encode_time_s(BUCKET_25MB, A100) > OneBitCodec(error_feedback=False).encode_time_s(
        BUCKET_25MB, A100)


def test_topk_traffic_grows_with_workers_dense_does_not_and_they_cross():
    ratio, n_elem = 0.01, 6.25e6
    topk, dense = TopKCodec(ratio=ratio), NoCompression()
    sizes = [2, 4, 16, 64, 256]
    t = [topk.plan(BUCKET_25MB, 4, n).bus_bytes(n) for n in sizes]
    d = [dense.plan(BUCKET_25MB, 4, n).bus_bytes(n) for n in sizes]
    assert all(a < b for a, b in zip(t, t[1:]))
    assert all(x <= 2 * 25e6 for x in d)  # 2(N-1)/N S is bounded by 2 S
    compressed_bus = [topk._compressed_plan(Bucket.of(BUCKET_25MB, 4), n).bus_bytes(n) for n in sizes]
    assert compressed_bus[0] < d[0] and compressed_bus[-1] > d[-1]  # the gather crosses the dense ring...
    assert t[-1] == d[-1] and not topk.plan(BUCKET_25MB, 4, 256).compressed  # ...so the plan goes dense there
    # crossover: (N-1) k (v+i) = 2 (N-1)/N n v  <=>  N = 2 v n / (k (v+i)) = 100 for ratio 0.01, fp32, int32
    assert topk_crossover_workers(ratio) == pytest.approx(100)
    k = topk.k(Bucket.of(BUCKET_25MB, 4))
    assert k == n_elem * ratio
    first = next(n for n in range(2, 1000) if not topk.plan(BUCKET_25MB, 4, n).compressed)
    assert first == 100  # equal link bytes at the crossover: not smaller, so dense
    assert topk.plan(BUCKET_25MB, 4, 99).bus_bytes(99) < dense.plan(BUCKET_25MB, 4, 99).bus_bytes(99)
    assert all(topk.plan(BUCKET_25MB, 4, n).bus_bytes(n) <= dense.plan(BUCKET_25MB, 4, n).bus_bytes(n)
               for n in range(2, 600, 7))  # compression never sends more over the links than dense


def ring_all_reduce_s(size_bytes, n, bandwidth_Bps):
    return 2 * (n - 1) / n * size_bytes / bandwidth_Bps


@pytest.mark.parametrize("bandwidth_Bps,pays_off", [(300e9, False), (10e9 / 8, True)], ids=["nvswitch", "10GbE"])
def test_topk_pays_off_on_10GbE_not_on_nvswitch(bandwidth_Bps, pays_off):
    n = 8
    codec = TopKCodec(ratio=0.01)
    dense_s = ring_all_reduce_s(25e6, n, bandwidth_Bps)
    topk_s = codec.plan(BUCKET_25MB, 4, n).bus_bytes(n) / bandwidth_Bps  # ring all_gather (N-1)/N T / B
    saving_s = dense_s - topk_s
    codec_s = codec.encode_time_s(BUCKET_25MB, A100, 4, n) + codec.decode_time_s(BUCKET_25MB, A100, n)
    assert saving_s > 0
    assert (codec_s < saving_s) is pays_off
