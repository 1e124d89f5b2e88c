"""Where a codec runs and what each framework's path costs: the worker's GPU, its CPU, or a BytePS server's.

- torch DDP hooks (fp16, int8, top-k, random-k, PowerSGD) and DeepSpeed's compressed_allreduce (1-bit) run
  their tensor ops where the gradients are: on the worker's GPU, or on its CPU when the device is one
  (`vendor: cpu`, e.g. a gloo worker training on CPU tensors, the emulated cluster's ranks).
- BytePS (`communication.strategy: ps` with onebit, topk or randomk, as byteps/common/compressor implements
  them) copies the gradient to host memory and compresses it on the worker's CPU (core_loops.cc: the COMPRESS
  loop hands each partition to a pool of BYTEPS_THREADPOOL_SIZE = 4 threads); the worker pushes the compressed
  bytes; the server decompresses every push in its request handler (one thread, server.cc), sums, and
  compresses the sum again for every pull (SendPullResponse); the worker decompresses what it pulled.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from simdist.compression.base import Bucket, Codec, Shapes
from simdist.compression.cost import Kernel
from simdist.compression.cpu import REFERENCE_CORE, CpuProcessor
from simdist.hardware.specs import GpuSpec
from simdist.scenario import CompressionMethod, Scenario

BYTEPS_METHODS = (CompressionMethod.ONEBIT, CompressionMethod.TOPK, CompressionMethod.RANDOMK)
BYTEPS_WORKER_THREADS = 4  # BYTEPS_THREADPOOL_SIZE default (byteps/common/global.cc)
BYTEPS_MIN_COMPRESS_BYTES = 65536  # BYTEPS_MIN_COMPRESS_BYTES default: smaller tensors go uncompressed (global.cc)
BYTEPS_SERVER_CODEC_THREADS = 1  # decompress under the handler's mutex, compress under the pull mutex (server.cc)


class CodecSite(StrEnum):
    """Where a codec's work runs."""

    NONE = "none"  # no codec
    WORKER_GPU = "worker_gpu"
    WORKER_CPU = "worker_cpu"
    SERVER_CPU = "server_cpu"


@dataclass(frozen=True)
class CodecPath:
    """One framework's path for a codec: who encodes and decodes, and whether a PS server re-codes."""

    framework: str
    encode: CodecSite
    decode: CodecSite
    server: CodecSite | None = None  # BytePS: the server decompresses each push, recompresses each pull


def codec_path(method: CompressionMethod, device: GpuSpec, is_ps: bool) -> CodecPath:
    """Which framework path runs `method` on `device` (a PS with onebit/topk/randomk is BytePS's)."""
    if method is CompressionMethod.NONE:
        return CodecPath("none", CodecSite.NONE, CodecSite.NONE)
    if is_ps and method in BYTEPS_METHODS:
        return CodecPath("byteps compressor", CodecSite.WORKER_CPU, CodecSite.WORKER_CPU, CodecSite.SERVER_CPU)
    framework = "deepspeed compressed_allreduce" if method is CompressionMethod.ONEBIT else "torch ddp hook"
    site = CodecSite.WORKER_CPU if device.is_cpu else CodecSite.WORKER_GPU
    return CodecPath(framework, site, site)


def ps_pushers(scenario: Scenario, dp: int) -> int:
    """Workers that push to each server: one per node when the node reduces first (communication.ps.aggregation
    node, BytePS's root device), every GPU otherwise."""
    if scenario.communication.ps_aggregation == "node":
        return scenario.cluster.num_nodes
    return dp


def device_cpu(device: GpuSpec) -> CpuProcessor:
    """A CPU device's share of the reference core: its stated memory bandwidth over the core's measured
    stream rate (a rank sharing a core with others states the bandwidth it gets), at most one core."""
    return CpuProcessor(REFERENCE_CORE, min(1.0, device.memory_bandwidth_Bps / REFERENCE_CORE.stream_Bps))


# -- BytePS's compressors (byteps/common/compressor/impl/*.cc): plain C++ loops over the partition ------------
def byteps_payload_bytes(method: CompressionMethod, b: Bucket, k: int) -> float:
    """Bytes BytePS pushes (and pulls) for the bucket: onebit packs signs into 32-bit words plus one float
    scale; topk and randomk send k (index, value) pairs of the value's width."""
    if method is CompressionMethod.ONEBIT:
        return math.ceil(b.numel / 32) * 4 + 4
    return k * 2 * b.elem_bytes


def heap_accesses(n: int, k: int) -> float:
    """topk.cc's heap over a partition of n in random order: each of the k first elements and each later one
    larger than the heap's minimum (about k ln(n / k) of them) is pushed, at log2(k) scattered accesses each."""
    if k <= 0 or n <= 0:
        return 0.0
    return k * (1 + math.log(max(1.0, n / k))) * max(1.0, math.log2(k))


