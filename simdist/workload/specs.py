"""Per-layer model profiles: what the compute, memory and communication models need to know.

Counts are in elements (dtype-independent) and per sample; FLOPs count a multiply-add as 2.
"""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Kernel:
    """One GPU kernel of a layer, per sample: a layer that lists its kernels is timed as their sum, each on its
    own roofline, instead of as one roofline over the whole layer (docs/model-parallel.md, "per-block cost").

    `elems` counts the activation elements the kernel reads plus writes (in the activation dtype); `mask_bytes`
    the 1-byte dropout-mask elements it reads or writes (torch's bool masks: one byte whatever the dtype).
    """

    name: str
    kind: str  # efficiency class, as LayerSpec.kind
    flops: float
    elems: float
    mask_bytes: float = 0.0

    def scaled(self, f: float) -> "Kernel":
        """The kernel on a fraction f of the work (a tensor-parallel shard)."""
        return replace(self, flops=self.flops * f, elems=self.elems * f, mask_bytes=self.mask_bytes * f)


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
    # The layer's kernels in forward and in backward when it runs more than one (attention without flash
    # attention, bias+dropout+residual); empty: one kernel, timed by one roofline over the whole layer.
    fwd_kernels: tuple[Kernel, ...] = ()
    bwd_kernels: tuple[Kernel, ...] = ()
    # A 3 x 3, stride-1 convolution: on CUDA cores (fp32) cuDNN runs it as Winograd (compute.WINOGRAD_SPEEDUP)
    winograd: bool = False
    # A linear layer a Transformer Engine recipe (fp8, mxfp8, nvfp4) leaves in bf16: Megatron-Core's output layer
    # and the task heads are plain tensor-parallel / torch layers, not TE modules (simdist.low_precision)
    high_precision: bool = False
    # A frozen layer (LoRA's base weights, simdist.workload.lora): `params` are kept (read forward and for the
    # input gradient) but get no weight gradient, gradient tensor (grad_shapes is empty) or optimizer state
    frozen: bool = False

    def scaled_kernels(self, f: float) -> dict:
        """`replace` arguments giving the kernels a fraction f of their work (for a tensor-parallel shard)."""
        return {"fwd_kernels": tuple(k.scaled(f) for k in self.fwd_kernels),
                "bwd_kernels": tuple(k.scaled(f) for k in self.bwd_kernels)}


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
