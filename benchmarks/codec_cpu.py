"""Core-seconds of the operations gradient codecs run on a CPU, on one core of this machine.

A codec that runs on a CPU (a torch DDP hook over gloo with the gradients in host memory; BytePS's
compressors on the worker's and the server's CPU) pays per operation what this measures: streaming passes
(bytes per second), random numbers, a random permutation, top-k selection, gathers and scatters at random
indices, and dense matrix products. Each op runs on 2**23 fp32 elements (the 8.4 M-parameter MLP of the
emulated cluster's DDP cases) with torch on ONE thread; CPU time is read with time.thread_time so other
processes sharing the cores do not inflate it; each figure is the median of --repeats runs after one warm-up.
Usage:

    python benchmarks/codec_cpu.py [--repeats 7] [--yaml]

`--yaml` prints the rates with the CPU they were measured on, as simdist/compression/cpu.py's REFERENCE_CORE
records them. `--hooks` also times validation/hooks.py's codecs (one worker of
four, collectives answered locally) against what simdist's CPU model charges for them.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch

N = 2**23


def core_s(fn: Callable[[], object], repeats: int) -> float:
    """Median thread CPU seconds of `fn` over `repeats` runs after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.thread_time()
        fn()
        times.append(time.thread_time() - t0)
    return statistics.median(times)


def measure(repeats: int) -> dict[str, float]:
    """Per-core rates: stream_Bps (bytes/s of an elementwise pass), and elements (or FLOP) per second."""
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    a, b, c = torch.randn(N, generator=g), torch.randn(N, generator=g), torch.empty(N)
    k = N // 100
    idx = torch.randperm(N, generator=g)[:k]
    vals = torch.randn(k, generator=g)
    m, q = torch.randn(1024, 8192, generator=g), torch.randn(8192, 64, generator=g)
    out: dict[str, float] = {}
    out["stream_Bps"] = 12 * N / core_s(lambda: torch.add(a, b, out=c), repeats)  # read 2, write 1
    out["first_touch_Bps"] = 4 * N / core_s(lambda: torch.zeros(N), repeats)  # fresh pages, zeroed
    out["rng_per_s"] = N / core_s(lambda: torch.rand(N, generator=g), repeats)
    out["randperm_per_s"] = N / core_s(lambda: torch.randperm(N, generator=g), repeats)
    out["topk_per_s"] = N / core_s(lambda: a.topk(k, sorted=False), repeats)  # per element searched
    out["gather_per_s"] = k / core_s(lambda: a[idx], repeats)  # per element fetched at a random index
    out["scatter_per_s"] = k / core_s(lambda: c.index_put_((idx,), vals), repeats)
    out["gemm_flops"] = 2 * 1024 * 8192 * 64 / core_s(lambda: m @ q, repeats)
    out["op_overhead_s"] = core_s(lambda: torch.add(a[:8], b[:8]), repeats * 100)
    return out


def time_hooks(repeats: int) -> dict[str, tuple[float, float]]:
    """Measured core-seconds of one worker's codec work (validation/hooks.py, world 4) and simdist's charge."""
    from simdist.compression.cpu import CpuProcessor
    from simdist.compression import make_codec
    from simdist.scenario import CompressionMethod, CompressionSpec
    from simdist.validation.hooks import Op, codec_for

    torch.set_num_threads(1)
    shapes = [s for _ in range(8) for s in ((1024,), (1024, 1024))]
    world, flat = 4, torch.randn(sum(max(1, s[0] * (s[1] if len(s) > 1 else 1)) for s in shapes))
    params = {"topk": {"ratio": 0.01}, "randomk": {"ratio": 0.01}, "powersgd": {"rank": 1}}

    def drive(codec) -> None:
        gen = codec.exchange(flat, shapes, 0, world, 0)
        ex = next(gen)
        try:
            while True:  # answer each collective as if every worker had sent the same tensor
                t = ex.tensor
                res = (t * world if ex.op is Op.SUM else t if ex.op is Op.MAX else
                       t.unsqueeze(0).expand(world, *t.shape).contiguous() if ex.op is Op.GATHER
                       else t.view(world, -1))
                ex = gen.send(res)
        except StopIteration:
            pass

    proc = CpuProcessor.reference()
    out = {}
    for method in ("int8", "onebit", "topk", "randomk", "powersgd"):
        codec = codec_for(method, **params.get(method, {}))
        codec.calls[0] = 5  # past PowerSGD's dense warm-up steps
        measured = core_s(lambda: drive(codec), repeats)
        p = params.get(method, {})
        model = make_codec(CompressionSpec(CompressionMethod(method), p.get("ratio"), p.get("rank"), True))
        charged = proc.time_s(model.encode_kernels(shapes, 4, world) + model.decode_kernels(shapes, world, 4))
        out[method] = (measured, charged)
    return out


def cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--yaml", action="store_true")
    ap.add_argument("--hooks", action="store_true")
    args = ap.parse_args()
    rates = measure(args.repeats)
    if args.yaml:
        print(f"measured_on: {cpu_model()!r}  # torch {torch.__version__}, one thread, median of {args.repeats}")
        print("ops:")
        for key, v in rates.items():
            print(f"  {key}: {v:.4g}")
    else:
        for key, v in rates.items():
            print(f"{key:16s} {v:.4g}")
    if args.hooks:
        for method, (measured, charged) in time_hooks(args.repeats).items():
            print(f"{method:9s} measured {measured * 1e3:8.1f} core-ms   simdist {charged * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
