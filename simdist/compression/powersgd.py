"""PowerSGD: rank-r approximation M ~ P Q^T of each gradient matrix, one power iteration per step.

Follows torch's powerSGD_hook: tensors are viewed as (shape[0], prod(rest)); 1-D tensors and
matrices whose compression would not save at least `min_compression_rate`x are all-reduced
uncompressed in one call; then all P's (m x r) in one all_reduce, all Q's (n x r) in another.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from simdist.collectives.schedule import CollectiveOp
from simdist.compression.base import Bucket, CodecBase, Collective, CommPlan
from simdist.compression.cost import Kernel
from simdist.scenario import CompressionMethod


@dataclass(frozen=True)
class Matrix:
    """One tensor as PowerSGD sees it: rows x cols, approximated at `rank` (0 = sent uncompressed)."""

    rows: int
    cols: int
    rank: int

    @property
    def numel(self) -> int:
        return self.rows * self.cols


def as_matrix(shape: tuple[int, ...]) -> tuple[int, int]:
    """(shape[0], prod(rest)); a 1-D tensor is a single row's worth: (n, 1)."""
    return (shape[0], math.prod(shape[1:])) if len(shape) >= 1 else (1, 1)


@dataclass(frozen=True)
class PowerSgdCodec(CodecBase):
    """Low-rank codec; `min_compression_rate` = 2 as torch's PowerSGDState default."""

    method: ClassVar[CompressionMethod] = CompressionMethod.POWERSGD
    rank: int = 1
    error_feedback: bool = True
    min_compression_rate: float = 2.0

    def matrices(self, b: Bucket) -> list[Matrix]:
        """Each tensor with the rank it is compressed at (0 for those sent uncompressed)."""
        out = []
        for shape in b.shapes:
            rows, cols = as_matrix(shape)
            r = min(rows, cols, self.rank)
            compress = len(shape) > 1 and (rows + cols) * r * self.min_compression_rate < rows * cols
            out.append(Matrix(rows, cols, r if compress else 0))
        return out

    def _compressed_plan(self, b: Bucket, n_workers: int) -> CommPlan | None:
        mats = self.matrices(b)
        comp = [m for m in mats if m.rank]
        if not comp:
            return None
        v = b.elem_bytes
        dense = sum(m.numel for m in mats if not m.rank) * v
        p = sum(m.rows * m.rank for m in comp) * v
        q = sum(m.cols * m.rank for m in comp) * v
        calls, labels = [], []
        if dense:
            calls.append(Collective(CollectiveOp.ALL_REDUCE, dense))
            labels.append("uncompressed")
        calls += [Collective(CollectiveOp.ALL_REDUCE, p), Collective(CollectiveOp.ALL_REDUCE, q)]
        labels += ["P", "Q"]
        return CommPlan(tuple(calls), summable=True, labels=tuple(labels))

    def _encode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        v = b.elem_bytes
        out = []
        if self.error_feedback:  # e += g, then keep a copy of the input for the error update
            out += [Kernel("ef_add", 3 * b.dense_bytes), Kernel("copy_input", 2 * b.dense_bytes)]
        for m in (m for m in self.matrices(b) if m.rank):
            out.append(Kernel("P=MQ", (m.numel + (m.rows + m.cols) * m.rank) * v, 2.0 * m.numel * m.rank))
        return out

    def _decode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        """Orthogonalise P and Q = M^T P run between the two all_reduces; P Q^T and the error after."""
        v = b.elem_bytes
        out = []
        for m in (m for m in self.matrices(b) if m.rank):
            r = m.rank
            pq = (m.numel + (m.rows + m.cols) * r) * v
            # Gram-Schmidt: about m r^2 multiply-adds (2 m r^2 FLOPs), column by column (2 launches each)
            out.append(Kernel("orthogonalize", m.rows * r * (r + 1) * v, 2.0 * m.rows * r * r, launches=2 * r))
            out.append(Kernel("Q=MtP", pq, 2.0 * m.numel * r))
            out.append(Kernel("M=PQt", pq, 2.0 * m.numel * r))
        if self.error_feedback:
            out.append(Kernel("ef_update", 3 * b.dense_bytes))  # e = input_cp - M_approx
        return out

    def _state_bytes(self, b: Bucket, n_workers: int) -> float:
        comp = [m for m in self.matrices(b) if m.rank]
        pq = sum((m.rows + m.cols) * m.rank for m in comp) * b.elem_bytes  # P and warm-start Q
        return (b.dense_bytes if self.error_feedback else 0.0) + pq
