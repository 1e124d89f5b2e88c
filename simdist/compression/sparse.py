"""Sparsifying codecs: top-k (largest magnitudes, all_gather) and random-k (shared seed, all_reduce).

Both select k = ceil(ratio x n) elements of the flattened bucket, as a DDP communication hook sees
it, and keep what was not sent in an error-feedback residual added to the next gradient.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from simdist.collectives.schedule import CollectiveOp
from simdist.compression.base import Bucket, CodecBase, Collective, CommPlan
from simdist.compression.cost import Kernel
from simdist.scenario import CompressionMethod


def kept_elements(numel: int, ratio: float) -> int:
    """k = ceil(ratio x n), at least 1 and at most n."""
    return min(numel, max(1, math.ceil(round(ratio * numel, 6))))


def index_bytes(numel: int) -> int:
    """int32 indices while the bucket has fewer than 2**31 elements, int64 beyond."""
    return 4 if numel < 2**31 else 8


@dataclass(frozen=True)
class SparseCodec(CodecBase):
    """What top-k and random-k share: k, error feedback and the residual update, as the op sequence of
    simdist's DDP hooks (simdist.validation.hooks: x = g + e; select; x[idx]; x[idx] = 0 keeps the residual)."""

    ratio: float = 0.01
    error_feedback: bool = True

    def k(self, b: Bucket) -> int:
        return kept_elements(b.numel, self.ratio)

    def _with_residual(self, b: Bucket) -> list[Kernel]:
        # x = g + e (read g, e; write x), or x = g.clone() without error feedback
        fresh = b.dense_bytes
        if self.error_feedback:
            return [Kernel("ef_add", 3 * b.dense_bytes, alloc_bytes=fresh)]
        return [Kernel("clone", 2 * b.dense_bytes, alloc_bytes=fresh)]

    def _gather(self, b: Bucket, idx_bytes: float) -> Kernel:
        """x[idx]: k values read at random indices (a 32-byte sector each on a GPU)."""
        k = self.k(b)
        return Kernel("gather", k * (idx_bytes + self.cost.random_access_bytes + b.elem_bytes), op="gather", count=k)

    def _scatter(self, name: str, b: Bucket, idx_bytes: float, count: int, launches: int = 1) -> Kernel:
        """Writes (or read-modify-writes) of `count` values at random indices."""
        return Kernel(name, count * (b.elem_bytes + idx_bytes + 2 * self.cost.random_access_bytes),
                      launches=launches, op="scatter", count=count)

    def _ef_zero_sent(self, b: Bucket, idx_bytes: float) -> list[Kernel]:
        # the residual keeps what was not sent: x[idx] = 0 (scattered writes)
        return [self._scatter("ef_zero_sent", b, idx_bytes, self.k(b))] if self.error_feedback else []

    @staticmethod
    def _copy_into_bucket(b: Bucket) -> Kernel:
        """codec_hook's buf.copy_(result): the averaged gradient written back into DDP's bucket."""
        return Kernel("copy_into_bucket", 2 * b.dense_bytes)

    def _state_bytes(self, b: Bucket, n_workers: int) -> float:
        return b.dense_bytes if self.error_feedback else 0.0


