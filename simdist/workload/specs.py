"""Per-layer model profiles: what the compute, memory and communication models need to know.

Counts are in elements (dtype-independent) and per sample; FLOPs count a multiply-add as 2.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerSpec:
    """One layer (or fused block) of a model, in forward order."""

    name: str
    kind: str  # conv | linear | attention | embedding | norm | pool | activation | other (efficiency class)
    params: int  # trainable parameters
    fwd_flops: float  # forward FLOPs per sample
    input_elems: float  # activation elements read per sample
    output_elems: float  # activation elements written per sample
    saved_elems: float  # activation elements kept for backward per sample
    grad_shapes: tuple[tuple[int, ...], ...] = ()  # shape of each gradient tensor (elements sum to params)


@dataclass(frozen=True)
class ModelSpec:
    """A model as a sequence of layers; `tokens_per_sample` is set for sequence models."""

    name: str
    family: str  # cnn | transformer | mlp | custom
    layers: tuple[LayerSpec, ...]
    tokens_per_sample: int | None = None
    source: str = ""

    @property
    def params(self) -> int:
        return sum(layer.params for layer in self.layers)

    @property
    def fwd_flops(self) -> float:
        return sum(layer.fwd_flops for layer in self.layers)

    def gradients_backward_order(self) -> list[tuple[int, tuple[int, ...]]]:
        """(layer index, shape) of every gradient tensor in the order backward produces them."""
        out = []
        for i in range(len(self.layers) - 1, -1, -1):
            for shape in reversed(self.layers[i].grad_shapes):
                out.append((i, shape))
        return out
