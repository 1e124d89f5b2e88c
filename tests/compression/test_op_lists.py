"""Each codec's op list against a hand count of the code it models: bytes moved and kernels launched per bucket.

The counts below are written out op by op from the implementations (DeepSpeed's NcclBackend.compressed_allreduce
and 1-bit Adam's buffers, torch's fp16 and PowerSGD hooks, validation/hooks.py's int8, top-k and random-k hooks),
not computed with the codecs' own helpers, so an op added or dropped in simdist/compression shows up here.
One 1000 x 1000 fp32 matrix (n = 10^6) unless a test says otherwise.
"""
import pytest

from simdist.compression import Fp16Codec, Int8Codec, OneBitCodec, PowerSgdCodec, RandomKCodec, TopKCodec
from simdist.compression.onebit import pad_multiple, padded_elements

SHAPES = [(1000, 1000)]
N_ELEM = 1_000_000


def _totals(kernels):
    return sum(k.bytes_moved for k in kernels), sum(k.launches for k in kernels)


def _enc(codec, n_workers, shapes=SHAPES, v=4):
    return _totals(codec.encode_kernels(shapes, v, n_workers))


def _dec(codec, n_workers, shapes=SHAPES, v=4):
    return _totals(codec.decode_kernels(shapes, n_workers, v))


# -- DeepSpeed 1-bit Adam ------------------------------------------------------------------------------------
def _onebit_hand(n: float, workers: int, pad_from: float | None = None) -> tuple[float, int, float, int]:
    """compressed_allreduce on an fp32 buffer of n (padded) elements, N workers, chunk c = n / N."""
    N, c = workers, n / workers
    enc = [  # (bytes, launches)
        (12 * n, 1),                      # buffer_m.add_(worker_error)
        (4 * n, 2),                       # torch.linalg.norm(buffer_m) / np.sqrt(n)
        (62 * n, 8),                      # sign 8, add_ 8, bool 5, float 5, add_ 8, mul_ 8, scale * 8, x - 12
        (23 * n, 4),                      # sign_ 8, add_ 8, bool 5, to(uint8) 2
        (n + n / 8, 1),                   # cupy.packbits
        (n / 8, 1),                       # cupy.zeros receive buffer for the signs
        (n / 4, 1),                       # torch.stack(sign_list_packed)
        (4 * N, N),                       # recvbuf_scale: N torch.zeros(1)
    ]
    if pad_from is not None:
        enc += [(4 * (n - pad_from), 1), (4 * (pad_from + n), 1)]  # torch.zeros(pad), torch.cat
    unpack = [(n / 4, 1), (n / 8 + n, 1), (5 * n, 1), (16 * n, 2), (8 * n, 1)]  # flatten, unpackbits, float,
    dec = [                                                                      # add_, mul_, mul_(scales)
        (8 * N, N),                       # all_gather(recvbuf_scale, ...): N row copies out of the flat buffer
        *unpack,
        (16 * N, 2),                      # torch.stack(recvbuf_scale).mul_(1 / size)
        (4 * n + 4 * c, 1),               # .sum(0)
        (12 * c, 1), (4 * c, 2), (62 * c, 8), (23 * c, 4), (c + c / 8, 1),  # the server chunk, as the worker
        (n / 8 + 4 * N, 2),               # cupy.zeros for the gathered signs and scales
        (n / 4, N), (8 * N, N),           # phase 2's two list all_gathers: N row copies each
        (n / 4, 1),                       # torch.stack(recvbuf_sign_server)
        *unpack,
        (8 * n, 1),                       # buffer_m.data.copy_(...)
    ]
    return (sum(b for b, _ in enc), sum(k for _, k in enc), sum(b for b, _ in dec), sum(k for _, k in dec))


@pytest.mark.parametrize("workers", [4, 8])
def test_onebit_matches_compressed_allreduce_op_by_op(workers):
    assert N_ELEM % pad_multiple(workers) == 0  # no padding
    enc_b, enc_k, dec_b, dec_k = _onebit_hand(N_ELEM, workers)
    assert _enc(OneBitCodec(), workers) == (pytest.approx(enc_b), enc_k)
    assert _dec(OneBitCodec(), workers) == (pytest.approx(dec_b), dec_k)
    assert enc_k + dec_k == 53 + 4 * workers


def test_onebit_padding_is_adam_divider_and_copies_the_buffer():
    # adam.py: divider = lcm(size, 8); the buffer is padded to a multiple of size x divider
    assert [pad_multiple(n) for n in (2, 4, 6, 8, 64)] == [16, 32, 144, 64, 4096]
    numel, workers = 1_000_001, 64
    n = padded_elements(numel, workers)
    assert n == 245 * 4096
    enc_b, enc_k, dec_b, dec_k = _onebit_hand(n, workers, pad_from=numel)
    assert _enc(OneBitCodec(), workers, [(numel,)]) == (pytest.approx(enc_b), enc_k)
    assert _dec(OneBitCodec(), workers, [(numel,)]) == (pytest.approx(dec_b), dec_k)


