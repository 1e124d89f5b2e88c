"""Profile a PyTorch model into a ModelSpec without weights: build it on the meta device and count.

`import_model("package.module:factory", input_shape)` builds the module under `torch.device("meta")`,
runs one forward on a meta tensor under FlopCounterMode, and records per leaf module its FLOPs (the
counter's total before and after the module runs), input/output elements (forward hooks) and parameter
shapes. Figures are divided by the batch dimension (input_shape[0]) to give per-sample counts. torch is
imported lazily: this is the only simdist module that needs it.
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from simdist.workload.specs import LayerSpec, ModelSpec

# torch.nn class name -> LayerSpec.kind (first match on the class's MRO names; else "other").
_KIND_BY_CLASS = {
    "Conv1d": "conv", "Conv2d": "conv", "Conv3d": "conv", "ConvTranspose1d": "conv", "ConvTranspose2d": "conv",
    "ConvTranspose3d": "conv", "Linear": "linear", "Bilinear": "linear", "LazyLinear": "linear",
    "MultiheadAttention": "attention", "Embedding": "embedding", "EmbeddingBag": "embedding",
    "BatchNorm1d": "norm", "BatchNorm2d": "norm", "BatchNorm3d": "norm", "LayerNorm": "norm", "GroupNorm": "norm",
    "RMSNorm": "norm", "InstanceNorm1d": "norm", "InstanceNorm2d": "norm", "InstanceNorm3d": "norm",
    "SyncBatchNorm": "norm", "LocalResponseNorm": "norm",
    "MaxPool1d": "pool", "MaxPool2d": "pool", "MaxPool3d": "pool", "AvgPool1d": "pool", "AvgPool2d": "pool",
    "AvgPool3d": "pool", "AdaptiveAvgPool1d": "pool", "AdaptiveAvgPool2d": "pool", "AdaptiveAvgPool3d": "pool",
    "AdaptiveMaxPool1d": "pool", "AdaptiveMaxPool2d": "pool", "AdaptiveMaxPool3d": "pool",
    "ReLU": "activation", "ReLU6": "activation", "GELU": "activation", "SiLU": "activation", "Tanh": "activation",
    "Sigmoid": "activation", "LeakyReLU": "activation", "ELU": "activation", "Softmax": "activation",
    "Mish": "activation", "Hardswish": "activation", "Hardsigmoid": "activation", "PReLU": "activation",
    "Dropout": "activation", "Softplus": "activation",
}
# Kinds whose backward needs their input saved; activations in place save their output (same size).
_FUNCTIONAL = "(functional)"


def _kind(module: Any) -> str:
    for cls in type(module).__mro__:
        if cls.__name__ in _KIND_BY_CLASS:
            return _KIND_BY_CLASS[cls.__name__]
    return "other"


def _numel(obj: Any) -> int:
    """Elements of every tensor in a (possibly nested) forward argument or result."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.numel()
    if isinstance(obj, (list, tuple)):
        return sum(_numel(o) for o in obj)
    if isinstance(obj, dict):
        return sum(_numel(o) for o in obj.values())
    return 0


