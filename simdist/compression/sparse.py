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
    """What top-k and random-k share: k, error feedback and the residual update."""

    ratio: float = 0.01
    error_feedback: bool = True

    def k(self, b: Bucket) -> int:
        return kept_elements(b.numel, self.ratio)

    def _ef_kernels(self, b: Bucket) -> list[Kernel]:
        return [Kernel("ef_add", 3 * b.dense_bytes)] if self.error_feedback else []  # e += g (read g, e; write e)

    def _ef_zero_sent(self, b: Bucket) -> list[Kernel]:
        # the residual keeps what was not sent: zero the k sent entries (scattered writes)
        if not self.error_feedback:
            return []
        k = self.k(b)
        return [Kernel("ef_zero_sent", k * (index_bytes(b.numel) + self.cost.random_access_bytes))]

    def _state_bytes(self, b: Bucket, n_workers: int) -> float:
        return b.dense_bytes if self.error_feedback else 0.0


@dataclass(frozen=True)
class TopKCodec(SparseCodec):
    """Top-k by magnitude: every worker picks different indices, so (value, index) pairs are
    all_gathered and each worker scatter-adds the N contributions.

    Selection is modelled as PyTorch's multi-block radix select: `select_passes` full reads of the
    keys (8-bit digits of a 32-bit key = 4 passes), after an abs() pass and before a gather.
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
            *self._ef_kernels(b),
            Kernel("abs", 2 * b.dense_bytes),
            Kernel("radix_select", self.select_passes * b.dense_bytes, launches=self.select_passes),
            Kernel("gather_topk", b.dense_bytes + k * (b.elem_bytes + idx)),
            Kernel("gather_signed", k * (idx + self.cost.random_access_bytes + b.elem_bytes)),
            *self._ef_zero_sent(b),
        ]

    def _decode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        k, idx = self.k(b), index_bytes(b.numel)
        # each scatter-add reads k pairs and read-modify-writes k scattered sectors
        scatter = k * (b.elem_bytes + idx + 2 * self.cost.random_access_bytes)
        return [
            Kernel("zero_fill", b.dense_bytes),
            Kernel("scatter_add", n_workers * scatter, launches=n_workers),
            Kernel("average", 2 * b.dense_bytes),
        ]


@dataclass(frozen=True)
class RandomKCodec(SparseCodec):
    """Random-k with a seed shared by all workers: the same k indices everywhere, so only the k values
    travel, in a summable all_reduce; indices are regenerated locally, never sent."""

    method: ClassVar[CompressionMethod] = CompressionMethod.RANDOMK

    def _compressed_plan(self, b: Bucket, n_workers: int) -> CommPlan | None:
        if self.k(b) >= b.numel:
            return None
        return CommPlan((Collective(CollectiveOp.ALL_REDUCE, self.k(b) * b.elem_bytes),), summable=True,
                        labels=("randomk_values",))

    def _encode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        k, idx = self.k(b), index_bytes(b.numel)
        return [
            *self._ef_kernels(b),
            Kernel("random_indices", k * idx),
            Kernel("gather", k * (idx + self.cost.random_access_bytes + b.elem_bytes)),
            *self._ef_zero_sent(b),
        ]

    def _decode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        k, idx = self.k(b), index_bytes(b.numel)
        return [
            Kernel("zero_fill", b.dense_bytes),
            Kernel("scatter_average", k * (b.elem_bytes + idx + self.cost.random_access_bytes)),
        ]


def topk_crossover_workers(ratio: float, value_bytes: float = 4, index_bytes_: float = 4) -> float:
    """Group size at which top-k's ring all_gather sends as much per rank as the dense ring all_reduce.

    all_gather: (N-1) k (v+i); all_reduce: 2 (N-1)/N n v; equal at N = 2 v / (ratio (v+i)). Beyond it
    top-k loses on traffic even though its per-worker payload is smaller.
    """
    return 2.0 * value_bytes / (ratio * (value_bytes + index_bytes_))
