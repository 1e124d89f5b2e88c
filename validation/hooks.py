"""DDP communication hooks for simdist's codecs, written once as exchange generators so the same code
runs under torch.distributed (a real hook) and in one process with N simulated workers (convergence.py).

A codec's `exchange(flat, shapes, rank, world, key)` is a generator: it yields `Exchange(op, tensor)`
collectives (this worker's contribution) and receives their results; it returns the averaged gradient.
Wire bytes are counted with simdist's conventions (all_reduce / all_to_all: the buffer; all_gather:
the worker's own contribution), so they compare directly with `Codec.wire_bytes`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Callable, Generator, Sequence

import numpy as np
import torch

from simdist.compression import make_codec
from simdist.compression.onebit import padded_elements
from simdist.compression.quantize import int_width_bytes
from simdist.compression.sparse import kept_elements
from simdist.io.compare_input import check_codec
from simdist.scenario import CompressionMethod, CompressionSpec

Shapes = Sequence[tuple[int, ...]]


class Op(StrEnum):
    SUM = "sum"  # all_reduce(sum): result has the tensor's shape
    MAX = "max"  # all_reduce(max)
    GATHER = "gather"  # all_gather: result [N, *shape], row i from worker i
    ALL_TO_ALL = "all_to_all"  # tensor = N equal chunks, chunk j to worker j; result [N, chunk], row i from i


@dataclass(frozen=True)
class Exchange:
    """One collective a codec asks for; the driver may reduce `tensor` in place (it is consumed)."""

    op: Op
    tensor: torch.Tensor


ExchangeGen = Generator[Exchange, torch.Tensor, torch.Tensor]


def payload_bytes(ex: Exchange) -> int:
    """This worker's payload in simdist's convention (all_gather: own part; others: the buffer)."""
    return ex.tensor.numel() * ex.tensor.element_size()


def _seed(*parts: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(np.random.SeedSequence(list(parts)).generate_state(1)[0]))


def _offsets(shapes: Shapes) -> list[int]:
    return [math.prod(s) for s in shapes]


def _dense(flat: torch.Tensor, world: int) -> ExchangeGen:
    s = yield Exchange(Op.SUM, flat.clone())
    return s.div_(world)


def _spec(method: CompressionMethod, **params: Any) -> CompressionSpec:
    return CompressionSpec(method, params.get("ratio"), params.get("rank"), params.get("error_feedback", True))


@dataclass
class GradCodec:
    """Per-worker codec state (error residuals keyed by bucket, call counters); subclasses override `_run`."""

    method: CompressionMethod = CompressionMethod.NONE
    seed: int = 0
    calls: dict[int, int] = field(default_factory=dict)

    def compresses(self, shapes: Shapes, world: int) -> bool:
        return make_codec(self.spec()).compresses(shapes, 4, world)

    def spec(self) -> CompressionSpec:
        return CompressionSpec(self.method)

    def exchange(self, flat: torch.Tensor, shapes: Shapes, rank: int, world: int, key: int = 0) -> ExchangeGen:
        step = self.calls.get(key, 0)
        self.calls[key] = step + 1
        if not self.compresses(shapes, world):
            return (yield from _dense(flat, world))
        return (yield from self._run(flat, shapes, rank, world, key, step))

    def _run(self, flat: torch.Tensor, shapes: Shapes, rank: int, world: int, key: int, step: int) -> ExchangeGen:
        return (yield from _dense(flat, world))


@dataclass
class CastCodec(GradCodec):
    """fp16/bf16 as torch's fp16_compress_hook: cast, divide by N, all_reduce, cast back."""

    def _run(self, flat, shapes, rank, world, key, step):  # type: ignore[no-untyped-def]
        dtype = torch.float16 if self.method is CompressionMethod.FP16 else torch.bfloat16
        s = yield Exchange(Op.SUM, flat.to(dtype).div_(world))
        return s.to(flat.dtype)


