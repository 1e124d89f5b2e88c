"""Wire bytes and collective plans of every codec against hand calculations on small buckets."""
import pytest

from simdist.collectives.schedule import CollectiveOp as Op
from simdist.compression import (Bf16Codec, Bucket, Collective, Fp16Codec, Int8Codec, NoCompression, OneBitCodec,
                                 PowerSgdCodec, RandomKCodec, TopKCodec, make_codec)
from simdist.compression.powersgd import Matrix
from simdist.compression.quantize import int_width_bytes
from simdist.errors import ScenarioError
from simdist.io.compare_input import check_codec
from simdist.scenario import CompressionMethod as M, CompressionSpec
from tests.compression.hw import A100

AR, AG, A2A = Op.ALL_REDUCE, Op.ALL_GATHER, Op.ALL_TO_ALL
BUCKET = [(100, 10), (10,)]  # 1010 fp32 elements = 4040 bytes


def test_none_is_one_dense_all_reduce():
    p = NoCompression().plan(BUCKET, 4, 8)
    assert p.collectives == (Collective(AR, 4040),) and p.summable and not p.compressed
    assert NoCompression().wire_bytes(BUCKET, 4, 8) == 4040


@pytest.mark.parametrize("codec", [Fp16Codec(), Bf16Codec()])
def test_half_casts_send_two_bytes_per_element(codec):
    p = codec.plan(BUCKET, 4, 8)
    assert p.collectives == (Collective(AR, 2020),) and p.summable and p.compressed


@pytest.mark.parametrize("n", [2, 8, 64])
def test_fp16_halves_ring_traffic(n):
    dense = NoCompression().plan(BUCKET, 4, n).bus_bytes(n)
    assert dense == pytest.approx(2 * (n - 1) / n * 4040)
    assert Fp16Codec().plan(BUCKET, 4, n).bus_bytes(n) == pytest.approx(dense / 2)


def test_fp16_of_fp16_gradients_saves_nothing_and_falls_back():
    p = Fp16Codec().plan(BUCKET, 2, 8)
    assert not p.compressed and p.collectives == (Collective(AR, 2020),)
    assert Fp16Codec().encode_time_s(BUCKET, A100, 2) == 0.0 and Fp16Codec().decode_time_s(BUCKET, A100, 8, 2) == 0.0


def test_int8_scale_max_then_one_byte_per_element():
    p = Int8Codec().plan(BUCKET, 4, 8)
    assert p.collectives == (Collective(AR, 2 * 4), Collective(AR, 1010)) and p.summable
    assert p.labels == ("scale_max", "int8")
    assert Int8Codec().wire_bytes(BUCKET, 4, 8) == 1018


@pytest.mark.parametrize("n,width", [(1, 1), (127, 1), (128, 4), (32767, 4)])
def test_int8_widens_to_int32_when_the_sum_could_overflow(n, width):
    # NCCL and gloo sum int8 and int32 but not int16, so past 127 workers the wire widens to int32
    assert int_width_bytes(n) == width
    if width == 1:
        assert Int8Codec().plan(BUCKET, 4, n).collectives[1].size_bytes == 1010
    else:  # int32 saves nothing over fp32: dense fallback
        assert not Int8Codec().plan(BUCKET, 4, n).compressed


def test_int8_min_levels_trades_range_for_precision():
    # 16 levels each side for 16 workers needs 256 > 127: int32, i.e. no compression
    assert int_width_bytes(16, min_levels=16) == 4 and int_width_bytes(7, min_levels=16) == 1
    assert not Int8Codec(min_levels=16).plan(BUCKET, 4, 16).compressed


def test_int8_beyond_int32_range_falls_back_to_dense():
    assert int_width_bytes(2**31) is None
    assert not Int8Codec().plan(BUCKET, 4, 2**31).compressed
    assert not Int8Codec().plan(BUCKET, 4, 40000).compressed


def test_topk_all_gathers_values_and_indices():
    # k = ceil(0.1 * 1010) = 101 pairs of (fp32 value, int32 index) per worker
    p = TopKCodec(ratio=0.1).plan(BUCKET, 4, 8)
    assert p.collectives == (Collective(AG, 8 * 101 * 8),) and not p.summable
    assert TopKCodec(ratio=0.1).wire_bytes(BUCKET, 4, 8) == 808


def test_topk_falls_back_to_dense_when_pairs_are_bigger():
    # 2 workers, ratio 0.5: 505 * 8 = 4040 B gathered = the dense all_reduce's 2 (N-1)/N x 4040 -> dense
    p = TopKCodec(ratio=0.5).plan(BUCKET, 4, 2)
    assert not p.compressed and p.collectives == (Collective(AR, 4040),) and p.summable
    assert TopKCodec(ratio=0.49).plan(BUCKET, 4, 2).compressed
    # 8 workers: the gather sends (N-1) payloads, the dense ring 2 (N-1)/N buffers: ratio 0.49 no longer pays
    assert not TopKCodec(ratio=0.49).plan(BUCKET, 4, 8).compressed and TopKCodec(ratio=0.1).plan(BUCKET, 4, 8).compressed


def test_randomk_sums_values_only():
    p = RandomKCodec(ratio=0.1).plan(BUCKET, 4, 8)
    assert p.collectives == (Collective(AR, 101 * 4),) and p.summable
    assert not RandomKCodec(ratio=1.0).plan(BUCKET, 4, 8).compressed


