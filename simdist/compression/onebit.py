"""1-bit compression with error feedback, exchanged by 1-bit Adam's two-phase compressed all-reduce.

Signs cannot be summed in place, so (as DeepSpeed's NcclBackend.compressed_allreduce does) each
worker sends chunk j of its packed signs to worker j (all_to_all) with its scale (all_gather); worker j
averages its chunk over the N workers, re-compresses it with a server-side error feedback, and the
compressed chunks and their scales are all_gathered back.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from simdist.collectives.schedule import CollectiveOp
from simdist.compression.base import Bucket, CodecBase, Collective, CommPlan
from simdist.compression.cost import Kernel
from simdist.scenario import CompressionMethod


def padded_elements(numel: int, n_workers: int) -> int:
    """DeepSpeed pads the buffer to a multiple of 8 x N so every chunk packs into whole bytes."""
    div = 8 * n_workers
    return math.ceil(numel / div) * div


def _error_update_bytes(n: float, v: float) -> float:
    """error = x - scale * (sign(x) + 1 -> bool -> float - 0.5) * 2: eight elementwise ops over n elements."""
    return n * (2 * v + 2 * v + (v + 1) + (1 + 4) + 8 + 8 + 8 + (4 + v + v))


def _error_update_alloc(n: float, v: float) -> float:
    """Fresh outputs of the error update: sign, bool, float, scale * (...), x - (...)."""
    return n * (v + 1 + 4 + 4 + v)


def _sign_pack(n: float, v: float) -> list[Kernel]:
    """x.sign_().add_(1).bool() then packbits: 8 sign bits per byte."""
    return [Kernel("sign_bool", n * (2 * v + 2 * v + v + 1), launches=3, alloc_bytes=n),
            Kernel("packbits", n + n / 8, alloc_bytes=n / 8)]


def _unpack_scaled(n: float) -> list[Kernel]:
    """unpackbits(...).float().add_(-0.5).mul_(2.0).mul_(scales): n fp32 values of +-scale."""
    return [Kernel("unpackbits", n / 8 + n, alloc_bytes=n), Kernel("to_float", n * (1 + 4), alloc_bytes=4 * n),
            Kernel("to_sign", 2 * 8 * n, launches=2), Kernel("times_scale", 8 * n)]


@dataclass(frozen=True)
class OneBitCodec(CodecBase):
    """Sign bits + one scale (||x||_2 / sqrt(n)) per worker, worker- and server-side error feedback."""

    method: ClassVar[CompressionMethod] = CompressionMethod.ONEBIT
    error_feedback: bool = True

    def _compressed_plan(self, b: Bucket, n_workers: int) -> CommPlan | None:
        signs = padded_elements(b.numel, n_workers) / 8  # bytes of packed signs of the whole buffer
        scales = n_workers * b.elem_bytes  # one scale per worker, all_gathered
        return CommPlan(
            (Collective(CollectiveOp.ALL_TO_ALL, signs), Collective(CollectiveOp.ALL_GATHER, scales),
             Collective(CollectiveOp.ALL_GATHER, signs), Collective(CollectiveOp.ALL_GATHER, scales)),
            summable=False,
            labels=("worker_signs", "worker_scales", "server_signs", "server_scales"))

    def _encode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        """DeepSpeed's worker side, one tensor op per pass: buffer += worker_error; scale = ||x|| / sqrt(n);
        worker_error = x - scale * sign-as-+-1 (sign, add_, bool, float, add_, mul_, mul, sub); then
        sign_().add_(1).bool() and cupy packbits by chunk."""
        n = padded_elements(b.numel, n_workers)
        v = b.elem_bytes
        ef = [Kernel("ef_add", 3 * n * v)] if self.error_feedback else []
        update = [Kernel("ef_update", _error_update_bytes(n, v), launches=8, alloc_bytes=_error_update_alloc(n, v))] if self.error_feedback else []
        return [*ef, Kernel("norm", n * v), *update, *_sign_pack(n, v)]

    def _decode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        """The server side on this worker's chunk (unpack the N received chunks, scale, average, add the server
        error, re-compress with its own error update), then the unpack of the all_gathered result."""
        n = padded_elements(b.numel, n_workers)
        c = n / n_workers  # this worker's server chunk
        v = b.elem_bytes
        server = [*_unpack_scaled(n), Kernel("sum_workers", 4 * n + 4 * c, alloc_bytes=4 * c)]
        if self.error_feedback:
            server.append(Kernel("server_ef_add", 3 * c * 4))
        server.append(Kernel("server_norm", c * 4))
        if self.error_feedback:
            server.append(Kernel("server_ef_update", _error_update_bytes(c, 4), launches=8,
                                 alloc_bytes=_error_update_alloc(c, 4)))
        server += _sign_pack(c, 4)
        return [*server, *_unpack_scaled(n), Kernel("copy_into_buffer", n * (4 + v))]

    def _state_bytes(self, b: Bucket, n_workers: int) -> float:
        if not self.error_feedback:
            return 0.0
        n = padded_elements(b.numel, n_workers)
        return n * b.elem_bytes + n / n_workers * b.elem_bytes  # worker error + server error (1/N)