@dataclass
class Int8Codec(GradCodec):
    """Shared per-tensor scale (all_reduce max), stochastic rounding to +-floor(127/N) levels, integer sum."""

    method: CompressionMethod = CompressionMethod.INT8

    def _run(self, flat, shapes, rank, world, key, step):  # type: ignore[no-untyped-def]
        sizes = _offsets(shapes)
        absmax = torch.stack([seg.abs().max() for seg in flat.split(sizes)]).float()
        scale = yield Exchange(Op.MAX, absmax)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        width = int_width_bytes(world)
        assert width is not None  # compresses() was checked
        levels = (2 ** (8 * width - 1) - 1) // world
        per_elem = scale.repeat_interleave(torch.tensor(sizes))
        y = flat.float() / per_elem * levels
        u = torch.rand(y.shape, generator=_seed(self.seed, rank, key, step))
        q = torch.floor(y + u).clamp_(-levels, levels)
        s = yield Exchange(Op.SUM, q.to({1: torch.int8, 2: torch.int16, 4: torch.int32}[width]))
        return (s.float() * per_elem / (levels * world)).to(flat.dtype)


@dataclass
class SparseCodec(GradCodec):
    """What top-k and random-k share: the ratio and the error-feedback residual per bucket."""

    ratio: float = 0.01
    error_feedback: bool = True
    residual: dict[int, torch.Tensor] = field(default_factory=dict)

    def spec(self) -> CompressionSpec:
        return CompressionSpec(self.method, self.ratio, None, self.error_feedback)

    def _with_residual(self, flat: torch.Tensor, key: int) -> torch.Tensor:
        return flat + self.residual[key] if self.error_feedback and key in self.residual else flat.clone()

    def _keep_unsent(self, x: torch.Tensor, idx: torch.Tensor, key: int) -> None:
        if self.error_feedback:
            x[idx] = 0
            self.residual[key] = x


@dataclass
class TopKCodec(SparseCodec):
    """Top-k of |g + e| over the bucket; one all_gather of k fp32 values and k int32 indices (bit-packed)."""

    method: CompressionMethod = CompressionMethod.TOPK

    def _run(self, flat, shapes, rank, world, key, step):  # type: ignore[no-untyped-def]
        x = self._with_residual(flat.float(), key)
        k = kept_elements(x.numel(), self.ratio)
        idx = x.abs().topk(k, sorted=False).indices
        packed = torch.cat([x[idx], idx.to(torch.int32).view(torch.float32)])
        self._keep_unsent(x, idx, key)
        g = yield Exchange(Op.GATHER, packed)
        out = torch.zeros_like(x)
        out.index_add_(0, g[:, k:].contiguous().view(torch.int32).reshape(-1).long(), g[:, :k].reshape(-1))
        return out.div_(world).to(flat.dtype)


@dataclass
class RandomKCodec(SparseCodec):
    """Random-k with a seed shared by all workers (same indices everywhere): all_reduce of k values."""

    method: CompressionMethod = CompressionMethod.RANDOMK

    def _run(self, flat, shapes, rank, world, key, step):  # type: ignore[no-untyped-def]
        x = self._with_residual(flat.float(), key)
        k = kept_elements(x.numel(), self.ratio)
        idx = torch.randperm(x.numel(), generator=_seed(self.seed, key, step))[:k]
        vals = x[idx]
        self._keep_unsent(x, idx, key)
        s = yield Exchange(Op.SUM, vals)
        out = torch.zeros_like(x)
        out[idx] = s / world
        return out.to(flat.dtype)


_BITS = torch.tensor([128, 64, 32, 16, 8, 4, 2, 1], dtype=torch.uint8)


def pack_signs(x: torch.Tensor) -> torch.Tensor:
    """Bits of x >= 0 (zero counts as +), 8 per uint8, most significant first; numel % 8 == 0."""
    return ((x >= 0).to(torch.uint8).view(-1, 8) * _BITS).sum(1, dtype=torch.uint8)


def unpack_signs(b: torch.Tensor) -> torch.Tensor:
    """+-1.0 floats from packed bits, shape (*b.shape[:-1], 8 * b.shape[-1])."""
    bits = (b.unsqueeze(-1) & _BITS).ne(0)
    return bits.reshape(*b.shape[:-1], -1).float().mul_(2).sub_(1)