def test_onebit_buffers_are_fp32_whatever_the_gradient_dtype():
    # 1-bit Adam compresses the fp32 momentum of FP16_Optimizer's master copy: fp16 gradients change nothing
    codec = OneBitCodec()
    assert _enc(codec, 8, v=2) == _enc(codec, 8, v=4)
    assert _dec(codec, 8, v=2) == _dec(codec, 8, v=4)
    assert codec.error_feedback_bytes(SHAPES, 2, 8) == 4 * N_ELEM + 4 * N_ELEM / 8
    scales = [c.size_bytes for c in codec.plan(SHAPES, 2, 8).collectives][1::2]
    assert scales == [8 * 4, 8 * 4]  # N fp32 scales, all_gathered twice


def test_onebit_large_buffer_is_about_44_fp32_passes():
    # per element of a large fp32 buffer at N = 64: 102.5 B before the all_to_all, 73.375 B after, 106.125 B per
    # server-chunk element (n / 64): 177.5 B, 44.4 reads-or-writes of the 4-byte buffer
    n, workers = 64 * 4096 * 100, 64
    enc_b, _ = _enc(OneBitCodec(), workers, [(n,)])
    dec_b, _ = _dec(OneBitCodec(), workers, [(n,)])
    assert (enc_b + dec_b) / n == pytest.approx(102.5 + 73.375 + 106.125 / 64, rel=1e-5)


# -- torch's hooks ---------------------------------------------------------------------------------------------
def test_fp16_hook():
    # buffer.to(float16) (4 + 2), .div_(world_size) (2 + 2); decompress: buffer.copy_(value) (2 + 4)
    n = N_ELEM
    assert _enc(Fp16Codec(), 4) == (10 * n, 2)
    assert _dec(Fp16Codec(), 4) == (6 * n, 1)


def test_powersgd_hook_rank1():
    # input.add_(error) 12n, clone 8n; Q's Gram-Schmidt at rank 1 (norm, div: 2 launches, charged 2 m r (r+1) v);
    # bmm P = M Q; after the P all_reduce: P's Gram-Schmidt, bmm Q = M^T P, Q.div_(N), bmm M = P Q^T into the
    # gradient, error = input_cp - input 12n
    n, m, r, v = N_ELEM, 1000, 1, 4
    gs = 2 * m * r * (r + 1) * v
    mm = (n + 2 * m * r) * v
    assert _enc(PowerSgdCodec(rank=1), 4) == (pytest.approx(20 * n + gs + mm), 1 + 1 + 2 + 1)
    assert _dec(PowerSgdCodec(rank=1), 4) == (pytest.approx(gs + mm + 2 * m * r * v + mm + 12 * n), 2 + 1 + 1 + 1 + 1)


# -- validation/hooks.py's int8, top-k and random-k --------------------------------------------------------------
def test_int8_hook():
    # abs 8n, max 4n, stack/gt/ones_like/where of the scales (4 tiny kernels), repeat_interleave 4n, x / scale 12n,
    # * levels 8n, rand 4n, + u 12n, floor 8n, clamp_ 8n, to(int8) 5n; decode: float 5n, * scale 12n,
    # / (levels N) 8n, buf.copy_ 8n
    n = N_ELEM
    assert _enc(Int8Codec(), 4) == (pytest.approx(73 * n + 16), 14)
    assert _dec(Int8Codec(), 4) == (pytest.approx(33 * n), 4)


def test_topk_hook():
    # k = 10^4; x = g + e 12n, abs 8n, topk: 4 radix passes 16n, x[idx] k (8 + 32 + 4), to(int32) + cat 28k,
    # x[idx] = 0 k (4 + 8 + 64); decode at N = 4 (4k pairs): the all_gather's 4 row copies 2 x 4k x 8,
    # zeros_like 4n, contiguous + long 4k (4 + 4 + 4 + 8), values reshape 2 x 4k x 4, index_add_ 4k (4 + 8 + 64),
    # div_ 8n, buf.copy_ 8n
    n, k = N_ELEM, 10_000
    assert _enc(TopKCodec(ratio=0.01), 4) == (pytest.approx(36 * n + 44 * k + 28 * k + 76 * k), 9)
    assert _dec(TopKCodec(ratio=0.01), 4) == (pytest.approx(20 * n + (64 + 80 + 32 + 304) * k), 11)


def test_randomk_hook():
    # x = g + e 12n, randperm(n) 100n (5 launches), x[idx] 44k, x[idx] = 0 76k; decode: zeros_like 4n, s / N 8k,
    # out[idx] = ... 76k, buf.copy_ 8n
    n, k = N_ELEM, 10_000
    assert _enc(RandomKCodec(ratio=0.01), 4) == (pytest.approx(112 * n + 120 * k), 8)
    assert _dec(RandomKCodec(ratio=0.01), 4) == (pytest.approx(12 * n + 84 * k), 4)