@dataclass(frozen=True)
class TopKCodec(SparseCodec):
    """Top-k by magnitude: every worker picks different indices, so (value, index) pairs are
    all_gathered and each worker scatter-adds the N contributions.

    On a GPU the selection is PyTorch's multi-block radix select: `select_passes` full reads of the keys
    (8-bit digits of a 32-bit key = 4 passes); on a CPU torch's top-k is a per-element search (cpu.py).
    """

    method: ClassVar[CompressionMethod] = CompressionMethod.TOPK
    select_passes: int = 4

    def _compressed_plan(self, b: Bucket, n_workers: int) -> CommPlan | None:
        pair = self.k(b) * (b.elem_bytes + index_bytes(b.numel))
        return CommPlan((Collective(CollectiveOp.ALL_GATHER, n_workers * pair),), summable=False,
                        labels=("topk_values_indices",))

    def _encode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        k, idx = self.k(b), index_bytes(b.numel)
        return [
            *self._with_residual(b),
            Kernel("abs", 2 * b.dense_bytes, alloc_bytes=b.dense_bytes),
            Kernel("topk", self.select_passes * b.dense_bytes, launches=self.select_passes, op="topk", count=b.numel),
            self._gather(b, 8),  # torch.topk returns int64 indices
            Kernel("pack_values_indices", 2 * k * (b.elem_bytes + idx) + k * (8 + idx)),  # to(int32), cat
            *self._ef_zero_sent(b, 8),
        ]

    def _decode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        """The all_gather into a list of N rows (the backend gathers into a flat buffer and copies each row out:
        N copies), zeros_like, the indices' contiguous() and .long(), the values' reshape (a strided slice: a
        copy), one index_add_ of all N x k pairs, the average, and the hook's copy into the bucket."""
        k, idx = self.k(b), index_bytes(b.numel)
        pairs = n_workers * k
        return [
            Kernel("gather_row_copies", 2 * pairs * (b.elem_bytes + idx), launches=n_workers,
                   alloc_bytes=pairs * (b.elem_bytes + idx)),
            Kernel("zero_fill", b.dense_bytes, alloc_bytes=b.dense_bytes),
            Kernel("unpack_indices", pairs * (2 * idx + idx + 8), launches=2,
                   alloc_bytes=pairs * (idx + 8)),  # contiguous(), .long()
            Kernel("values_reshape", 2 * pairs * b.elem_bytes, alloc_bytes=pairs * b.elem_bytes),
            self._scatter("index_add", b, 8, pairs),  # every worker's k pairs added into the dense buffer
            Kernel("average", 2 * b.dense_bytes),
            self._copy_into_bucket(b),
        ]


def randperm_bytes(numel: int) -> float:
    """GPU bytes of torch.randperm(n): n random 32-bit keys sorted with their int64 indices by a 4-pass
    radix sort (each pass reads and writes keys and values)."""
    return 4 * numel + 4 * 2 * (4 + 8) * numel


@dataclass(frozen=True)
class RandomKCodec(SparseCodec):
    """Random-k with a seed shared by all workers: the same k indices everywhere, so only the k values
    travel, in a summable all_reduce; indices are regenerated locally, never sent. The indices are the
    first k of torch.randperm(n) (as the hook, and GRACE's randomk, draw them): a permutation of the
    whole bucket, which on a CPU costs tens of nanoseconds per element."""

    method: ClassVar[CompressionMethod] = CompressionMethod.RANDOMK

    def _compressed_plan(self, b: Bucket, n_workers: int) -> CommPlan | None:
        if self.k(b) >= b.numel:
            return None
        return CommPlan((Collective(CollectiveOp.ALL_REDUCE, self.k(b) * b.elem_bytes),), summable=True,
                        labels=("randomk_values",))

    def _encode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        return [
            *self._with_residual(b),
            Kernel("randperm", randperm_bytes(b.numel), launches=5, op="randperm", count=b.numel,
                   alloc_bytes=8 * b.numel),
            self._gather(b, 8),
            *self._ef_zero_sent(b, 8),
        ]

    def _decode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        """zeros_like, the k summed values / N, one scatter, and the hook's copy into the bucket."""
        k = self.k(b)
        return [
            Kernel("zero_fill", b.dense_bytes, alloc_bytes=b.dense_bytes),
            Kernel("average", 2 * k * b.elem_bytes, alloc_bytes=k * b.elem_bytes),
            self._scatter("scatter", b, 8, k),
            self._copy_into_bucket(b),
        ]


def topk_crossover_workers(ratio: float, value_bytes: float = 4, index_bytes_: float = 4) -> float:
    """Group size at which top-k's ring all_gather sends as much per rank as the dense ring all_reduce.

    all_gather: (N-1) k (v+i); all_reduce: 2 (N-1)/N n v; equal at N = 2 v / (ratio (v+i)). Beyond it
    top-k loses on traffic even though its per-worker payload is smaller.
    """
    return 2.0 * value_bytes / (ratio * (value_bytes + index_bytes_))
