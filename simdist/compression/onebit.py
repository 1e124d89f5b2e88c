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
        n = padded_elements(b.numel, n_workers)
        v = b.elem_bytes
        ef = [Kernel("ef_add", 3 * n * v)] if self.error_feedback else []
        update = [Kernel("ef_update", 3 * n * v)] if self.error_feedback else []  # e = x - scale*sign(x)
        return [*ef, Kernel("norm", n * v), Kernel("sign_pack", n * v + n / 8), *update]

    def _decode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        n = padded_elements(b.numel, n_workers)
        c = n / n_workers  # this worker's server chunk
        v = b.elem_bytes
        server = [
            Kernel("unpack_chunks", n / 8 + n * v),  # N received chunks of c elements each
            Kernel("scaled_sum", n * v + c * v),
        ]
        if self.error_feedback:
            server.append(Kernel("server_ef_add", 3 * c * v))
        server += [Kernel("server_norm", c * v), Kernel("server_sign_pack", c * v + c / 8)]
        if self.error_feedback:
            server.append(Kernel("server_ef_update", 3 * c * v))
        return [*server, Kernel("unpack_result", n / 8 + n * v)]

    def _state_bytes(self, b: Bucket, n_workers: int) -> float:
        if not self.error_feedback:
            return 0.0
        n = padded_elements(b.numel, n_workers)
        return n * b.elem_bytes + n / n_workers * b.elem_bytes  # worker error + server error (1/N)
