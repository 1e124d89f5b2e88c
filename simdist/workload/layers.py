"""Per-layer profile builders shared by the model generators: conv, linear, norm, pool, ...

Each returns a LayerSpec with params, forward FLOPs per sample (2 per multiply-add), activation
element counts per sample and gradient shapes. Conventions are documented in docs/model.md.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from simdist.workload.specs import Kernel, LayerSpec


class LayerKind(StrEnum):
    """Efficiency class of a layer (LayerSpec.kind): matmul-heavy kinds reach more of peak."""

    CONV = "conv"
    LINEAR = "linear"
    ATTENTION = "attention"
    EMBEDDING = "embedding"
    NORM = "norm"
    POOL = "pool"
    ACTIVATION = "activation"
    OTHER = "other"


# Forward FLOPs per element of the small non-matmul operations (docs/model.md, "compute model").
NORM_FLOPS_PER_ELEM = 5.0  # mean, variance, normalise, scale, shift
RMSNORM_FLOPS_PER_ELEM = 4.0  # square-mean, rsqrt-scale, weight
RELU_FLOPS_PER_ELEM = 1.0
GELU_FLOPS_PER_ELEM = 8.0  # tanh approximation
SWIGLU_FLOPS_PER_ELEM = 5.0  # silu (4) on the gate, times the up projection (1)
SQUARED_RELU_FLOPS_PER_ELEM = 2.0  # max(x, 0), then times itself (Primer, So et al. 2021; Nemotron-4)
ADD_FLOPS_PER_ELEM = 1.0
SOFTMAX_FLOPS_PER_ELEM = 5.0  # max, subtract, exp, sum, divide


@dataclass(frozen=True)
class Shape:
    """An activation's per-sample shape as (channels, height, width)."""

    c: int
    h: int
    w: int

    @property
    def elems(self) -> int:
        return self.c * self.h * self.w


@dataclass(frozen=True)
class CoreDims:
    """Per-sample element counts of an attention core's operands and its two batched GEMMs' FLOPs. Standard
    attention has one head width for Q, K and V; multi-head latent attention's queries and keys are wider (their
    no-RoPE and RoPE parts) than its values, and one RoPE key is shared by every head."""

    q: int  # Q elements
    k: int  # K elements
    v: int  # V elements
    o: int  # output elements
    scores_flops: float  # Q K^T
    context_flops: float  # P V
    rotated: int  # elements of q and k that rotary embedding rotates (0 without)