@dataclass
class OneBitCodec(GradCodec):
    """DeepSpeed's compressed_allreduce (1-bit Adam): worker sign+scale with error feedback, all_to_all of
    packed sign chunks, server-side average, re-compression with its own error feedback, all_gather back."""

    method: CompressionMethod = CompressionMethod.ONEBIT
    error_feedback: bool = True
    worker_error: dict[int, torch.Tensor] = field(default_factory=dict)
    server_error: dict[int, torch.Tensor] = field(default_factory=dict)

    def spec(self) -> CompressionSpec:
        return CompressionSpec(self.method, error_feedback=self.error_feedback)

    def _run(self, flat, shapes, rank, world, key, step):  # type: ignore[no-untyped-def]
        n = flat.numel()
        n_p = padded_elements(n, world)
        x = torch.zeros(n_p)
        x[:n] = flat
        if self.error_feedback and key in self.worker_error:
            x += self.worker_error[key]
        scale = x.norm() / math.sqrt(n_p)
        if self.error_feedback:
            self.worker_error[key] = x - scale * torch.where(x >= 0, 1.0, -1.0)
        chunks = yield Exchange(Op.ALL_TO_ALL, pack_signs(x))  # [N, n_p / 8N]
        scales = yield Exchange(Op.GATHER, scale.reshape(1))  # [N, 1]
        server = (unpack_signs(chunks) * scales).sum(0).div_(world)
        if self.error_feedback and key in self.server_error:
            server += self.server_error[key]
        s_scale = server.norm() / math.sqrt(server.numel())
        if self.error_feedback:
            self.server_error[key] = server - s_scale * torch.where(server >= 0, 1.0, -1.0)
        signs = yield Exchange(Op.GATHER, pack_signs(server))
        s_scales = yield Exchange(Op.GATHER, s_scale.reshape(1))
        return (unpack_signs(signs) * s_scales).reshape(-1)[:n].to(flat.dtype)


@dataclass
class PowerSgdCodec(GradCodec):
    """torch's powerSGD_hook (defaults: warm start, error feedback, min_compression_rate 2, unbatched),
    replayed step for step so that one process can simulate N workers with the same arithmetic."""

    method: CompressionMethod = CompressionMethod.POWERSGD
    rank: int = 1
    error_feedback: bool = True
    start_iter: int = 2
    min_compression_rate: float = 2.0
    error: dict[int, torch.Tensor] = field(default_factory=dict)
    q_memory: dict[int, list[torch.Tensor]] = field(default_factory=dict)
    rng: np.random.RandomState | None = None

    def spec(self) -> CompressionSpec:
        return CompressionSpec(self.method, rank=self.rank, error_feedback=self.error_feedback)

    def _run(self, flat, shapes, rank, world, key, step):  # type: ignore[no-untyped-def]
        from torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import _orthogonalize

        if step < self.start_iter:
            return (yield from _dense(flat, world))
        if self.rng is None:
            self.rng = np.random.RandomState(self.seed)
        x = flat.clone()
        if self.error_feedback:
            x += self.error.setdefault(key, torch.zeros_like(flat))
        x_cp = x.clone()
        views = [t.view(s[0], -1) for t, s in zip(x.split(_offsets(shapes)), shapes)]
        comp, plain = [], []
        for v in views:
            r = min(v.shape[0], v.shape[1], self.rank)
            (comp if (v.shape[0] + v.shape[1]) * r * self.min_compression_rate < v.numel() else plain).append(v)
        groups: dict[tuple[int, ...], list[torch.Tensor]] = {}
        for v in comp:  # torch orders P/Q memory by shape groups (insertion order)
            groups.setdefault(tuple(v.shape), []).append(v)
        mats = [m.unsqueeze(0) for g in groups.values() for m in g]
        qs = self.q_memory.get(key)
        if qs is None:
            gen = torch.Generator().manual_seed(int(self.rng.randint(1_000_000_000)))
            qs = [torch.randn(1, m.shape[2], min(m.shape[1], m.shape[2], self.rank), generator=gen) for m in mats]
        for q in qs:
            _orthogonalize(q, 0)
        ps = [torch.bmm(m, q) for m, q in zip(mats, qs)]
        dense = yield Exchange(Op.SUM, torch.cat([v.reshape(-1) for v in plain]) if plain else torch.zeros(0))
        dense.div_(world)
        i = 0
        for v in plain:
            v.copy_(dense[i:i + v.numel()].view_as(v))
            i += v.numel()
        p_all = yield Exchange(Op.SUM, torch.cat([p.reshape(-1) for p in ps]))
        ps = [t.view_as(p) for t, p in zip(p_all.split([p.numel() for p in ps]), ps)]
        for p in ps:
            _orthogonalize(p, 0)
        qs = [torch.bmm(m.transpose(1, 2), p) for m, p in zip(mats, ps)]
        q_all = yield Exchange(Op.SUM, torch.cat([q.reshape(-1) for q in qs]))
        q_all.div_(world)
        qs = [t.view_as(q) for t, q in zip(q_all.split([q.numel() for q in qs]), qs)]
        for m, p, q in zip(mats, ps, qs):
            m.copy_(torch.bmm(p, q.transpose(1, 2)))
        self.q_memory[key] = qs
        if self.error_feedback:
            self.error[key] = x_cp - x
        return x


