"""What a checkpointed transformer block recomputes before its backward, and what it keeps, per
training.recompute mode, for the data-parallel plans (ZeRO / FSDP: sharded_dp).

* `full` keeps each checkpointed block's input and recomputes its whole forward; `training.recompute_every` N
  checkpoints one block in N (blocks N, 2N, ...: torchtitan's "selective layer" AC, selective_ac_option N) and
  leaves the others as they are.
* `selective` recomputes the attention cores (Korthikanti et al. 2022).
* `selective_op` is torchtitan's op-level policy (parallelize_llama.py, `_custom_policy`): inside a block it keeps
  the output of every matmul except every second one in call order (q 1, k 2, v 3, o 4, w1 5, w3 6, w2 7 in a
  Llama block: k, o and w3 are recomputed) and of the attention kernel, and recomputes everything else (norms,
  the activation, residual adds). simdist fuses q, k and v into one `attn.qkv` layer and w1, w3 into
  `mlp.gate_up`; each is split into its matmuls by output width (q's width is the block's hidden size).

`selective` with `training.recompute_modules` is Megatron-Core's --recompute-granularity selective
--recompute-modules (transformer_config.py `recompute_modules`): each listed module's forward runs again before
its backward and its saved tensors are dropped (memory.block_activations splits them per module). MODULE_LAYERS
says which layers of a block each module recomputes, EXPERT_KERNEL_MODULES which kernels of the experts layer, and
MOE_LAYER_PARTS which layers `moe` (the whole MoE layer, collectives included) runs again.
"""
from __future__ import annotations

import math
from dataclasses import replace

from simdist.compute import layer_times
from simdist.scenario import Recompute

_ELEMENTWISE = ("norm", "activation", "other")

# Megatron-Core's recompute_modules that simdist's block model expresses -> the block layers (name suffixes after
# "blocks.N.") whose forward each recomputes: core_attn the attention core; layernorm the input and pre-MLP norms
# (their outputs discarded, CheckpointWithoutOutput); mla_up_proj MLA's up projection (attn.qkv after the latent
# norms); mlp the dense MLP (checkpointed whole, its input kept); shared_experts a MoE block's shared experts (their
# SwiGLU MLP checkpointed whole, its input kept: Megatron-Core's MoELayer.shared_experts_compute).
MODULE_LAYERS: dict[str, tuple[str, ...]] = {
    "core_attn": ("attn.core",),
    "layernorm": ("norm1", "norm2"),
    "mla_up_proj": ("attn.qkv",),
    "mlp": ("mlp.fc1", "mlp.gelu", "mlp.squared_relu", "mlp.fc2", "mlp.gate_up", "mlp.swiglu", "mlp.down"),
    "shared_experts": ("shared_experts",),
}
# moe_act: the routed experts' activation function (a kernel inside simdist's one `experts` layer; output discarded)
EXPERT_KERNEL_MODULES: dict[str, str] = {"moe_act": "activation"}
# moe: the whole MoE layer (Megatron-Core's MoELayer.forward under tensor_parallel.checkpoint, its input kept): the
# block's router, routed and shared experts run their forward again, collectives included (the token dispatch and
# combine), when the backward reaches them (moe_layer_spans; strategies.mp_plan inserts them there). A module
# checkpointed inside it (shared_experts, moe_act) recomputes once more in its own backward, as nested checkpoints do.
MOE_LAYER_MODULE = "moe"
MOE_LAYER_PARTS = ("router", "experts", "shared_experts")
# mlp and shared_experts are checkpointed whole (tensor_parallel.checkpoint around the module's forward, its input
# kept), so their forward runs again with its tp collectives (sequence parallelism's all-gather before the first
# GEMM and reduce-scatter after the last, or the all-reduce) when the backward reaches them (rerun_spans).
WHOLE_MODULES = ("mlp", "shared_experts")
DEFAULT_MODULES = ("core_attn",)  # Megatron-Core's default, and `selective` without the key


