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

    @staticmethod
    def _orthogonalize(name: str, shapes: list[tuple[int, int]], v: float) -> Kernel:
        """torch's _orthogonalize on each m x r matrix (a batch of one: batch_tensors_with_same_shape is off by
        default). Rank <= 2 or 2-byte values: Gram-Schmidt, each column normalised (norm, div) and projected out
        of the later ones (mul, sum, mul, sub): 2 r + 4 (r - 1) ops, about 2 m r (r + 1) values read and written,
        2 m r^2 FLOPs. Otherwise torch.linalg.qr (Householder): about 4 m r^2 FLOPs, the panel read and written
        once per column, about 4 r launches."""
        moved = flops = 0.0
        launches = 0
        for m, r in shapes:
            if r <= 2 or v < 4:
                moved += 2 * m * r * (r + 1) * v
                flops += 2.0 * m * r * r
                launches += 2 * r + 4 * (r - 1)
            else:
                moved += 2 * m * r * r * v
                flops += 4.0 * m * r * r
                launches += 4 * r
        return Kernel(name, moved, flops, launches=launches)

    def _encode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        """torch's powerSGD_hook up to the first all_reduce: input += error and its copy for the error update,
        the uncompressed tensors copied into one buffer, each Q orthogonalised (warm start) and P = M Q (one bmm
        per matrix, written into the P buffer)."""
        v = b.elem_bytes
        mats = self.matrices(b)
        comp = [m for m in mats if m.rank]
        dense = sum(m.numel for m in mats if not m.rank)
        out = []
        if self.error_feedback:
            out += [Kernel("ef_add", 3 * b.dense_bytes), Kernel("copy_input", 2 * b.dense_bytes, alloc_bytes=b.dense_bytes)]
        if dense:
            out.append(Kernel("cat_uncompressed", 2 * dense * v, alloc_bytes=dense * v))
        out.append(self._orthogonalize("orthogonalize_Q", [(m.cols, m.rank) for m in comp], v))
        for m in comp:
            out.append(Kernel("P=MQ", (m.numel + (m.rows + m.cols) * m.rank) * v, 2.0 * m.numel * m.rank))
        return out

    def _decode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        """After the all_reduces: the uncompressed tensors averaged and copied back, each P orthogonalised,
        Q = M^T P (between the P and Q all_reduces), Q / N, M = P Q^T (into the gradient), and
        error = input copy - M."""
        v = b.elem_bytes
        mats = self.matrices(b)
        comp = [m for m in mats if m.rank]
        plain = [m for m in mats if not m.rank]
        dense = sum(m.numel for m in plain)
        out = []
        if dense:
            out += [Kernel("average_uncompressed", 2 * dense * v), Kernel("copy_back", 2 * dense * v,
                                                                          launches=len(plain))]
        out.append(self._orthogonalize("orthogonalize", [(m.rows, m.rank) for m in comp], v))
        for m in comp:
            pq = (m.numel + (m.rows + m.cols) * m.rank) * v
            out.append(Kernel("Q=MtP", pq, 2.0 * m.numel * m.rank))
        out.append(Kernel("Q/N", 2 * sum(m.cols * m.rank for m in comp) * v))
        for m in comp:
            pq = (m.numel + (m.rows + m.cols) * m.rank) * v
            out.append(Kernel("M=PQt", pq, 2.0 * m.numel * m.rank))
        if self.error_feedback:
            out.append(Kernel("ef_update", 3 * b.dense_bytes, alloc_bytes=b.dense_bytes))  # e = input_cp - M_approx
        return out

    def _state_bytes(self, b: Bucket, n_workers: int) -> float:
        comp = [m for m in self.matrices(b) if m.rank]
        pq = sum((m.rows + m.cols) * m.rank for m in comp) * b.elem_bytes  # P and warm-start Q
        return (b.dense_bytes if self.error_feedback else 0.0) + pq
