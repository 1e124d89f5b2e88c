"""Models given inline as a list of layer dicts (the scenario's `workload.model: {layers: [...]}`).

Each dict names one layer: name, kind, params, fwd_flops and optionally input_elems, output_elems,
saved_elems, grad_shapes. Bad input raises ValueError naming the layer index, the key and the value.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from simdist.workload.layers import LayerKind
from simdist.workload.specs import LayerSpec, ModelSpec

_REQUIRED = ("name", "kind", "params", "fwd_flops")
_OPTIONAL = ("input_elems", "output_elems", "saved_elems", "grad_shapes")


def _number(i: int, key: str, value: Any, integer: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if integer:
        ok = ok and float(value).is_integer()
    if not ok or not math.isfinite(value) or value < 0:
        kind = "a non-negative integer" if integer else "a non-negative number"
        raise ValueError(f"layers[{i}].{key}: got {value!r}; expected {kind}")
    return int(value) if integer else float(value)


def _shapes(i: int, value: Any) -> tuple[tuple[int, ...], ...]:
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"layers[{i}].grad_shapes: got {value!r}; expected a list of shapes like [[256, 128], [256]]")
    out = []
    for j, shape in enumerate(value):
        if (not isinstance(shape, (list, tuple)) or not shape
                or any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in shape)):
            raise ValueError(f"layers[{i}].grad_shapes[{j}]: got {shape!r}; expected a list of positive integers")
        out.append(tuple(shape))
    return tuple(out)


def layer_from_dict(i: int, d: Mapping[str, Any]) -> LayerSpec:
    """One LayerSpec from a dict; `i` is its index, used in error messages."""
    if not isinstance(d, Mapping):
        raise ValueError(f"layers[{i}]: got {d!r}; expected a mapping with keys {', '.join(_REQUIRED)}")
    unknown = sorted(set(d) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise ValueError(f"layers[{i}]: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(_REQUIRED + _OPTIONAL)}")
    missing = [k for k in _REQUIRED if k not in d]
    if missing:
        raise ValueError(f"layers[{i}]: missing key(s) {', '.join(missing)}")
    name = d["name"]
    if not isinstance(name, str) or not name:
        raise ValueError(f"layers[{i}].name: got {name!r}; expected a non-empty string")
    kind = d["kind"]
    if kind not in set(LayerKind):
        raise ValueError(f"layers[{i}].kind: got {kind!r}; expected one of {', '.join(LayerKind)}")
    params = int(_number(i, "params", d["params"], integer=True))
    fwd = _number(i, "fwd_flops", d["fwd_flops"])
    inp = _number(i, "input_elems", d.get("input_elems", 0))
    out = _number(i, "output_elems", d.get("output_elems", 0))
    saved = _number(i, "saved_elems", d.get("saved_elems", inp))
    if "grad_shapes" in d:
        shapes = _shapes(i, d["grad_shapes"])
        total = sum(math.prod(s) for s in shapes)
        if total != params:
            raise ValueError(f"layers[{i}].grad_shapes: elements sum to {total}, but params is {params}")
    else:
        shapes = ((params,),) if params else ()
    return LayerSpec(name, str(kind), params, fwd, inp, out, saved, shapes)


def model_from_layers(layers: list[dict], name: str, tokens_per_sample: int | None = None) -> ModelSpec:
    """A custom ModelSpec from inline layer dicts, in forward order (saved_elems defaults to input_elems)."""
    if not isinstance(layers, (list, tuple)) or not layers:
        raise ValueError(f"layers: got {layers!r}; expected a non-empty list of layer mappings")
    specs = tuple(layer_from_dict(i, d) for i, d in enumerate(layers))
    seen: dict[str, int] = {}
    for i, spec in enumerate(specs):
        if spec.name in seen:
            raise ValueError(f"layers[{i}].name: {spec.name!r} repeats layers[{seen[spec.name]}].name")
        seen[spec.name] = i
    return ModelSpec(name, "custom", specs, tokens_per_sample=tokens_per_sample, source="inline layers")