def selective_modules(recompute: Recompute, modules) -> tuple[str, ...]:
    """The Megatron modules a run recomputes: the given list under selective (core_attn without one), else none."""
    if Recompute(recompute) is not Recompute.SELECTIVE:
        return ()
    return tuple(modules) if modules else DEFAULT_MODULES


def expert_recompute_kernels(layer, modules: tuple[str, ...]) -> tuple:
    """The kernels of a routed-experts layer that the listed modules recompute (moe_act: its activation)."""
    kinds = {EXPERT_KERNEL_MODULES[m] for m in modules if m in EXPERT_KERNEL_MODULES}
    if not layer.experts or not kinds:
        return ()
    return tuple(k for k in layer.fwd_kernels if k.kind in kinds)


def recompute_seconds(model, tpp, modules: tuple[str, ...], gpu, micro_batch: int, precision: str,
                      calibration) -> dict[int, float]:
    """Layer index -> the forward seconds its backward runs again under the listed modules: a whole layer's
    forward (MODULE_LAYERS), or an experts layer's recomputed kernels timed as compute.layer_times times them
    (a layer of those kernels alone: their rooflines and launches, no weights). Not the modules checkpointed
    whole (WHOLE_MODULES, `moe`), which rerun as forward segments with their collectives (rerun_spans)."""
    out, modules = {}, tuple(m for m in modules if m not in WHOLE_MODULES)  # those rerun as spans (rerun_spans)
    for i, x in enumerate(model.layers):
        if recomputes_layer(x.name, modules):
            out[i] = tpp.layers[i].time.fwd_s
            continue
        shard = tpp.layers[i].shard
        kernels = expert_recompute_kernels(shard, modules)
        if kernels:
            alone = replace(shard, params=0, grad_shapes=(), fwd_kernels=kernels, bwd_kernels=(),
                            fwd_flops=math.fsum(k.flops for k in kernels))
            out[i] = layer_times(replace(model, layers=(alone,)), gpu, micro_batch, precision,
                                 calibration)[0].fwd_s
    return out


def recompute_flops(model, modules: tuple[str, ...]) -> float:
    """Forward FLOPs per sample the listed modules run again (hardware FLOPs' extra forward); under `moe` the MoE
    layers' whole forward once more besides any module recomputed inside them."""
    moe = {i for lo, hi in moe_layer_spans(model, modules).items() for i in range(lo, hi)}
    return math.fsum((x.fwd_flops if recomputes_layer(x.name, modules)
                      else math.fsum(k.flops for k in expert_recompute_kernels(x, modules)))
                     + (x.fwd_flops if i in moe else 0.0) for i, x in enumerate(model.layers))


def moe_layer_spans(model, modules: tuple[str, ...]) -> dict[int, int]:
    """Under `moe`: each MoE layer as [start, end) layer indices (start -> end), a block's router, routed experts
    and shared experts in a row; {} without `moe` in the modules."""
    if MOE_LAYER_MODULE not in modules:
        return {}
    return dict(_block_spans(model, lambda parts: parts[2] in MOE_LAYER_PARTS))


def rerun_spans(model, modules: tuple[str, ...]) -> dict[int, tuple[int, ...]]:
    """Checkpointed modules whose forward, tp collectives included, runs again when the backward reaches their last
    layer: last layer index -> the spans' first layers, outermost first (a MoE layer under `moe` holds its shared
    experts' own checkpoint, which then runs once more: nested checkpoints). The spans: `moe`'s MoE layers
    (moe_layer_spans) and, when listed, each block's dense MLP (`mlp`) and shared experts (`shared_experts`)."""
    spans = list(moe_layer_spans(model, modules).items())
    for m in WHOLE_MODULES:
        if m in modules:
            spans += _block_spans(model, lambda parts: parts[2] in MODULE_LAYERS[m])
    out: dict[int, tuple[int, ...]] = {}
    for lo, hi in sorted(spans):
        out[hi - 1] = out.get(hi - 1, ()) + (lo,)
    return out


