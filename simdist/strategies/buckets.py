"""Gradient buckets in backward order, as PyTorch DDP's Reducer or Horovod's tensor fusion forms them."""
from __future__ import annotations

from collections.abc import Sequence
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
                 first_bucket_bytes: float | None = None, rule: str = "ddp",
                 cycle_of_layer: Sequence[int] | None = None) -> list[Bucket]:
    """Pack gradient tensors in backward order into buckets of `bucket_size_bytes`.

    rule "ddp" (PyTorch DDP's Reducer, `compute_bucket_assignment_by_size`): a tensor joins the open
    bucket, which closes once it holds at least the cap, so its last tensor may cross the cap.
    rule "fusion" (Horovod's tensor fusion): a fused buffer never exceeds the cap; a tensor that would
    overflow it starts the next one. Either way a tensor is never split (one larger than the cap has a
    bucket of its own under "fusion", shares it with what came before under "ddp"), and a bucket is ready
    when its last tensor has been produced. `first_bucket_bytes` models a smaller first bucket (DDP's
    1 MiB when bucket_cap_mb is left at its default), so communication can start early.
    `cycle_of_layer` (rule "fusion" only): per layer (forward index), the fusion cycle that picks its
    gradients up. Horovod's coordinator fuses, each cycle, the tensors ready by then, without waiting
    for a buffer to fill: a tensor of a later cycle starts a new bucket.
    """
    if rule not in ("ddp", "fusion"):
        raise ValueError(f"unknown bucketing rule {rule!r}; expected 'ddp' or 'fusion'")
    if cycle_of_layer is not None and rule != "fusion":
        raise ValueError("cycle_of_layer groups tensors by fusion cycle: rule 'fusion' only")
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
        new_cycle = cycle_of_layer is not None and shapes and cycle_of_layer[layer_index] != cycle_of_layer[last_layer]
        if rule == "fusion" and shapes and ((elems + n) * bytes_per_elem > cap or new_cycle):
            close()
        shapes.append(tuple(shape))
        elems += n
        last_layer = layer_index
        if rule == "ddp" and elems * bytes_per_elem >= cap:
            close()
    if shapes:
        close()
    return buckets


# Horovod's batched device-to-device memcpy kernel copies at most this many tensors per launch
# (horovod/common/ops/cuda/cuda_kernels.h: BATCHED_D2D_CAPACITY)
HOROVOD_BATCHED_D2D_CAPACITY = 160


def fusion_copy_s(bucket: Bucket, buffer_bytes: float, memory_Bps: float, launch_s: float) -> float:
    """Horovod's copy of a fused bucket's tensors into its fusion buffer before the all-reduce, and the same again
    out of it after (horovod/common/ops/nccl_operations.cc NCCLAllreduce::Execute: ScaleMemcpyInFusionBuffer /
    ScaleMemcpyOutFusionBuffer when a response holds more than one tensor; batched D2D memcpy kernels on Horovod's
    stream): `buffer_bytes` read and written once, 2 x bytes / HBM bandwidth, plus a launch per
    HOROVOD_BATCHED_D2D_CAPACITY tensors. One way; a bucket of one tensor is reduced in place (0)."""
    tensors = len(bucket.shapes)
    if tensors <= 1:
        return 0.0
    launches = -(-tensors // HOROVOD_BATCHED_D2D_CAPACITY)
    return 2.0 * buffer_bytes / memory_Bps + launches * launch_s


def negotiation_s(ranks: int, hop_latency_s: float) -> float:
    """Horovod's per-cycle agreement on what is ready, with every tensor in its response cache (the steady state):
    one bitwise-AND all-reduce of the cache bits over the controller (horovod/common/response_cache.cc
    CacheCoordinator::sync -> Controller::CrossRankBitwiseAnd; the OR follows only for invalidated entries), a
    small-message all-reduce of ceil(log2 ranks) rounds of one controller message each (recursive doubling). A
    fused buffer launches that long after its cycle tick."""
    if ranks <= 1:
        return 0.0
    return (ranks - 1).bit_length() * hop_latency_s


def bucket_prescale_s(bucket_bytes: float, memory_Bps: float, launch_s: float) -> float:
    """DDP's per-bucket average in the reducer that divides each bucket as it fills (early reducer.cpp,
    mark_variable_ready: "Prescale bucket contents to turn the global sum into the global average",
    replica.contents.div_(world size), before mark_bucket_ready launches the all-reduce): one kernel on the compute
    stream reading and writing the bucket, 2 x bytes / HBM bandwidth plus its launch. The reducer of later PyTorch
    divides while copying each gradient into its bucket view (at::mul_out) and has no such kernel."""
    return 2.0 * bucket_bytes / memory_Bps + launch_s


def shifted_by_prescale(ready_s: Sequence[float], prescale_s: Sequence[float]) -> tuple[tuple[float, ...], float]:
    """Bucket-ready times and the total extra backward time when every bucket's prescale kernel runs on the compute
    stream as the bucket fills (buckets fill in order): bucket j is ready after the kernels of buckets 0..j."""
    out, total = [], 0.0
    for ready, extra in zip(ready_s, prescale_s):
        total += extra
        out.append(ready + total)
    return tuple(out), total


def grad_copy_back_s(bucket: Bucket, bytes_per_elem: float, memory_Bps: float, launch_s: float) -> float:
    """DDP's copy of a bucket's reduced gradients back into each parameter's .grad (reducer.cpp finalize_backward:
    per bucket in order, future_work->wait() makes the compute stream wait for the bucket's all-reduce, then
    finalize_bucket_dense -> copy_bucket_to_grad, grad.copy_(bucket_view), one copy kernel per tensor; skipped only
    with gradient_as_bucket_view=True, off by default): the bucket read and written once, 2 x bytes / HBM
    bandwidth, plus one launch per tensor."""
    return 2.0 * bucket.size_bytes(bytes_per_elem) / memory_Bps + len(bucket.shapes) * launch_s