def _pair(v: int | tuple[int, int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else v


def conv_out(size: int, k: int, stride: int, pad: int) -> int:
    """Output length of a convolution or pooling window along one axis (floor mode)."""
    return (size + 2 * pad - k) // stride + 1


def conv(name: str, x: Shape, out_c: int, k: int | tuple[int, int], stride: int | tuple[int, int] = 1,
         pad: int | tuple[int, int] = 0, bias: bool = False) -> tuple[LayerSpec, Shape]:
    """A 2-D convolution; saves its input for the weight gradient. A 3 x 3 one at stride 1 is marked `winograd`."""
    kh, kw = _pair(k)
    sh, sw = _pair(stride)
    ph, pw = _pair(pad)
    y = Shape(out_c, conv_out(x.h, kh, sh, ph), conv_out(x.w, kw, sw, pw))
    macs = y.elems * x.c * kh * kw
    shapes: tuple[tuple[int, ...], ...] = ((out_c, x.c, kh, kw),) + (((out_c,),) if bias else ())
    params = out_c * x.c * kh * kw + (out_c if bias else 0)
    winograd = (kh, kw) == (3, 3) and (sh, sw) == (1, 1)
    return LayerSpec(name, "conv", params, 2.0 * macs, x.elems, y.elems, x.elems, shapes, winograd=winograd), y


def linear(name: str, tokens: int, d_in: int, d_out: int, bias: bool = True, saves_input: bool = True) -> LayerSpec:
    """A dense layer applied to `tokens` rows per sample; saves its input for the weight gradient."""
    shapes: tuple[tuple[int, ...], ...] = ((d_out, d_in),) + (((d_out,),) if bias else ())
    params = d_out * d_in + (d_out if bias else 0)
    saved = tokens * d_in if saves_input else 0
    return LayerSpec(name, "linear", params, 2.0 * tokens * d_in * d_out, tokens * d_in, tokens * d_out, saved, shapes)


def tied_linear(name: str, tokens: int, d_in: int, d_out: int) -> LayerSpec:
    """A dense layer whose weight is another layer's (an LM head tied to the embedding): FLOPs, no params."""
    return LayerSpec(name, "linear", 0, 2.0 * tokens * d_in * d_out, tokens * d_in, tokens * d_out, tokens * d_in, ())


def norm(name: str, elems: int, channels: int, affine: bool = True, bias: bool = True,
         flops_per_elem: float = NORM_FLOPS_PER_ELEM) -> LayerSpec:
    """BatchNorm / LayerNorm / RMSNorm over `elems` elements with per-channel weight (and bias)."""
    shapes: tuple[tuple[int, ...], ...] = ()
    if affine:
        shapes = ((channels,), (channels,)) if bias else ((channels,),)
    params = sum(s[0] for s in shapes)
    return LayerSpec(name, "norm", params, flops_per_elem * elems, elems, elems, elems, shapes)


def batch_norm(name: str, elems: int, channels: int) -> LayerSpec:
    """Training-mode BatchNorm over `elems` elements per sample, with per-channel weight and bias, run as two
    passes each way. No element can be normalised before its channel's mean and variance over the whole batch are
    known, nor its input gradient computed before the channel's sums of dy and dy * x_hat, and a batch's activation
    does not stay on chip between the passes: forward reads x for the statistics, then reads x and writes y;
    backward reads dy and x for the sums, then reads dy and x and writes dx (docs/model.md, "Layer conventions")."""
    base = norm(name, elems, channels)
    e = float(elems)
    fwd = (Kernel(f"{name}.statistics", "norm", 2.0 * e, e),
           Kernel(f"{name}.normalize", "norm", (NORM_FLOPS_PER_ELEM - 2.0) * e, 2.0 * e))
    bwd = (Kernel(f"{name}.grad_sums", "norm", 4.0 * e, 2.0 * e),
           Kernel(f"{name}.grad_input", "norm", 6.0 * e, 3.0 * e))
    return replace(base, fwd_kernels=fwd, bwd_kernels=bwd)


def activation(name: str, elems: int, flops_per_elem: float = RELU_FLOPS_PER_ELEM, saves: bool = True) -> LayerSpec:
    """An elementwise activation. In-place ReLU saves nothing new (its output is the next layer's saved input),
    but its backward still reads that output to know where it passed the gradient: dy and y in, dx out."""
    spec = LayerSpec(name, "activation", 0, flops_per_elem * elems, elems, elems, elems if saves else 0, ())
    if saves:
        return spec
    return replace(spec, bwd_kernels=(Kernel(f"{name}.backward", "activation", flops_per_elem * elems, 3.0 * elems),))


def add(name: str, elems: int) -> LayerSpec:
    """A residual addition: reads two tensors, writes one, saves nothing."""
    return LayerSpec(name, "other", 0, ADD_FLOPS_PER_ELEM * elems, 2 * elems, elems, 0, ())


def pool(name: str, x: Shape, k: int, stride: int, pad: int = 0, saves: bool = True) -> tuple[LayerSpec, Shape]:
    """Max or average pooling with a k x k window (k FLOPs per window element)."""
    y = Shape(x.c, conv_out(x.h, k, stride, pad), conv_out(x.w, k, stride, pad))
    return LayerSpec(name, "pool", 0, float(k * k * y.elems), x.elems, y.elems, x.elems if saves else 0, ()), y


def global_pool(name: str, x: Shape) -> tuple[LayerSpec, Shape]:
    """Global average pooling to 1 x 1 (saves only the shape, no tensor)."""
    y = Shape(x.c, 1, 1)
    return LayerSpec(name, "pool", 0, float(x.elems), x.elems, y.elems, 0, ()), y


def embedding(name: str, tokens: int, vocab: int, dim: int) -> LayerSpec:
    """A lookup table: no FLOPs, saves the token ids."""
    return LayerSpec(name, "embedding", vocab * dim, 0.0, tokens, tokens * dim, tokens, ((vocab, dim),))