def _block_spans(model, belongs) -> list[tuple[int, int]]:
    """Per transformer block, the [start, end) of its layers whose name parts (block kind, index, rest) `belongs`
    says are the module's; they follow each other in the block."""
    blocks: dict[str, list[int]] = {}
    for i, x in enumerate(model.layers):
        parts = x.name.split(".", 2)
        if len(parts) == 3 and parts[0] in ("blocks", "encoder") and belongs(parts):
            blocks.setdefault(f"{parts[0]}.{parts[1]}", []).append(i)
    for ids in blocks.values():
        assert ids == list(range(ids[0], ids[-1] + 1)), "workload: a module's layers in a block follow each other"
    return [(ids[0], ids[-1] + 1) for ids in blocks.values()]


def recomputes_layer(name: str, modules: tuple[str, ...]) -> bool:
    """Whether block layer `name` (e.g. 'blocks.3.norm1') is one a listed module recomputes."""
    parts = name.split(".", 2)
    if len(parts) < 3 or parts[0] not in ("blocks", "encoder"):
        return False
    return any(parts[2] in MODULE_LAYERS.get(m, ()) for m in modules)


def checkpointed(position: int, recompute: Recompute, every: int) -> bool:
    """Whether the block at 1-based `position` among the model's blocks is checkpointed at all."""
    if recompute is Recompute.NONE:
        return False
    return recompute is not Recompute.FULL or position % every == 0


def _matmuls(layer) -> list[float]:
    """The output widths of a linear layer's matmuls in call order (one per 2-D weight; q, k, v for attn.qkv)."""
    shapes = [s for s in layer.grad_shapes if len(s) == 2]
    if layer.name.endswith("attn.qkv") and len(shapes) == 1:
        out, hidden = shapes[0]
        kv = (out - hidden) / 2
        if kv > 0:
            return [float(hidden), kv, kv]
    return [float(s[0]) for s in shapes] or [1.0]


def _op_policy(model, layers) -> dict[int, float]:
    """selective_op: the fraction of each layer's forward that is recomputed (1 for elementwise layers)."""
    recomputed, count = {}, 0
    for i in layers:
        layer = model.layers[i]
        if layer.kind == "linear":
            widths = _matmuls(layer)
            redo = 0.0
            for w in widths:
                count += 1
                if count % 2 == 0:
                    redo += w
            recomputed[i] = redo / math.fsum(widths)
        elif layer.kind in _ELEMENTWISE:
            recomputed[i] = 1.0
    return recomputed


def recomputed_fraction(model, layers, recompute: Recompute) -> dict[int, float]:
    """Layer index -> the fraction of its forward recomputed before a checkpointed block's backward."""
    if recompute is Recompute.FULL:
        return {i: 1.0 for i in layers}
    if recompute is Recompute.SELECTIVE:
        return {i: 1.0 for i in layers if model.layers[i].kind == "attention"}
    if recompute is Recompute.SELECTIVE_OP:
        return _op_policy(model, layers)
    return {}


def kept_elems(model, layers, recompute: Recompute) -> dict[int, float]:
    """Layer index -> activation elements per sample a checkpointed block keeps for backward (the others keep
    their saved_elems): full the block's input; selective the attention cores' inputs; selective_op the kept
    matmuls' outputs, the attention kernels' saved tensors and the block's input."""
    first = layers[0]
    if recompute is Recompute.FULL:
        return {i: (model.layers[i].input_elems if i == first else 0.0) for i in layers}
    if recompute is Recompute.SELECTIVE:
        return {i: model.layers[i].input_elems for i in layers if model.layers[i].kind == "attention"}
    if recompute is Recompute.SELECTIVE_OP:
        redo = _op_policy(model, layers)
        kept = {}
        for i in layers:
            layer = model.layers[i]
            if layer.kind == "linear":
                kept[i] = layer.output_elems * (1.0 - redo[i])
            elif layer.kind in _ELEMENTWISE:
                kept[i] = 0.0
        kept[first] = kept.get(first, 0.0) + model.layers[first].input_elems
        return kept
    return {}
