"""Gradient buckets in backward order, as PyTorch DDP and Horovod's tensor fusion form them."""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from simdist.workload.specs import ModelSpec


@dataclass(frozen=True)
class Bucket:
    """Gradients communicated together; ready when backward has finished layer `ready_after_layer`."""

    index: int
    shapes: tuple[tuple[int, ...], ...]
    elems: int
    ready_after_layer: int  # forward index of the last layer (in backward order) whose gradient it holds

    def size_bytes(self, bytes_per_elem: float) -> float:
        return self.elems * bytes_per_elem


def make_buckets(model: ModelSpec, bucket_size_bytes: float, bytes_per_elem: float,
                 first_bucket_bytes: float | None = None) -> list[Bucket]:
    """Pack gradient tensors in backward order into buckets of at most `bucket_size_bytes`.

    A tensor larger than the cap gets a bucket of its own (DDP never splits a tensor). A bucket is
    ready when the last tensor packed into it has been produced. `first_bucket_bytes` models DDP's
    smaller first bucket (1 MiB by default in PyTorch) so communication can start early.
    """
    buckets: list[Bucket] = []
    shapes: list[tuple[int, ...]] = []
    elems = 0
    last_layer = -1
    cap = first_bucket_bytes if first_bucket_bytes else bucket_size_bytes

    def close() -> None:
        nonlocal shapes, elems, cap
        buckets.append(Bucket(len(buckets), tuple(shapes), elems, last_layer))
        shapes, elems, cap = [], 0, bucket_size_bytes

    for layer_index, shape in model.gradients_backward_order():
        n = prod(shape)
        if shapes and (elems + n) * bytes_per_elem > cap:
            close()
        shapes.append(tuple(shape))
        elems += n
        last_layer = layer_index
    if shapes:
        close()
    return buckets