def _resolve(factory: str) -> Callable[[], Any]:
    if not isinstance(factory, str) or factory.count(":") != 1:
        raise ValueError(f"factory: got {factory!r}; expected 'package.module:callable', e.g. 'torchvision.models:resnet50'")
    module_name, attr = factory.split(":")
    if not module_name or not attr:
        raise ValueError(f"factory: got {factory!r}; expected 'package.module:callable'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or an error raised while importing the user's module
        raise ValueError(f"factory {factory!r}: cannot import {module_name!r}: {type(exc).__name__}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"factory {factory!r}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"factory {factory!r}: {attr!r} is not callable")
    return obj


@dataclass
class _Record:
    """What the hooks learn about one leaf module (summed over calls when it runs more than once)."""

    name: str
    kind: str
    grad_shapes: tuple[tuple[int, ...], ...]
    flops: float = 0.0
    input_elems: float = 0.0
    output_elems: float = 0.0
    calls: int = 0
    start: list[float] = field(default_factory=list)


def import_model(factory: str, input_shape: Sequence[int], name: str | None = None,
                 input_dtype: str = "float32", tokens_per_sample: int | None = None) -> ModelSpec:
    """Profile `factory()` on a meta-device input of `input_shape` (batch first) into a per-sample ModelSpec.

    Layers are the leaf modules in the order they first run; FLOPs that ran outside any leaf module
    (functional calls in a parent's forward) become one trailing '(functional)' layer. Parameters held
    directly by non-leaf modules become a leading '<name>.(direct)' layer so gradients sum to params.
    """
    shape = tuple(input_shape) if isinstance(input_shape, (list, tuple)) else None
    if not shape or any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in shape):
        raise ValueError(f"input_shape: got {input_shape!r}; expected a list of positive integers, batch first")
    build = _resolve(factory)
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    dtype = getattr(torch, input_dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"input_dtype: got {input_dtype!r}; expected a torch dtype name like 'float32' or 'int64'")
    try:
        with torch.device("meta"):
            model = build()
    except Exception as exc:
        raise ValueError(f"factory {factory!r} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"factory {factory!r} returned {type(model).__name__}, expected a torch.nn.Module")
    model = model.to("meta")
    batch = shape[0]

    records: dict[int, _Record] = {}
    order: list[int] = []
    direct: list[LayerSpec] = []
    for mod_name, module in model.named_modules():
        own = tuple(tuple(p.shape) for p in module.parameters(recurse=False) if p.requires_grad)
        if next(module.children(), None) is None:
            records[id(module)] = _Record(mod_name or type(module).__name__, _kind(module), own)
        elif own:
            n = sum(math.prod(s) for s in own)
            direct.append(LayerSpec(f"{mod_name or type(module).__name__}.(direct)", "other", n, 0.0, 0.0, 0.0, 0.0, own))

    counter = FlopCounterMode(display=False)

    def pre_hook(module: Any, args: Any) -> None:
        rec = records[id(module)]
        rec.start.append(float(counter.get_total_flops()))

    def post_hook(module: Any, args: Any, output: Any) -> None:
        rec = records[id(module)]
        rec.flops += float(counter.get_total_flops()) - rec.start.pop()
        rec.input_elems += _numel(args)
        rec.output_elems += _numel(output)
        if rec.calls == 0:
            order.append(id(module))
        rec.calls += 1

    handles = []
    for _, module in model.named_modules():
        if id(module) in records:
            handles.append(module.register_forward_pre_hook(pre_hook))
            handles.append(module.register_forward_hook(post_hook))
    try:
        x = torch.empty(shape, dtype=dtype, device="meta")
        with counter:
            model(x)
    except Exception as exc:
        raise ValueError(f"forward of {factory!r} on a meta tensor of shape {list(shape)} ({input_dtype}) failed: "
                         f"{type(exc).__name__}: {exc}") from exc
    finally:
        for h in handles:
            h.remove()

    layers = list(direct)
    for key in order + [k for k in records if k not in set(order)]:  # modules that never ran keep their params
        rec = records[key]
        params = sum(math.prod(s) for s in rec.grad_shapes)
        inp, out = rec.input_elems / batch, rec.output_elems / batch
        saved = out if rec.kind == "activation" else inp  # in-place-style activations keep their output
        layers.append(LayerSpec(rec.name, rec.kind, params, rec.flops / batch, inp, out, saved, rec.grad_shapes))
    leftover = float(counter.get_total_flops()) - sum(r.flops for r in records.values())
    if leftover > 0:
        layers.append(LayerSpec(_FUNCTIONAL, "other", 0, leftover / batch, 0.0, 0.0, 0.0, ()))
    if not layers:
        raise ValueError(f"factory {factory!r} built a module with no layers")
    return ModelSpec(name or factory, "custom", tuple(layers), tokens_per_sample=tokens_per_sample,
                     source=f"torch import of {factory} at input {list(shape)}")
