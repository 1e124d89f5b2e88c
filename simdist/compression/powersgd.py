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

    def _groups(self, b: Bucket) -> int:
        """torch batches same-shape matrices into one bmm: the number of distinct compressed shapes."""
        return len({(m.rows, m.cols, m.rank) for m in self.matrices(b) if m.rank})

    def _orthogonalize(self, name: str, rows_by_matrix: list[tuple[int, int]], v: float, groups: int) -> Kernel:
        """torch's Gram-Schmidt over r columns, batched per shape group: each column is normalised (norm, div)
        and projected out of the later ones (mul, sum, mul, sub): about 4 m r (r + 1) / 2 values read and
        written, 2 m r^2 FLOPs, 2 r + 4 (r - 1) ops per group."""
        r = max((r for _, r in rows_by_matrix), default=1)
        moved = sum(4 * m * r * (r + 1) / 2 * v for m, r in rows_by_matrix)
        flops = sum(2.0 * m * r * r for m, r in rows_by_matrix)
        return Kernel(name, moved, flops, launches=groups * (2 * r + 4 * (r - 1)))

    def _encode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        """torch's powerSGD_hook up to the first all_reduce: input += error and its copy for the error update,
        the uncompressed tensors copied into one buffer, Q orthogonalised (warm start) and P = M Q."""
        v = b.elem_bytes
        mats = self.matrices(b)
        comp = [m for m in mats if m.rank]
        dense = sum(m.numel for m in mats if not m.rank)
        g = self._groups(b)
        out = []
        if self.error_feedback:
            out += [Kernel("ef_add", 3 * b.dense_bytes), Kernel("copy_input", 2 * b.dense_bytes, alloc_bytes=b.dense_bytes)]
        if dense:
            out.append(Kernel("cat_uncompressed", 2 * dense * v, alloc_bytes=dense * v))
        out.append(self._orthogonalize("orthogonalize_Q", [(m.cols, m.rank) for m in comp], v, g))
        for m in comp:
            out.append(Kernel("P=MQ", (m.numel + (m.rows + m.cols) * m.rank) * v, 2.0 * m.numel * m.rank,
                              launches=0))
        out.append(Kernel("bmm_launch", 0.0, launches=g))
        return out

    def _decode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        """After the all_reduces: the uncompressed tensors averaged and copied back, P orthogonalised, Q = M^T P
        (between the P and Q all_reduces), Q / N, M = P Q^T, and error = input copy - M."""
        v = b.elem_bytes
        mats = self.matrices(b)
        comp = [m for m in mats if m.rank]
        plain = [m for m in mats if not m.rank]
        dense = sum(m.numel for m in plain)
        g = self._groups(b)
        out = []
        if dense:
            out += [Kernel("average_uncompressed", 2 * dense * v), Kernel("copy_back", 2 * dense * v,
                                                                          launches=len(plain))]
        out.append(self._orthogonalize("orthogonalize", [(m.rows, m.rank) for m in comp], v, g))
        for m in comp:
            pq = (m.numel + (m.rows + m.cols) * m.rank) * v
            out.append(Kernel("Q=MtP", pq, 2.0 * m.numel * m.rank, launches=0))
            out.append(Kernel("M=PQt", pq, 2.0 * m.numel * m.rank, launches=0))
        out.append(Kernel("bmm_launch", 0.0, launches=3 * g))  # Q = M^T P, Q / N, M = P Q^T per group
        if self.error_feedback:
            out.append(Kernel("ef_update", 3 * b.dense_bytes, alloc_bytes=b.dense_bytes))  # e = input_cp - M_approx
        return out

    def _state_bytes(self, b: Bucket, n_workers: int) -> float:
        comp = [m for m in self.matrices(b) if m.rank]
        pq = sum((m.rows + m.cols) * m.rank for m in comp) * b.elem_bytes  # P and warm-start Q
        return (b.dense_bytes if self.error_feedback else 0.0) + pq
