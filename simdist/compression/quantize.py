"""Dense codecs: no compression, fp16/bf16 casts, and int8 quantisation with a shared scale.

All three keep every element, so the workers' buffers line up and a ring or tree can sum them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from simdist.collectives.schedule import CollectiveOp
from simdist.compression.base import Bucket, CodecBase, Collective, CommPlan
from simdist.compression.cost import Kernel
from simdist.scenario import CompressionMethod

SCALE_BYTES = 4  # one fp32 scale per tensor


@dataclass(frozen=True)
class NoCompression(CodecBase):
    """The dense bucket, all-reduced as is."""

    method: ClassVar[CompressionMethod] = CompressionMethod.NONE


@dataclass(frozen=True)
class CastCodec(CodecBase):
    """Cast to a 2-byte float before the all_reduce and back after (DDP's fp16/bf16 compress hooks)."""

    method: ClassVar[CompressionMethod] = CompressionMethod.FP16
    wire_elem_bytes: int = 2

    def _compressed_plan(self, b: Bucket, n_workers: int) -> CommPlan | None:
        return CommPlan((Collective(CollectiveOp.ALL_REDUCE, b.numel * self.wire_elem_bytes),), True,
                        labels=(self.method.value,))

    def _encode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        # torch's fp16_compress_hook: buffer.to(float16).div_(world_size)
        w = self.wire_elem_bytes
        return [Kernel("cast_down", b.numel * (b.elem_bytes + w), alloc_bytes=b.numel * w), Kernel("divide", 2 * b.numel * w)]

    def _decode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        # bucket.buffer().copy_(reduced): read the 2-byte result, write the gradient dtype
        return [Kernel("cast_up", b.numel * (self.wire_elem_bytes + b.elem_bytes))]


@dataclass(frozen=True)
class Fp16Codec(CastCodec):
    method: ClassVar[CompressionMethod] = CompressionMethod.FP16


@dataclass(frozen=True)
class Bf16Codec(CastCodec):
    method: ClassVar[CompressionMethod] = CompressionMethod.BF16


def int_width_bytes(n_workers: int, min_levels: int = 1) -> int | None:
    """Narrowest signed integer NCCL and gloo can sum (int8 or int32; neither has int16) whose range
    holds the sum of `n_workers` values of at least `min_levels` levels each side; None when even int32 cannot."""
    for width in (1, 4):
        if (2 ** (8 * width - 1) - 1) // n_workers >= min_levels:
            return width
    return None


@dataclass(frozen=True)
class Int8Codec(CodecBase):
    """Int8 with a scale shared by all workers, summed by NCCL's native int8 all_reduce.

    An all_reduce(max) of the per-tensor fp32 scales gives every worker the same scale; each worker
    then quantises (stochastic rounding) to +-floor(127 / N) levels so the int8 sum of N workers cannot
    wrap around (NCCL sums int8 in int8). When fewer than `min_levels` levels would be left, the wire
    integer widens to int32 (no saving over fp32: the dense fallback), since no backend sums int16.
    """

    method: ClassVar[CompressionMethod] = CompressionMethod.INT8
    min_levels: int = 1

    def wire_elem_bytes(self, n_workers: int) -> int | None:
        return int_width_bytes(n_workers, self.min_levels)

    def _compressed_plan(self, b: Bucket, n_workers: int) -> CommPlan | None:
        width = self.wire_elem_bytes(n_workers)
        if width is None or width * 8 >= 8 * b.elem_bytes:  # int32 of fp32 (or wider) gradients: no saving
            return None
        return CommPlan(
            (Collective(CollectiveOp.ALL_REDUCE, b.tensors * SCALE_BYTES),
             Collective(CollectiveOp.ALL_REDUCE, b.numel * width)),
            True, labels=("scale_max", f"int{8 * width}"))

    def _no_plan_reason(self, b: Bucket, n_workers: int) -> str:
        width = self.wire_elem_bytes(n_workers)
        if width is None:
            return (f"int8 sums of {n_workers} workers would overflow even int32 at {self.min_levels} levels; "
                    "no backend sums wider integers")
        return (f"the int8 sum of {n_workers} workers leaves fewer than {self.min_levels} level(s) per worker "
                f"(127 // {n_workers}), so the wire integer widens to int{8 * width} (no backend sums int16), "
                f"no smaller than the {b.elem_bytes:g}-byte gradients: the dense all_reduce runs")

    def _encode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        """The hook's tensor ops (validation/hooks.py Int8Codec), one pass each: per-tensor abs().max(), the
        scales stacked and zeros replaced (stack, gt, ones_like, where: four tiny kernels), the per-element
        scale (repeat_interleave), y = g.float() / scale * levels (float() casts only non-fp32 gradients),
        u = rand(), floor(y + u), clamp, cast to the wire integer."""
        w = self.wire_elem_bytes(n_workers) or 4
        n, v, t = b.numel, b.elem_bytes, b.tensors
        cast = [Kernel("to_float_in", n * (v + 4), alloc_bytes=4 * n)] if v != 4 else []
        return [
            Kernel("abs", 2 * n * v, launches=t, alloc_bytes=n * v), Kernel("max", n * v, launches=t),
            Kernel("scales_stack_where", 4 * 4 * t, launches=4, alloc_bytes=4 * 4 * t),
            Kernel("repeat_interleave", 4 * n, alloc_bytes=4 * n),
            *cast, Kernel("divide_by_scale", 12 * n, alloc_bytes=4 * n), Kernel("times_levels", 8 * n, alloc_bytes=4 * n),
            Kernel("rand", 4 * n, op="rng", count=n, alloc_bytes=4 * n),
            Kernel("add_noise", 12 * n, alloc_bytes=4 * n), Kernel("floor", 8 * n, alloc_bytes=4 * n), Kernel("clamp", 8 * n),
            Kernel("to_int", n * (4 + w), alloc_bytes=n * w),
        ]

    def _decode_kernels(self, b: Bucket, n_workers: int) -> list[Kernel]:
        """sum.float() * scale / (levels x N), back in the gradient dtype, and the hook's copy of the result
        into the bucket (codec_hook: buf.copy_)."""
        w = self.wire_elem_bytes(n_workers) or 4
        n, v = b.numel, b.elem_bytes
        cast = [Kernel("to_grad_dtype", n * (4 + v), alloc_bytes=n * v)] if v != 4 else []
        return [Kernel("to_float", n * (w + 4), alloc_bytes=4 * n), Kernel("times_scale", 12 * n, alloc_bytes=4 * n),
                Kernel("divide", 8 * n, alloc_bytes=4 * n), *cast, Kernel("copy_into_bucket", 2 * n * v)]