CODECS: dict[CompressionMethod, Callable[..., GradCodec]] = {
    CompressionMethod.NONE: lambda seed=0, **p: GradCodec(CompressionMethod.NONE, seed),
    CompressionMethod.FP16: lambda seed=0, **p: CastCodec(CompressionMethod.FP16, seed),
    CompressionMethod.BF16: lambda seed=0, **p: CastCodec(CompressionMethod.BF16, seed),
    CompressionMethod.INT8: lambda seed=0, **p: Int8Codec(seed=seed),
    CompressionMethod.ONEBIT: lambda seed=0, **p: OneBitCodec(seed=seed, error_feedback=p.get("error_feedback", True)),
    CompressionMethod.TOPK: lambda seed=0, **p: TopKCodec(seed=seed, ratio=p["ratio"],
                                                          error_feedback=p.get("error_feedback", True)),
    CompressionMethod.RANDOMK: lambda seed=0, **p: RandomKCodec(seed=seed, ratio=p["ratio"],
                                                                error_feedback=p.get("error_feedback", True)),
    CompressionMethod.POWERSGD: lambda seed=0, **p: PowerSgdCodec(seed=seed, rank=p.get("rank") or 1,
                                                                  error_feedback=p.get("error_feedback", True)),
}


def codec_for(method: str | CompressionMethod, seed: int = 0, **params: Any) -> GradCodec:
    """A fresh per-worker codec; parameters are checked as a scenario's are (io.compare_input.check_codec:
    ScenarioError naming each)."""
    try:
        method = CompressionMethod(method)
    except ValueError:
        pass  # check_codec raises the ScenarioError naming the method
    spec = check_codec(_spec(method, **params))  # type: ignore[arg-type]
    return CODECS[spec.method](seed=seed, **params)


# -- drivers ------------------------------------------------------------------------------------------
def run_lockstep(gens: list[ExchangeGen]) -> list[torch.Tensor]:
    """Drive N workers' exchanges in one process; the collectives are computed across the list."""
    n = len(gens)
    exs = [next(g) for g in gens]
    while True:
        op = exs[0].op
        assert all(e.op is op for e in exs), [e.op for e in exs]
        ts = [e.tensor for e in exs]
        if op is Op.SUM:
            s = torch.stack(ts).sum(0, dtype=ts[0].dtype)
            res = [s.clone() for _ in range(n)]
        elif op is Op.MAX:
            res = [torch.stack(ts).amax(0) for _ in range(n)]
        elif op is Op.GATHER:
            res = [torch.stack(ts) for _ in range(n)]
        else:
            parts = [t.view(n, -1) for t in ts]
            res = [torch.stack([p[j] for p in parts]) for j in range(n)]
        outs: list[torch.Tensor | None] = [None] * n
        nxt = []
        for i, g in enumerate(gens):
            try:
                nxt.append(g.send(res[i]))
            except StopIteration as stop:
                outs[i] = stop.value
        if all(o is not None for o in outs):
            return outs  # type: ignore[return-value]
        assert not any(o is not None for o in outs), "workers disagree on the number of collectives"
        exs = nxt