def test_onebit_two_phase_bytes():
    # 1010 elements padded to a multiple of 8*4=32: 1024 -> 128 bytes of signs
    p = OneBitCodec().plan(BUCKET, 4, 4)
    assert p.collectives == (Collective(A2A, 128), Collective(AG, 16), Collective(AG, 128), Collective(AG, 16))
    assert not p.summable
    # per worker: 128 signs + 4 scale + 128/4 server chunk + 4 server scale
    assert p.wire_bytes(4) == 128 + 4 + 32 + 4


def test_onebit_tiny_bucket_falls_back():
    assert not OneBitCodec().plan([(3,)], 4, 64).compressed


def test_powersgd_hand_case():
    # (64, 3, 3, 3) -> 64 x 27 at rank 4: (64+27)*4*2 = 728 < 1728 -> compressed; (1000,) 1-D -> uncompressed;
    # (16, 16) at rank 4: (32*4)*2 = 256 >= 256 -> not worth it (torch's min_compression_rate 2) -> uncompressed
    shapes = [(64, 3, 3, 3), (1000,), (16, 16)]
    p = PowerSgdCodec(rank=4).plan(shapes, 4, 8)
    assert p.labels == ("uncompressed", "P", "Q") and p.summable
    assert p.collectives == (Collective(AR, (1000 + 256) * 4), Collective(AR, 64 * 4 * 4), Collective(AR, 27 * 4 * 4))


@pytest.mark.parametrize("m,n,r", [(1024, 1024, 1), (1024, 1024, 4), (4096, 1024, 8), (512, 2048, 32)])
def test_powersgd_bytes_follow_rank_times_m_plus_n(m, n, r):
    p = PowerSgdCodec(rank=r).plan([(m, n)], 4, 8)
    assert p.wire_bytes(8) == r * (m + n) * 4
    assert PowerSgdCodec(rank=r).error_feedback_bytes([(m, n)], 4) == m * n * 4 + r * (m + n) * 4


def test_powersgd_rank_is_capped_by_the_matrix():
    # a rank as large as the small side can never save bytes: (m + n) n > m n -> uncompressed
    codec = PowerSgdCodec(rank=64, min_compression_rate=1.0)
    assert codec.matrices(Bucket.of([(2000, 8)], 4)) == [Matrix(2000, 8, 0)]
    assert codec.matrices(Bucket.of([(2000, 100)], 4)) == [Matrix(2000, 100, 64)]


def test_powersgd_only_vectors_falls_back():
    assert not PowerSgdCodec(rank=4).plan([(10,), (20,)], 4, 8).compressed


def test_error_feedback_memory():
    dense = 4040
    assert TopKCodec(ratio=0.01).error_feedback_bytes(BUCKET) == dense
    assert TopKCodec(ratio=0.01, error_feedback=False).error_feedback_bytes(BUCKET) == 0
    assert RandomKCodec(ratio=0.01).error_feedback_bytes(BUCKET) == dense
    assert Fp16Codec().error_feedback_bytes(BUCKET) == Int8Codec().error_feedback_bytes(BUCKET) == 0
    # onebit: worker error (padded 1024 elems) + server error of one chunk (1024 / 4)
    assert OneBitCodec().error_feedback_bytes(BUCKET, 4, 4) == 1024 * 4 + 256 * 4


def test_empty_bucket_has_no_collectives():
    for method in M:
        codec = make_codec(CompressionSpec(method, ratio=0.1 if method in (M.TOPK, M.RANDOMK) else None))
        assert codec.plan([], 4, 8).collectives == () and codec.wire_bytes([(0, 5)], 4, 8) == 0


@pytest.mark.parametrize("spec,path", [
    (CompressionSpec(M.TOPK), "communication.compression.ratio"),
    (CompressionSpec(M.RANDOMK, ratio=0.0), "communication.compression.ratio"),
    (CompressionSpec(M.TOPK, ratio=1.5), "communication.compression.ratio"),
    (CompressionSpec(M.TOPK, ratio=float("nan")), "communication.compression.ratio"),
    (CompressionSpec(M.POWERSGD, rank=0), "communication.compression.rank"),
    (CompressionSpec(M.POWERSGD, rank=2.5), "communication.compression.rank"),
    (CompressionSpec(M.FP16, ratio=0.1), "communication.compression.ratio"),
    (CompressionSpec(M.TOPK, ratio=0.1, rank=2), "communication.compression.rank"),
    (CompressionSpec("zip"), "communication.compression.method"),
])
def test_bad_parameters_name_their_yaml_path(spec, path):
    """io/ refuses them (a scenario's through io.rules, a spec built in code through check_codec)."""
    with pytest.raises(ScenarioError) as err:
        check_codec(spec)
    assert err.value.issues[0].path == path


def test_make_codec_passes_parameters():
    assert make_codec(CompressionSpec(M.TOPK, ratio=0.05, error_feedback=False)) == \
        TopKCodec(ratio=0.05, error_feedback=False)
    assert make_codec(CompressionSpec(M.POWERSGD)).rank == 1
    assert make_codec(CompressionSpec(M.POWERSGD, rank=8)).rank == 8
    assert make_codec(CompressionSpec("bf16")).method == M.BF16
