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
    # Routed experts whose weights this layer holds (a mixture-of-experts layer `blocks.{i}.experts`: `params`
    # are all of them, `fwd_flops` the active work, each token through top_k of them); 0: not an expert layer
    experts: int = 0

    def scaled_kernels(self, f: float) -> dict:
        """`replace` arguments giving the kernels a fraction f of their work (for a tensor-parallel shard)."""
        return {"fwd_kernels": tuple(k.scaled(f) for k in self.fwd_kernels),
                "bwd_kernels": tuple(k.scaled(f) for k in self.bwd_kernels)}


ROUTERS = ("softmax", "sigmoid")


@dataclass(frozen=True)
class MoeSpec:
    """The mixture-of-experts layers of a model (docs/model.md, "Mixture of experts").

    Each MoE block replaces the dense MLP by a router (a hidden x experts linear gate), `experts` routed
    SwiGLU experts of `expert_ffn_hidden` of which each token runs `top_k`, and `shared_experts` experts every
    token runs. `capacity_factor` caps the tokens an expert takes at factor x tokens x top_k / experts (None:
    dropless, as Megatron-Core and the published runs train); `first_dense_layers` blocks come before the first
    MoE block and keep a dense MLP (DeepSeek-V3: 3).
    """

    experts: int
    top_k: int
    shared_experts: int = 0
    expert_ffn_hidden: int = 0
    capacity_factor: float | None = None
    router: str = "softmax"  # softmax | sigmoid
    first_dense_layers: int = 0

    def __post_init__(self) -> None:
        for label, v in (("experts", self.experts), ("top_k", self.top_k), ("expert_ffn_hidden", self.expert_ffn_hidden)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{label} must be a positive integer, got {v!r}")
        for label, v in (("shared_experts", self.shared_experts), ("first_dense_layers", self.first_dense_layers)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{label} must be a non-negative integer, got {v!r}")
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) must not exceed experts ({self.experts})")
        if self.router not in ROUTERS:
            raise ValueError(f"router must be one of {', '.join(ROUTERS)}, got {self.router!r}")
        cf = self.capacity_factor
        if cf is not None and (isinstance(cf, bool) or not isinstance(cf, (int, float)) or not cf > 0):
            raise ValueError(f"capacity_factor must be a positive number or None (dropless), got {cf!r}")


@dataclass(frozen=True)
class ModelSpec:
    """A model as a sequence of layers; `tokens_per_sample` is set for sequence models."""

    name: str
    family: str  # cnn | transformer | mlp | custom
    layers: tuple[LayerSpec, ...]
    tokens_per_sample: int | None = None
    source: str = ""
    moe: MoeSpec | None = None  # None: a dense model

    @property
    def params(self) -> int:
        return sum(layer.params for layer in self.layers)

    @property
    def fwd_flops(self) -> float:
        return sum(layer.fwd_flops for layer in self.layers)

    @property
    def active_params(self) -> int:
        """Parameters one token runs through: an expert layer counts top_k of its experts (all of them in a
        dense model, where it equals `params`)."""
        if self.moe is None:
            return self.params
        k = self.moe.top_k
        return sum(layer.params * k // layer.experts if layer.experts else layer.params for layer in self.layers)

    def gradients_backward_order(self) -> list[tuple[int, tuple[int, ...]]]:
        """(layer index, shape) of every gradient tensor in the order backward produces them."""
        out = []
        for i in range(len(self.layers) - 1, -1, -1):
            for shape in reversed(self.layers[i].grad_shapes):
                out.append((i, shape))
        return out


TRAINING_FLOPS_PER_FORWARD = 3.0  # forward (1) + backward (2: input and weight gradients)


def model_flops_per_sample(model: ModelSpec) -> float:
    """Training FLOPs of one sample without recomputation (MFU's numerator, simdist.results.mfu): 3 x the model's
    forward FLOPs, less one forward of each frozen layer (LoRA's base, LayerSpec.frozen), whose backward computes
    no weight gradient."""
    return TRAINING_FLOPS_PER_FORWARD * model.fwd_flops - sum(x.fwd_flops for x in model.layers if x.frozen)