def run_distributed(gen: ExchangeGen, group: Any = None, wire: list[tuple[str, int]] | None = None) -> torch.Tensor:
    """Drive one worker's exchange with real torch.distributed collectives (blocking)."""
    import torch.distributed as dist

    world = dist.get_world_size(group)
    try:
        ex = next(gen)
        while True:
            t = ex.tensor.contiguous()
            if wire is not None:
                wire.append((ex.op.value, payload_bytes(ex)))
            if ex.op in (Op.SUM, Op.MAX):
                dist.all_reduce(t, op=dist.ReduceOp.SUM if ex.op is Op.SUM else dist.ReduceOp.MAX, group=group)
                res = t
            elif ex.op is Op.GATHER:
                res = torch.empty((world, *t.shape), dtype=t.dtype)
                dist.all_gather(list(res.unbind(0)), t, group=group)
            else:
                res = torch.empty_like(t)
                dist.all_to_all_single(res, t, group=group)
                res = res.view(world, -1)
            ex = gen.send(res)
    except StopIteration as stop:
        return stop.value


# -- DDP hooks ----------------------------------------------------------------------------------------
@dataclass
class CodecHookState:
    """State of `codec_hook`: this worker's codec, the process group, and the wire log [(op, bytes)]."""

    codec: GradCodec
    group: Any = None
    wire: list[tuple[str, int]] = field(default_factory=list)


def codec_hook(state: CodecHookState, bucket):  # type: ignore[no-untyped-def]
    """DDP comm hook running `state.codec` over the bucket (blocking collectives; returns a done future).
    Unannotated on purpose: DDP rejects string annotations (this module uses postponed annotations)."""
    import torch.distributed as dist

    buf = bucket.buffer()
    shapes = [tuple(g.shape) for g in bucket.gradients()]
    gen = state.codec.exchange(buf, shapes, dist.get_rank(state.group), dist.get_world_size(state.group),
                               bucket.index())
    buf.copy_(run_distributed(gen, state.group, state.wire))
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(buf)
    return fut


def hook_for(method: str | CompressionMethod, group: Any = None, seed: int = 0, **params: Any) -> tuple[Any, Callable]:
    """(state, hook) for `ddp.register_comm_hook(state, hook)`: torch's allreduce / fp16 / bf16 / PowerSGD
    hooks where torch ships one (bf16: on CUDA only, torch's needs NCCL), `codec_hook` with this module's
    codec otherwise. `params`: ratio, rank,
    error_feedback; PowerSGD also start_powerSGD_iter (default 2)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    start = params.pop("start_powerSGD_iter", 2)
    codec = codec_for(method, seed=seed, **params)
    if codec.method is CompressionMethod.NONE:
        return group, default_hooks.allreduce_hook
    if codec.method is CompressionMethod.FP16:
        return group, default_hooks.fp16_compress_hook
    if codec.method is CompressionMethod.BF16 and torch.cuda.is_available():  # torch's needs NCCL (and CUDA)
        return group, default_hooks.bf16_compress_hook
    if codec.method is CompressionMethod.POWERSGD:
        assert isinstance(codec, PowerSgdCodec)
        state = powerSGD_hook.PowerSGDState(
            process_group=group, matrix_approximation_rank=codec.rank, start_powerSGD_iter=start,
            use_error_feedback=codec.error_feedback, warm_start=True, random_seed=seed)
        return state, powerSGD_hook.powerSGD_hook
    return CodecHookState(codec, group), codec_hook
