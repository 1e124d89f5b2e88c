"""1-bit compression with error feedback, exchanged by 1-bit Adam's two-phase compressed all-reduce.

Signs cannot be summed in place, so (as DeepSpeed's NcclBackend.compressed_allreduce does) each
worker sends chunk j of its packed signs to worker j (all_to_all) with its scale (all_gather); worker j
averages its chunk over the N workers, re-compresses it with a server-side error feedback, and the
compressed chunks and their scales are all_gathered back.

1-bit Adam (and 1-bit LAMB) compress the optimizer's momentum, not the gradient: FP16_Optimizer hands the
optimizer its fp32 master copy as one flat tensor per parameter group, `exp_avg` is `zeros_like` of it and
the error buffers are `torch.zeros` (fp32), so every buffer this codec touches holds 4-byte floats whatever
the gradients' dtype (deepspeed/runtime/fp16/onebit/adam.py, fp16/fused_optimizer.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from simdist.collectives.schedule import CollectiveOp
from simdist.compression.base import Bucket, CodecBase, Collective, CommPlan
from simdist.compression.cost import Kernel
from simdist.scenario import CompressionMethod

MOMENTUM_BYTES = 4  # fp32 momentum, worker and server errors, scales (see the module docstring)


def pad_multiple(n_workers: int) -> int:
    """adam.py pads each flat buffer to a multiple of size x divider, divider = lcm(size, 8), so every
    worker's chunk packs into whole bytes."""
    return n_workers * (n_workers * 8 // math.gcd(n_workers, 8))


def padded_elements(numel: int, n_workers: int) -> int:
    """The buffer's length after DeepSpeed's padding (pad_multiple)."""
    div = pad_multiple(n_workers)
    return math.ceil(numel / div) * div


def _error_update(name: str, n: float) -> Kernel:
    """error.set_(x - scale * x.sign().add_(1).bool().float().add_(-0.5).mul_(2.0)) on n fp32 values: eight
    kernels, sign (read 4, write 4), add_ (8), bool (4 + 1), float (1 + 4), add_ (8), mul_ (8), scale * (8),
    x - (...) (12): 62 bytes per element; sign, bool, float, the product and the difference are fresh."""
    return Kernel(name, 62 * n, launches=8, alloc_bytes=17 * n)


def _norm(name: str, n: float) -> Kernel:
    """torch.linalg.norm(x) / np.sqrt(n): one reduction reading x, one 0-d division."""
    return Kernel(name, 4 * n, launches=2)


def _sign_pack(prefix: str, n: float) -> list[Kernel]:
    """x.sign_().add_(1).bool().to(torch.uint8) (torch >= 1.10, bool_not_supported) then cupy.packbits."""
    return [Kernel(f"{prefix}sign_to_uint8", n * (8 + 8 + 5 + 2), launches=4, alloc_bytes=2 * n),
            Kernel(f"{prefix}packbits", n + n / 8, alloc_bytes=n / 8)]


def _unpack(prefix: str, n: float) -> list[Kernel]:
    """cupy.unpackbits(recv.flatten()) (flatten copies a cupy array), .float().add_(-0.5).mul_(2.0) and the
    multiply by the N scales (broadcast over the N rows): n fp32 values of +-scale."""
    return [Kernel(f"{prefix}flatten", n / 4, alloc_bytes=n / 8), Kernel(f"{prefix}unpackbits", n / 8 + n, alloc_bytes=n),
            Kernel(f"{prefix}to_float", n * (1 + 4), alloc_bytes=4 * n), Kernel(f"{prefix}to_sign", 2 * 8 * n, launches=2),
            Kernel(f"{prefix}times_scales", 8 * n)]


def _list_gather_copies(name: str, n_workers: int, total_bytes: float) -> Kernel:
    """dist.all_gather into a list of N tensors: ProcessGroupNCCL gathers into a flat buffer, then copies each
    row into its output (N copies, `total_bytes` read and written)."""
    return Kernel(name, 2 * total_bytes, launches=n_workers, alloc_bytes=total_bytes)


@dataclass(frozen=True)
class OneBitCodec(CodecBase):
    """Sign bits + one scale (||x||_2 / sqrt(n)) per worker, worker- and server-side error feedback."""

    method: ClassVar[CompressionMethod] = CompressionMethod.ONEBIT
    error_feedback: bool = True

    def _compressed_plan(self, b: Bucket, n_workers: int) -> CommPlan | None:
        signs = padded_elements(b.numel, n_workers) / 8  # bytes of packed signs of the whole buffer
        scales = n_workers * MOMENTUM_BYTES  # one fp32 scale per worker, all_gathered
        return CommPlan(
            (Collective(CollectiveOp.ALL_TO_ALL, signs), Collective(CollectiveOp.ALL_GATHER, scales),
             Collective(CollectiveOp.ALL_GATHER, signs), Collective(CollectiveOp.ALL_GATHER, scales)),
            summable=False,
            labels=("worker_signs", "worker_scales", "server_signs", "server_scales"))

    def _encode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        """NcclBackend.compressed_allreduce up to the all_to_all, on the fp32 buffer: the padding (zeros and
        cat, a copy of the buffer, when its length is not a multiple of pad_multiple), buffer += worker_error,
        scale = ||x|| / sqrt(n), the worker error update, sign to uint8 and packbits, the receive buffer
        (cupy.zeros), torch.stack of the N packed chunks and the N one-element scale receive buffers."""
        n, numel, v = padded_elements(b.numel, n_workers), b.numel, MOMENTUM_BYTES
        out = []
        if n != numel:
            out += [Kernel("pad_zeros", v * (n - numel), alloc_bytes=v * (n - numel)),
                    Kernel("pad_cat", v * (numel + n), alloc_bytes=v * n)]
        if self.error_feedback:
            out.append(Kernel("ef_add", 3 * n * v))
        out.append(_norm("norm", n))
        if self.error_feedback:
            out.append(_error_update("ef_update", n))
        return [*out, *_sign_pack("", n), Kernel("recv_signs_zeros", n / 8, alloc_bytes=n / 8),
                Kernel("stack_chunks", n / 4, alloc_bytes=n / 8),
                Kernel("recv_scales_zeros", n_workers * v, launches=n_workers, alloc_bytes=n_workers * v)]

    def _decode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        """After the all_to_all: the scale gather's N copies, the server side on this worker's chunk (unpack the
        N received chunks times their scales / N, sum over workers, add the server error, norm, server error
        update, sign and packbits), the receive buffers, phase 2's list gathers (N copies each), torch.stack of
        the gathered chunks, and the unpack of the result copied into the buffer."""
        n = padded_elements(b.numel, n_workers)
        c = n / n_workers  # this worker's server chunk
        v, N = MOMENTUM_BYTES, n_workers
        server = [_list_gather_copies("worker_scale_copies", N, N * v), *_unpack("server_", n),
                  Kernel("stack_scales_div_N", 2 * 2 * N * v, launches=2, alloc_bytes=N * v),
                  Kernel("sum_workers", 4 * n + 4 * c, alloc_bytes=4 * c)]
        if self.error_feedback:
            server.append(Kernel("server_ef_add", 3 * c * v))
        server.append(_norm("server_norm", c))
        if self.error_feedback:
            server.append(_error_update("server_ef_update", c))
        server += _sign_pack("server_", c)
        phase2 = [Kernel("recv_zeros", n / 8 + N * v, launches=2, alloc_bytes=n / 8 + N * v),
                  _list_gather_copies("server_sign_copies", N, n / 8),
                  _list_gather_copies("server_scale_copies", N, N * v),
                  Kernel("stack_server_signs", n / 4, alloc_bytes=n / 8)]
        return [*server, *phase2, *_unpack("", n), Kernel("copy_into_buffer", 2 * n * v)]

    def _state_bytes(self, b: Bucket, n_workers: int) -> float:
        if not self.error_feedback:
            return 0.0
        n = padded_elements(b.numel, n_workers)
        return n * MOMENTUM_BYTES + n / n_workers * MOMENTUM_BYTES  # worker error + server error (1/N)
