"""LoRA fine-tuning as a model transform: the base model frozen, low-rank adapters beside the targeted linears.

LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models") trains, for a frozen linear layer
y = W x (W: d_out x d_in), the update B A (A: r x d_in, B: d_out x r) added to its output: y = W x + (alpha / r)
B A x. As NeMo / Megatron-Bridge's LoRA runs it (its `LoRA` PEFT on `linear_qkv`, `linear_proj`, `linear_fc1`,
`linear_fc2`, each adapter a `linear_in` (A) and `linear_out` (B) beside the fused Megatron linear), a targeted
layer here becomes four: the frozen base, A, B and the scale-and-add that merges B's output into the base's.
Every other layer with weights is frozen. A frozen layer keeps its weights (read forward, and by its input
gradient) but has no gradient tensor (LayerSpec.frozen, grad_shapes empty), so gradient buckets, the all-reduce
and the optimizer carry the adapters only; a frozen linear saves no input (autograd keeps a linear's input for
its weight gradient only; A saves the same tensor). The adapters run in bf16 beside a Transformer Engine recipe
(Megatron's adapter linears are no TE modules).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from simdist.workload.specs import Kernel, LayerSpec, ModelSpec

# Megatron-Core's names of a transformer block's linear layers (NeMo / Megatron-Bridge LoRA `target_modules`)
# -> the suffixes of this package's layer names that are that linear (a GELU MLP's fc1 / fc2, a gated MLP's
# fused gate_up / down, as Megatron fuses them into linear_fc1 / linear_fc2)
TARGET_SUFFIXES: dict[str, tuple[str, ...]] = {
    "linear_qkv": (".attn.qkv",),
    "linear_proj": (".attn.proj",),
    "linear_fc1": (".mlp.fc1", ".mlp.gate_up"),
    "linear_fc2": (".mlp.fc2", ".mlp.down"),
}
TARGET_GROUPS: dict[str, tuple[str, ...]] = {  # shorthands: PEFT's "all-linear" (every block linear) and attention
    "all-linear": tuple(TARGET_SUFFIXES),
    "attention": ("linear_qkv", "linear_proj"),
}


@dataclass(frozen=True)
class LoraSpec:
    """A LoRA run: the adapters' rank and the Megatron linear names they adapt."""

    rank: int
    targets: tuple[str, ...] = tuple(TARGET_SUFFIXES)

    def __post_init__(self) -> None:
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise ValueError(f"rank: got {self.rank!r}; expected a positive integer")
        unknown = [t for t in self.targets if t not in TARGET_SUFFIXES]
        if unknown or not self.targets:
            raise ValueError(f"targets: got {list(self.targets)!r}; expected some of {', '.join(TARGET_SUFFIXES)}")


def expand_targets(names) -> tuple[str, ...]:
    """Megatron linear names from a list of names and shorthands (all-linear, attention), in TARGET_SUFFIXES order."""
    wanted = set()
    for n in names:
        wanted.update(TARGET_GROUPS.get(n, (n,)))
    unknown = sorted(wanted - set(TARGET_SUFFIXES))
    if unknown:
        raise ValueError(f"targets: unknown {', '.join(unknown)}; expected {', '.join(TARGET_SUFFIXES)} or "
                         f"{', '.join(TARGET_GROUPS)}")
    return tuple(t for t in TARGET_SUFFIXES if t in wanted)


def is_target(layer: LayerSpec, targets: tuple[str, ...]) -> bool:
    """Whether `layer` is a linear with weights that one of `targets` names."""
    return layer.kind == "linear" and layer.params > 0 and bool(layer.grad_shapes) and any(
        layer.name.endswith(suffix) for t in targets for suffix in TARGET_SUFFIXES[t])


def frozen(layer: LayerSpec) -> LayerSpec:
    """The layer with its weights frozen: no gradient tensors; a linear no longer saves its input. A linear
    without weights of its own (an LM head tied to the frozen embedding) is frozen too: no weight gradient."""
    if not layer.params and layer.kind != "linear":
        return layer
    saved = 0 if layer.kind == "linear" else layer.saved_elems
    return replace(layer, frozen=True, grad_shapes=(), saved_elems=saved)


def adapter_layers(base: LayerSpec, rank: int) -> tuple[LayerSpec, LayerSpec, LayerSpec]:
    """A (d_in -> r), B (r -> d_out) and the merge (B's output times alpha / r, added to the base's output) for a
    linear layer `base`, per sample: A 2 t d_in r FLOPs, B 2 t r d_out, the merge t d_out each for the scale and the
    add. A saves its input x (t d_in), B its input A x (t r); the merge's backward scales the gradient (one pass)."""
    d_in = base.grad_shapes[0][1]
    tokens = base.input_elems / d_in
    d_out = base.output_elems / tokens
    r = rank
    a = LayerSpec(f"{base.name}.lora_a", "linear", r * d_in, 2.0 * tokens * d_in * r, tokens * d_in, tokens * r,
                  tokens * d_in, ((r, d_in),), high_precision=True)
    b = LayerSpec(f"{base.name}.lora_b", "linear", int(d_out) * r, 2.0 * tokens * r * d_out, tokens * r,
                  tokens * d_out, tokens * r, ((int(d_out), r),), high_precision=True)
    out = tokens * d_out
    merge = LayerSpec(f"{base.name}.lora_merge", "other", 0, 2.0 * out, 2.0 * out, out, 0.0, (),
                      fwd_kernels=(Kernel(f"{base.name}.lora_scale", "activation", out, 2.0 * out),
                                   Kernel(f"{base.name}.lora_add", "other", out, 3.0 * out)),
                      bwd_kernels=(Kernel(f"{base.name}.lora_scale_bwd", "activation", out, 2.0 * out),))
    return a, b, merge


def apply_lora(model: ModelSpec, spec: LoraSpec) -> ModelSpec:
    """`model` with every weight frozen and a rank-`spec.rank` adapter after each targeted linear (forward order:
    base, A, B, merge). Raises ValueError when no layer is targeted."""
    out: list[LayerSpec] = []
    adapted = 0
    for layer in model.layers:
        out.append(frozen(layer))
        if is_target(layer, spec.targets):
            out.extend(adapter_layers(layer, spec.rank))
            adapted += 1
    if not adapted:
        raise ValueError(f"targets: {', '.join(spec.targets)} name no linear layer of {model.name} (LoRA adapts "
                         "the transformer blocks' linear_qkv, linear_proj, linear_fc1 and linear_fc2)")
    return replace(model, name=f"{model.name}+lora-r{spec.rank}", layers=tuple(out))


def trainable_params(layer: LayerSpec) -> int:
    """A layer's parameters that take gradients, their reduction and optimizer states: none of a frozen layer's
    (whole, or one tensor-parallel shard of it)."""
    return 0 if layer.frozen else layer.params


def trainable_param_count(model: ModelSpec) -> int:
    """Parameters that take gradients and optimizer states (all but frozen layers')."""
    return sum(trainable_params(layer) for layer in model.layers)


def frozen_param_count(model: ModelSpec) -> int:
    """Parameters of frozen layers: kept as weights only."""
    return sum(layer.params for layer in model.layers if layer.frozen)