def byteps_compress(method: CompressionMethod, b: Bucket, k: int, error_feedback: bool) -> list[Kernel]:
    """onebit: sum of |x| then the packing loop; topk: one pass over the partition keeping a k-heap (heap_accesses);
    randomk: k random indices and their values. With error feedback (vanilla_error_feedback.cc): x = g + e before, and
    e = x - decompress(compressed) after."""
    n, v = b.numel, b.elem_bytes
    ef_in = [Kernel("ef_add", 3 * n * v)] if error_feedback else []
    if method is CompressionMethod.ONEBIT:
        body = [Kernel("abs_sum", n * v), Kernel("pack", n * v + n / 8)]
        ef_out = [Kernel("ef_update", 2 * n * v + n / 8)] if error_feedback else []
    elif method is CompressionMethod.TOPK:
        body = [Kernel("scan", n * v), Kernel("heap_updates", 0.0, op="scatter", count=heap_accesses(n, k))]
        ef_out = [Kernel("ef_update", 2 * n * v), Kernel("ef_zero_sent", 0.0, op="scatter", count=k)] \
            if error_feedback else []
    else:
        body = [Kernel("random_indices", 0.0, op="rng", count=k), Kernel("gather", 0.0, op="gather", count=k)]
        ef_out = [Kernel("ef_update", 2 * n * v), Kernel("ef_zero_sent", 0.0, op="scatter", count=k)] \
            if error_feedback else []
    return [*ef_in, *body, *ef_out]


def byteps_decompress(method: CompressionMethod, b: Bucket, k: int) -> list[Kernel]:
    """onebit: every bit back to +-scale; topk and randomk: zero the buffer, scatter the k pairs."""
    n, v = b.numel, b.elem_bytes
    if method is CompressionMethod.ONEBIT:
        return [Kernel("unpack", n / 8 + n * v)]
    return [Kernel("zero_fill", n * v), Kernel("scatter", 0.0, op="scatter", count=k)]


def _k(codec: Codec, b: Bucket) -> int:
    """Elements a sparsifying codec keeps (0 for the others)."""
    return getattr(codec, "k", lambda _b: 0)(b)


def byteps_compresses(codec: Codec, b: Bucket) -> bool:
    """Whether BytePS compresses the bucket: at least BYTEPS_MIN_COMPRESS_BYTES, and a smaller payload."""
    return (b.numel > 0 and b.dense_bytes >= BYTEPS_MIN_COMPRESS_BYTES
            and byteps_payload_bytes(codec.method, b, _k(codec, b)) < b.dense_bytes)


@dataclass(frozen=True)
class BucketCodecCost:
    """Seconds of one bucket's codec work on each side, and the bytes a PS moves each way (BytePS)."""

    encode_s: float
    decode_s: float
    server_s: float = 0.0  # per server shard: N decompressions and N recompressions
    ps_payload_bytes: float | None = None  # BytePS: the bytes pushed and pulled (dense when it does not compress)


def bucket_codec_cost(codec: Codec, shapes: Shapes, device: GpuSpec, grad_bytes: float, n_workers: int,
                      path: CodecPath, servers: int = 1, pushers: int | None = None) -> BucketCodecCost:
    """The codec's work for one bucket on `path` (nothing when the bucket goes dense: the collective plan's
    fallback, or for BytePS a bucket under BYTEPS_MIN_COMPRESS_BYTES or one its payload would not shrink);
    `pushers`: the workers each BytePS server decodes and re-encodes for (ps_pushers; default n_workers)."""
    if path.server is not None:  # BytePS: pushed and pulled compressed, whatever the group size
        b = Bucket.of(shapes, grad_bytes)
        k = _k(codec, b)
        if not byteps_compresses(codec, b):  # pushed and pulled dense (no codec work)
            return BucketCodecCost(0.0, 0.0, 0.0, b.dense_bytes if b.numel else None)
        ef = bool(getattr(codec, "error_feedback", False))
        worker = CpuProcessor(REFERENCE_CORE, BYTEPS_WORKER_THREADS)
        server = CpuProcessor(REFERENCE_CORE, BYTEPS_SERVER_CODEC_THREADS)
        shard = Bucket(b.shapes, b.elem_bytes, math.ceil(b.numel / max(1, servers)))
        k_shard = math.ceil(k / max(1, servers))
        server_s = (pushers or n_workers) * (server.time_s(byteps_decompress(codec.method, shard, k_shard))
                                             + server.time_s(byteps_compress(codec.method, shard, k_shard, False)))
        return BucketCodecCost(worker.time_s(byteps_compress(codec.method, b, k, ef)),
                               worker.time_s(byteps_decompress(codec.method, b, k)), server_s,
                               byteps_payload_bytes(codec.method, b, k))
    if not codec.plan(shapes, grad_bytes, n_workers).compressed:
        return BucketCodecCost(0.0, 0.0)
    enc = codec.encode_kernels(shapes, grad_bytes, n_workers)
    dec = codec.decode_kernels(shapes, n_workers, grad_bytes)
    if path.encode is CodecSite.WORKER_CPU:
        cpu = device_cpu(device)
        factor = getattr(getattr(codec, "cost", None), "calibration", 1.0)
        return BucketCodecCost(factor * cpu.time_s(enc), factor * cpu.time_s(dec))
    return BucketCodecCost(codec.encode_time_s(shapes, device, grad_bytes, n_workers),
                           codec.decode_time_s(shapes, device, n_workers, grad_bytes))


def describe(path: CodecPath) -> dict[str, object]:
    """The result's account of where the codec ran (strategy.compression_ran.runs_on)."""
    return {"framework": path.framework, "encode": path.encode.value, "decode": path.decode.value,
            "server": path.server.value if path.server else None}

