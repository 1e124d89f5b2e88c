"""Torch stand-ins for simdist LayerSpecs: a module plus inputs that do the same work, to time one layer.

A LayerSpec carries counts, not shapes, so shapes are inferred from them (the rules, per kind):

* linear: the (out, in) weight in `grad_shapes` gives tokens = input_elems / in; without a usable
  weight (tied heads, SwiGLU's fused gate/up) tokens = 2 x input x output / fwd_flops.
* conv: the (out, in, kh, kw) weight gives the input and output areas; maps are taken as square and
  per axis the stride s and padding p are the first pair with (size + 2p - k) // s + 1 = out size, trying
  s = size / out first (exact), then round(size / out), then 1, 2, ...; p from 0 up to k // 2. Every
  pair that fits gives the same output and the same FLOPs, so the choice only moves padding bytes.
  When nothing fits (non-square maps), a matmul of equal FLOPs stands in (`exact=False`).
* attention: seq = the model's tokens_per_sample, hidden = output / seq, heads from the softmax term
  of fwd_flops (4 s^2 h + 5 a s^2, + rotary); grouped K/V heads from input_elems. SDPA runs causal for
  decoders (layers named 'blocks.*', as simdist's GPT generator names them), non-causal otherwise.
* norm: BatchNorm2d in CNNs, LayerNorm (RMSNorm at 4 FLOPs/element) in transformers, over the channels
  of its weight. activation: ReLU / GELU (tanh) / tanh / SwiGLU by FLOPs per element. pool: k = sqrt(FLOPs
  / output); channels are the model's conv channels that make both maps square. embedding: nn.Embedding.
  other: a residual add (input = 2 x output), softmax cross-entropy ('loss'), else a memory-bound stand-in.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Sequence

from simdist.workload.specs import LayerSpec, ModelSpec

SOFTMAX_FLOPS_PER_ELEM = 5.0  # simdist.workload.layers: the attention core's and the loss's softmax term
RMSNORM_FLOPS_PER_ELEM = 4.0


@dataclass(frozen=True)
class ProxyPlan:
    """What building one layer's proxy needs besides the batch: the layer and its model context.

    Hashable; two layers with equal plans (the name aside, see `key`) do the same work.
    """

    layer: LayerSpec
    input_grad: bool  # backward computes the input gradient (False up to the first trainable layer)
    family: str = "custom"
    seq_len: int | None = None
    causal: bool = False
    channels: tuple[int, ...] = ()  # candidate channel counts for pools, most recent first

    @property
    def key(self) -> "ProxyPlan":
        return replace(self, layer=replace(self.layer, name=""))


@dataclass(frozen=True, eq=False)
class Proxy:
    """A module and inputs doing one layer's work for a batch; `op` says which torch op, `exact` whether
    its shapes follow the LayerSpec (False: an equal-FLOPs or equal-bytes stand-in)."""

    plan: ProxyPlan
    op: str
    module: Any  # torch.nn.Module
    inputs: tuple[Any, ...]
    exact: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def forward(self) -> Any:
        return self.module(*self.inputs)

    def grad_targets(self) -> list[Any]:
        """Tensors backward produces gradients for: trainable parameters, and the inputs when input_grad."""
        ts = [p for p in self.module.parameters() if p.requires_grad]
        return ts + [x for x in self.inputs if getattr(x, "requires_grad", False)]


def plan_model(model: ModelSpec, causal: bool | None = None) -> list[ProxyPlan]:
    """One ProxyPlan per layer in forward order (cheap: builds nothing)."""
    first = next((i for i, layer in enumerate(model.layers) if layer.params > 0), len(model.layers))
    if causal is None:
        causal = any(layer.name.startswith("blocks.") for layer in model.layers)
    seen: list[int] = []
    out = []
    for i, layer in enumerate(model.layers):
        out.append(ProxyPlan(layer, i > first, model.family, model.tokens_per_sample, causal, tuple(seen)))
        if layer.kind == "conv" and layer.grad_shapes and len(layer.grad_shapes[0]) == 4:
            o, c = layer.grad_shapes[0][:2]
            for ch in (c, o):  # most recent first
                if ch in seen:
                    seen.remove(ch)
                seen.insert(0, ch)
    return out


def model_proxies(model: ModelSpec, batch: int, device: str = "cpu", dtype: Any = None,
                  causal: bool | None = None) -> Iterator[Proxy]:
    """The proxy of every layer of `model`, built lazily (one at a time) for `batch` samples."""
    for plan in plan_model(model, causal):
        yield build_proxy(plan, batch, device, dtype)


# ------------------------------------------------------------------------------------- shape inference

def _int(x: float) -> int | None:
    r = round(x)
    return int(r) if r >= 1 and abs(x - r) <= 1e-9 * max(1.0, abs(x)) else None


def _isqrt_exact(n: float) -> int | None:
    i = _int(n)
    if i is None:
        return None
    r = math.isqrt(i)
    return r if r * r == i else None


def infer_window(size_in: int, size_out: int, k: int) -> tuple[int, int] | None:
    """(stride, padding) with (size_in + 2 p - k) // s + 1 == size_out, tried in the module docstring's order."""
    order: list[int] = []
    if size_in % size_out == 0:
        order.append(size_in // size_out)
    order.append(max(1, round(size_in / size_out)))
    order += range(1, max(k, size_in) + 1)
    for s in dict.fromkeys(order):
        for p in range(0, k // 2 + 1):
            if size_in + 2 * p >= k and (size_in + 2 * p - k) // s + 1 == size_out:
                return s, p
    return None


def linear_dims(layer: LayerSpec) -> tuple[int, int, int, bool] | None:
    """(tokens, in, out, bias) of a linear layer, from its weight shape or else from its counts."""
    i, o, f = layer.input_elems, layer.output_elems, layer.fwd_flops
    mats = [s for s in layer.grad_shapes if len(s) == 2]
    if len(mats) == 1:
        d_out, d_in = mats[0]
        t = _int(i / d_in)
        if t is not None and t * d_out == o and abs(2.0 * t * d_in * d_out - f) <= 1e-9 * f:
            return t, d_in, d_out, any(s == (d_out,) for s in layer.grad_shapes)
    t = _int(2.0 * i * o / f) if f > 0 else None
    if t is None:
        return None
    d_in, d_out = _int(i / t), _int(o / t)
    if d_in is None or d_out is None or abs(2.0 * t * d_in * d_out - f) > 1e-9 * f:
        return None
    return t, d_in, d_out, any(s == (d_out,) for s in layer.grad_shapes)


def conv_dims(layer: LayerSpec) -> dict[str, Any] | None:
    """in/out channels, kernel, stride, padding and input size of a conv, or None when not inferable."""
    if not layer.grad_shapes or len(layer.grad_shapes[0]) != 4:
        return None
    o, c, kh, kw = layer.grad_shapes[0]
    h, ho = _isqrt_exact(layer.input_elems / c), _isqrt_exact(layer.output_elems / o)
    if h is None or ho is None:
        return None
    sh, sw = infer_window(h, ho, kh), infer_window(h, ho, kw)
    if sh is None or sw is None:
        return None
    return {"in": c, "out": o, "kernel": (kh, kw), "stride": (sh[0], sw[0]), "padding": (sh[1], sw[1]),
            "size": h, "bias": any(s == (o,) for s in layer.grad_shapes)}


def attention_dims(layer: LayerSpec, seq_len: int | None) -> tuple[int, int, int, int, bool] | None:
    """(seq, heads, kv_heads, head_dim, exact) of an attention core; exact=False when heads were guessed."""
    if not seq_len:
        return None
    s = seq_len
    h = _int(layer.output_elems / s)
    kvd2 = layer.input_elems / s - (h or 0)
    if h is None or kvd2 <= 0 or _int(kvd2 / 2) is None:
        return None
    kvd = int(kvd2 // 2)
    for rotary in (0.0, 3.0 * s * (h + kvd)):
        a = _int((layer.fwd_flops - 4.0 * s * s * h - rotary) / (SOFTMAX_FLOPS_PER_ELEM * s * s))
        if a is not None and h % a == 0 and kvd % (h // a) == 0:
            kv = kvd // (h // a)
            if a % kv == 0:
                return s, a, kv, h // a, True
    d = 64 if h % 64 == 0 and kvd % 64 == 0 else math.gcd(h, kvd)
    return s, h // d, kvd // d, d, False


# ------------------------------------------------------------------------------------- building

def _modules():
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Fn(nn.Module):
        """A module around a function of its inputs, with optional parameters."""

        def __init__(self, fn, params: Sequence[Any] = ()):
            super().__init__()
            self.fn = fn
            self.ps = nn.ParameterList(params)

        def forward(self, *xs):
            return self.fn(*xs, *self.ps)

    return torch, F, nn, Fn


def build_proxy(plan: ProxyPlan, batch: int, device: str = "cpu", dtype: Any = None) -> Proxy:
    """The module and inputs doing `plan.layer`'s work for `batch` samples on `device` in `dtype`."""
    torch = _modules()[0]
    with torch.device(device):  # parameters are created where they will run
        return _build(plan, batch, device, dtype or torch.float32)


def _build(plan: ProxyPlan, batch: int, device: str, dtype: Any) -> Proxy:
    torch, F, nn, Fn = _modules()
    layer, b = plan.layer, batch
    kw = {"device": device, "dtype": dtype}

    def x_(*shape: int, grad: bool = plan.input_grad) -> Any:
        return torch.randn(*shape, **kw).requires_grad_(grad)

    def done(op: str, module: Any, inputs: tuple, exact: bool = True, **extra: Any) -> Proxy:
        module = module.to(**kw) if isinstance(module, nn.Module) else module
        module.train()
        return Proxy(plan, op, module, inputs, exact, extra)

    def flops_matmul(flops: float, rows: int) -> Proxy:
        """A GEMM of about `flops` forward FLOPs (rows x k x k, k <= 4096): the stand-in when shapes are not inferable."""
        n = k = max(1, min(4096, round(math.sqrt(flops / 2.0 / rows))))
        rows = max(rows, round(flops / 2.0 / (k * n)))
        return done(f"matmul {rows}x{k}x{n} (equal FLOPs)", nn.Linear(k, n, bias=False), (x_(rows, k),), False)

    kind = layer.kind
    if kind == "linear":
        dims = linear_dims(layer)
        if dims is None:
            return flops_matmul(layer.fwd_flops * b, b)
        t, d_in, d_out, bias = dims
        return done(f"linear {t}x{d_in}->{d_out}", nn.Linear(d_in, d_out, bias=bias), (x_(b, t, d_in),))
    if kind == "conv":
        d = conv_dims(layer)
        if d is None:
            o, c, kh, kw_ = layer.grad_shapes[0] if layer.grad_shapes and len(layer.grad_shapes[0]) == 4 else (1, 1, 1, 1)
            rows = _int(b * layer.output_elems / o)
            if rows is None or abs(2.0 * rows * c * kh * kw_ * o - b * layer.fwd_flops) > 1e-9 * b * layer.fwd_flops:
                return flops_matmul(layer.fwd_flops * b, b)
            return done(f"matmul {rows}x{c * kh * kw_}x{o} (conv as GEMM)", nn.Linear(c * kh * kw_, o, bias=False),
                        (x_(rows, c * kh * kw_),), False)
        conv = nn.Conv2d(d["in"], d["out"], d["kernel"], d["stride"], d["padding"], bias=d["bias"])
        return done(f"conv2d {d['in']}->{d['out']} k={d['kernel']} s={d['stride']} p={d['padding']} @{d['size']}",
                    conv, (x_(b, d["in"], d["size"], d["size"]),))
    if kind == "attention":
        a = attention_dims(layer, plan.seq_len)
        if a is None:
            return flops_matmul(layer.fwd_flops * b, b)
        s, heads, kv, hd, exact = a
        gqa = kv != heads

        def sdpa(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=plan.causal, enable_gqa=gqa)

        return done(f"sdpa s={s} heads={heads}/{kv} d={hd}{' causal' if plan.causal else ''}", Fn(sdpa),
                    (x_(b, heads, s, hd), x_(b, kv, s, hd), x_(b, kv, s, hd)), exact)
    n_in, n_out = layer.input_elems, layer.output_elems
    if kind == "norm":
        c = layer.grad_shapes[0][0] if layer.grad_shapes else None
        affine, bias = bool(layer.grad_shapes), len(layer.grad_shapes) >= 2
        if c is None or _int(n_in / c) is None:
            c = _int(n_in) or 1
        rows = int(round(n_in / c))
        if plan.family == "cnn":
            return done(f"batchnorm2d c={c}", nn.BatchNorm2d(c, affine=affine), (x_(b, c, rows, 1),))
        if abs(layer.fwd_flops / n_in - RMSNORM_FLOPS_PER_ELEM) < 1e-9:
            return done(f"rmsnorm {rows}x{c}", nn.RMSNorm(c, elementwise_affine=affine), (x_(b, rows, c),))
        return done(f"layernorm {rows}x{c}", nn.LayerNorm(c, elementwise_affine=affine, bias=bias), (x_(b, rows, c),))
    if kind == "activation":
        n = int(round(n_out))
        if abs(n_in - 2 * n_out) < 1e-9 * n_in:
            return done(f"swiglu {n}", Fn(lambda g, u: F.silu(g) * u), (x_(b, n), x_(b, n)))
        per = layer.fwd_flops / n_out
        if "tanh" in layer.name:
            return done(f"tanh {n}", Fn(torch.tanh), (x_(b, n),))
        if per <= 1.0 + 1e-9:
            return done(f"relu {n}", Fn(F.relu), (x_(b, n),))
        return done(f"gelu(tanh) {n}", Fn(lambda x: F.gelu(x, approximate="tanh")), (x_(b, n),))
    if kind == "pool":
        if layer.saved_elems == 0 and abs(layer.fwd_flops - n_in) < 1e-9 * n_in:  # global average pool
            c = int(round(n_out))
            hw = _int(n_in / c) or 1
            return done(f"global avgpool c={c} x {hw}", Fn(lambda x: x.mean(dim=-1)), (x_(b, c, hw),))
        k = _isqrt_exact(layer.fwd_flops / n_out)
        for c in plan.channels if k else ():
            h, ho = _isqrt_exact(n_in / c), _isqrt_exact(n_out / c)
            win = infer_window(h, ho, k) if h and ho else None
            if win:
                return done(f"maxpool2d c={c} k={k} s={win[0]} p={win[1]} @{h}", nn.MaxPool2d(k, win[0], win[1]),
                            (x_(b, c, h, h),))
        n, m = int(round(n_in)), int(round(n_out))
        return done(f"avgpool1d {n}->{m}", Fn(lambda x: F.adaptive_avg_pool1d(x, m)), (x_(b, 1, n),), False)
    if kind == "embedding":
        mats = [s for s in layer.grad_shapes if len(s) == 2]
        t = _int(n_in)
        if len(mats) == 1 and t is not None and abs(t * mats[0][1] - n_out) < 1e-9 * n_out:
            vocab, dim = mats[0]
            ids = torch.randint(0, vocab, (b, t), device=device)
            return done(f"embedding {vocab}x{dim} [{t}]", nn.Embedding(vocab, dim), (ids,))
    if kind == "other" or kind == "embedding":
        if abs(n_in - 2 * n_out) < 1e-9 * n_in:
            n = int(round(n_out))
            return done(f"add {n}", Fn(torch.add), (x_(b, n), x_(b, n)))
        classes = _int(n_in / n_out)
        if "loss" in layer.name and classes and abs(layer.fwd_flops - SOFTMAX_FLOPS_PER_ELEM * n_in) < 1e-9 * n_in:
            rows = int(round(n_out))
            target = torch.randint(0, classes, (b * rows,), device=device)
            return done(f"cross_entropy {rows}x{classes}",
                        Fn(lambda x, y: F.cross_entropy(x.view(-1, classes), y, reduction="none")),
                        (x_(b * rows, classes), target))
    # memory-bound stand-in with the right element counts (and parameters added when it has them)
    n, m = int(round(n_in)) or 1, int(round(n_out)) or 1
    params = [nn.Parameter(torch.zeros(layer.params, **kw))] if layer.params else []

    def stream(x, *ps):
        y = F.adaptive_avg_pool1d(x.unsqueeze(1), m).squeeze(1) if n != m else x * 1.0
        return y + ps[0][:m] if ps and ps[0].numel() >= m else y

    return done(f"elementwise {n}->{m}", Fn(stream, params), (x_(b, n),), False)
