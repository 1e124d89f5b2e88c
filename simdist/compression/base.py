"""The codec interface: what a compressed gradient bucket puts on the wire and what it costs the GPU.

A codec answers for one bucket, given its tensor shapes and the bytes per gradient element. Its
`CommPlan` lists the collectives (nccl-tests size conventions) that carry the bucket; a codec whose
compressed form would not be smaller than the dense bucket falls back to the dense all_reduce.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple, Protocol, Sequence

from simdist.collectives.schedule import CollectiveOp
from simdist.compression.cost import Kernel, KernelCostModel
from simdist.hardware.specs import GpuSpec
from simdist.scenario import CompressionMethod

Shapes = Sequence[tuple[int, ...]]


class Collective(NamedTuple):
    """One collective call: `op` and its nccl-tests size (all_reduce/all_to_all: per-rank buffer;
    all_gather: total output across ranks)."""

    op: CollectiveOp
    size_bytes: float


def payload_bytes(op: CollectiveOp, size_bytes: float, n_workers: int) -> float:
    """Bytes one worker contributes to `op` (before the algorithm's own (N-1)/N factors)."""
    if op in (CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER):
        return size_bytes / n_workers
    return size_bytes


def bus_bytes(op: CollectiveOp, size_bytes: float, n_workers: int) -> float:
    """Bytes each rank sends in a bandwidth-optimal (ring) algorithm: size x nccl-tests' bus factor."""
    n = n_workers
    if op == CollectiveOp.ALL_REDUCE:
        return 2.0 * (n - 1) / n * size_bytes
    if op in (CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_TO_ALL):
        return (n - 1) / n * size_bytes
    return size_bytes if n > 1 else 0.0  # broadcast / reduce, pipelined


@dataclass(frozen=True)
class CommPlan:
    """The collectives carrying one bucket, in order; `summable`: they are sum-reductions a ring or
    tree (or a switch) can combine on the way, rather than gathers every worker must receive whole."""

    collectives: tuple[Collective, ...]
    summable: bool
    compressed: bool = True  # False: the codec fell back to the dense bucket
    labels: tuple[str, ...] = ()  # what each collective carries, for traces

    def wire_bytes(self, n_workers: int) -> float:
        """Per-worker payload bytes over all collectives."""
        return sum(payload_bytes(c.op, c.size_bytes, n_workers) for c in self.collectives)

    def bus_bytes(self, n_workers: int) -> float:
        """Bytes each rank sends when every collective runs as a ring."""
        return sum(bus_bytes(c.op, c.size_bytes, n_workers) for c in self.collectives)


@dataclass(frozen=True)
class Bucket:
    """A gradient bucket: its non-empty tensor shapes, bytes per gradient element, element count."""

    shapes: tuple[tuple[int, ...], ...]
    elem_bytes: float
    numel: int

    @classmethod
    def of(cls, shapes: Shapes, grad_bytes_per_elem: float) -> "Bucket":
        assert grad_bytes_per_elem > 0, grad_bytes_per_elem
        sizes = [math.prod(s) for s in shapes]
        kept = tuple(tuple(int(d) for d in s) for s, n in zip(shapes, sizes) if n > 0)
        return cls(kept, float(grad_bytes_per_elem), int(sum(n for n in sizes if n > 0)))

    @property
    def dense_bytes(self) -> float:
        return self.numel * self.elem_bytes

    @property
    def tensors(self) -> int:
        return len(self.shapes)


def dense_plan(bucket: Bucket) -> CommPlan:
    """The uncompressed bucket: one all_reduce of all its bytes."""
    if bucket.numel == 0:
        return CommPlan((), summable=True, compressed=False)
    return CommPlan((Collective(CollectiveOp.ALL_REDUCE, bucket.dense_bytes),), True, False, ("dense",))


class Codec(Protocol):
    """What the training loop needs from a gradient codec (see docs/compression.md)."""

    method: CompressionMethod

    def plan(self, shapes: Shapes, grad_bytes_per_elem: float = 4, n_workers: int = 1) -> CommPlan: ...

    def wire_bytes(self, shapes: Shapes, grad_bytes_per_elem: float = 4, n_workers: int = 1) -> float: ...

    def encode_time_s(self, shapes: Shapes, gpu: GpuSpec, grad_bytes_per_elem: float = 4,
                      n_workers: int | None = None) -> float: ...

    def decode_time_s(self, shapes: Shapes, gpu: GpuSpec, n_workers: int, grad_bytes_per_elem: float = 4) -> float: ...

    def error_feedback_bytes(self, shapes: Shapes, grad_bytes_per_elem: float = 4, n_workers: int = 1) -> float: ...

    def compresses(self, shapes: Shapes, grad_bytes_per_elem: float = 4, n_workers: int = 2) -> bool: ...

    def summary(self, shapes: Shapes, gpu: GpuSpec, n_workers: int,
                grad_bytes_per_elem: float = 4) -> "BucketCompression": ...


@dataclass(frozen=True)
class BucketCompression:
    """Everything the training loop needs about one compressed bucket, computed in one pass."""

    plan: CommPlan
    wire_bytes: float
    encode_s: float
    decode_s: float
    state_bytes: float


N_UNKNOWN = 2  # group size assumed by encode_time_s when the caller gives none


@dataclass(frozen=True)
class CodecBase:
    """Shared machinery: dense fallback, wire bytes from the plan, times from the kernel lists.

    Subclasses implement `_compressed_plan`, `_encode_kernels`, `_decode_kernels` and
    `_state_bytes`; each sees only non-empty buckets.
    """

    cost: KernelCostModel = field(default_factory=KernelCostModel)
    method: ClassVar[CompressionMethod]

    # -- to implement -------------------------------------------------------------------------
    def _compressed_plan(self, b: Bucket, n_workers: int) -> CommPlan | None:
        return None

    def _encode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        return []

    def _decode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        return []

    def _state_bytes(self, b: Bucket, n_workers: int) -> float:
        return 0.0

    # -- public ---------------------------------------------------------------------------------
    def plan(self, shapes: Shapes, grad_bytes_per_elem: float = 4, n_workers: int = 1) -> CommPlan:
        """The collectives carrying the bucket; the dense all_reduce when compression would not shrink the
        bytes that cross links (`CommPlan.bus_bytes`: a gather of N payloads is compared with the dense
        all_reduce's 2(N-1)/N, not the per-worker payload with the dense buffer)."""
        return self._plan_and_reason(Bucket.of(shapes, grad_bytes_per_elem), n_workers)[0]

    def fallback_reason(self, shapes: Shapes, grad_bytes_per_elem: float = 4, n_workers: int = 1) -> str:
        """Why the bucket goes dense ('' when the codec runs), for the result and the text table."""
        return self._plan_and_reason(Bucket.of(shapes, grad_bytes_per_elem), n_workers)[1]

    def _plan_and_reason(self, b: Bucket, n_workers: int) -> tuple[CommPlan, str]:
        assert n_workers >= 1, n_workers
        dense = dense_plan(b)
        if b.numel == 0:
            return dense, ""
        comp = self._compressed_plan(b, n_workers)
        if comp is None:
            return dense, self._no_plan_reason(b, n_workers)
        # bytes that cross links (ring bus bytes); one worker has no links, so its payload decides
        measure = (lambda p: p.bus_bytes(n_workers)) if n_workers > 1 else (lambda p: p.wire_bytes(n_workers))
        if measure(comp) >= measure(dense):
            what = "bytes over the links (ring bus bytes)" if n_workers > 1 else "payload"
            return dense, (f"{self.method.value}'s {what} would not be smaller than the dense all_reduce's "
                           f"at {n_workers} workers")
        return comp, ""

    def _no_plan_reason(self, b: Bucket, n_workers: int) -> str:
        return f"{self.method.value} has no compressed form for this bucket at {n_workers} workers"

    def wire_bytes(self, shapes: Shapes, grad_bytes_per_elem: float = 4, n_workers: int = 1) -> float:
        """Per-worker payload bytes of the bucket on the wire (never more than the dense bucket)."""
        return self.plan(shapes, grad_bytes_per_elem, n_workers).wire_bytes(n_workers)

    def compresses(self, shapes: Shapes, grad_bytes_per_elem: float = 4, n_workers: int = N_UNKNOWN) -> bool:
        """Whether the codec really compresses this bucket (False: dense fallback, no kernels run)."""
        return self.plan(shapes, grad_bytes_per_elem, n_workers).compressed

    def encode_kernels(self, shapes: Shapes, grad_bytes_per_elem: float = 4,
                       n_workers: int | None = None) -> list[Kernel]:
        """Kernels run before the first collective (empty on dense fallback)."""
        n = n_workers or N_UNKNOWN
        if not self.compresses(shapes, grad_bytes_per_elem, n):
            return []
        return self._encode_kernels(Bucket.of(shapes, grad_bytes_per_elem), n)

    def decode_kernels(self, shapes: Shapes, n_workers: int, grad_bytes_per_elem: float = 4) -> list[Kernel]:
        """Kernels run after (and between) the collectives to rebuild the dense averaged gradient."""
        if not self.compresses(shapes, grad_bytes_per_elem, n_workers):
            return []
        return self._decode_kernels(Bucket.of(shapes, grad_bytes_per_elem), n_workers)

    def encode_time_s(self, shapes: Shapes, gpu: GpuSpec, grad_bytes_per_elem: float = 4,
                      n_workers: int | None = None) -> float:
        """GPU seconds to compress the bucket. `n_workers` matters only to onebit's padding and int8's
        integer width (and their fallback); without it a group of 2 is assumed."""
        return self.cost.time_s(self.encode_kernels(shapes, grad_bytes_per_elem, n_workers), gpu)

    def decode_time_s(self, shapes: Shapes, gpu: GpuSpec, n_workers: int, grad_bytes_per_elem: float = 4) -> float:
        """GPU seconds to turn what the collectives delivered into the dense averaged gradient."""
        return self.cost.time_s(self.decode_kernels(shapes, n_workers, grad_bytes_per_elem), gpu)

    def summary(self, shapes: Shapes, gpu: GpuSpec, n_workers: int,
                grad_bytes_per_elem: float = 4) -> BucketCompression:
        """Plan, wire bytes, encode/decode seconds and codec memory for one bucket at `n_workers`."""
        plan = self.plan(shapes, grad_bytes_per_elem, n_workers)
        if not plan.compressed:
            return BucketCompression(plan, plan.wire_bytes(n_workers), 0.0, 0.0, 0.0)
        b = Bucket.of(shapes, grad_bytes_per_elem)
        return BucketCompression(plan, plan.wire_bytes(n_workers),
                                 self.cost.time_s(self._encode_kernels(b, n_workers), gpu),
                                 self.cost.time_s(self._decode_kernels(b, n_workers), gpu),
                                 self._state_bytes(b, n_workers))

    def error_feedback_bytes(self, shapes: Shapes, grad_bytes_per_elem: float = 4, n_workers: int = 1) -> float:
        """GPU memory the codec keeps across iterations (error-feedback residuals, PowerSGD's P/Q)."""
        if not self.compresses(shapes, grad_bytes_per_elem, n_workers):
            return 0.0
        return self._state_bytes(Bucket.of(shapes, grad_bytes_per_elem), n_workers)
