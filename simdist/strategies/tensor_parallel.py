"""Megatron-style tensor parallelism of transformer blocks: what one tp rank computes and what its group sends.

Each block's QKV and first MLP matmul are split by output columns (input replicated), the attention core by
heads, the attention projection and second MLP matmul by input rows, so each half-block needs one all_reduce
of the b x s x h activations in forward (after the row-parallel matmul) and one in backward (of the input
gradient, before the column-parallel matmul) — Shoeybi et al. 2019, "Megatron-LM", section 3. With sequence
parallelism (Korthikanti et al. 2022, section 4.2.2) each all_reduce becomes a reduce_scatter and an
all_gather, the norms and residual adds run on s / tp tokens, and the column-parallel matmuls gather their
sequence-sharded input a second time in backward for the weight gradient (as Megatron-LM's linear layers do).
The token embedding, LM head and loss are vocabulary-parallel. Layers are recognised by the names
simdist.workload.transformer gives them; other layers run replicated on every tp rank.

LoRA's adapters (simdist.workload.lora: `.lora_a`, `.lora_b`, `.lora_merge` after a frozen block linear) run as
Megatron-Bridge's ParallelLinearAdapter (src/megatron/bridge/peft/utils.py, ported from NeMo's
nemo/collections/nlp/modules/common/megatron/adapters/parallel_adapters.py) runs them (`_lora_collectives`). A
frozen linear has no weight-gradient GEMM, so it re-gathers no input for one; layers before the first trainable
layer have no backward and their backward collectives are dropped, as are the input-gradient collectives of the
first trainable layer (compute.first_trainable_layer).
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, replace
from enum import StrEnum

from simdist.collectives.schedule import CollectiveOp
from simdist.compute import (ACTIVATION_BYTES, GEMM_KINDS, ComputeCalibration, LayerTime, first_trainable_layer,
                             gemm_shrink_factor, layer_times)
from simdist.hardware.specs import GpuSpec
from simdist.workload.specs import LayerSpec, ModelSpec

LOSS_REDUCTION_BYTES = 4  # vocab-parallel cross-entropy reduces fp32 max, target logit and sum of exponentials
LOSS_REDUCTIONS = 3


class TpRole(StrEnum):
    """How a layer is split over the tp group."""

    COLUMN = "column"  # weight split by output features; input replicated (QKV, fc1, gate_up)
    ROW = "row"  # weight split by input features; output partial sums reduced (attn.proj, fc2, down)
    HEADS = "heads"  # attention core: heads split
    SHARDED = "sharded"  # elementwise on the split hidden (GELU, SwiGLU)
    SEQUENCE = "sequence"  # norms, residual adds: replicated, or over s / tp tokens with sequence parallelism
    VOCAB_EMBEDDING = "vocab_embedding"  # token embedding split by vocabulary rows
    VOCAB_HEAD = "vocab_head"  # LM head split by vocabulary columns
    VOCAB_LOSS = "vocab_loss"  # cross-entropy over the split logits
    REPLICATED = "replicated"  # everything else: the whole layer on every tp rank
    # LoRA adapters (Megatron-Bridge's ParallelLinearAdapter) beside a column-parallel base (linear_qkv, linear_fc1):
    LORA_IN_COLUMN = "lora_in_column"  # A: ColumnParallelLinear h -> r, weight (r / tp, h), output gathered to r
    LORA_OUT_COLUMN = "lora_out_column"  # B: ColumnParallelLinear r -> out, weight (out / tp, r), output split
    # ... and beside a row-parallel base (linear_proj, linear_fc2):
    LORA_IN_ROW = "lora_in_row"  # A: RowParallelLinear in -> r, weight (r, in / tp), output partial sums reduced
    LORA_OUT_ROW = "lora_out_row"  # B: ColumnParallelLinear r -> out, weight (out / tp, r), output gathered to out


class Phase(StrEnum):
    FWD = "fwd"
    BWD = "bwd"


class When(StrEnum):
    BEFORE = "before"  # the collective's result is the layer's input in that phase
    AFTER = "after"  # it reduces the layer's output in that phase


_BLOCK_PARTS: dict[str, TpRole] = {
    "norm1": TpRole.SEQUENCE, "norm2": TpRole.SEQUENCE, "attn.residual": TpRole.SEQUENCE,
    "mlp.residual": TpRole.SEQUENCE, "attn.qkv": TpRole.COLUMN, "mlp.fc1": TpRole.COLUMN,
    "mlp.gate_up": TpRole.COLUMN, "attn.core": TpRole.HEADS, "mlp.gelu": TpRole.SHARDED,
    "mlp.swiglu": TpRole.SHARDED, "attn.proj": TpRole.ROW, "mlp.fc2": TpRole.ROW, "mlp.down": TpRole.ROW,
    "attn.qk_norm": TpRole.SHARDED,  # Qwen3's per-head query and key norms: on the rank's heads (elementwise)
}
_OTHER_PARTS: dict[str, TpRole] = {
    "embed.tokens": TpRole.VOCAB_EMBEDDING, "embed.words": TpRole.VOCAB_EMBEDDING,
    "lm_head": TpRole.VOCAB_HEAD, "mlm.decoder": TpRole.VOCAB_HEAD,
    "loss": TpRole.VOCAB_LOSS, "mlm.loss": TpRole.VOCAB_LOSS, "final_norm": TpRole.SEQUENCE,
}
_BLOCK_RE = re.compile(r"^(?:blocks|encoder)\.\d+\.(?P<part>.+)$")
# DeepSeek-V3's multi-token-prediction modules (Megatron-Core's MultiTokenPredictionLayer): the model's own
# vocab-parallel embedding and output layer, its norms on the sequence as final_norm
_MTP_RE = re.compile(r"^mtp\.\d+\.(?P<part>.+)$")
_MTP_PARTS: dict[str, TpRole] = {"embed": TpRole.VOCAB_EMBEDDING, "enorm": TpRole.SEQUENCE,
                                 "hnorm": TpRole.SEQUENCE, "norm": TpRole.SEQUENCE, "head": TpRole.VOCAB_HEAD,
                                 "loss": TpRole.VOCAB_LOSS}
_SPLIT_ROLES = frozenset({TpRole.COLUMN, TpRole.ROW, TpRole.HEADS, TpRole.SHARDED, TpRole.VOCAB_HEAD,
                          TpRole.VOCAB_LOSS, TpRole.LORA_IN_COLUMN, TpRole.LORA_OUT_COLUMN, TpRole.LORA_IN_ROW,
                          TpRole.LORA_OUT_ROW})
_LORA_RE = re.compile(r"^(?P<base>.+)\.lora_(?P<part>a|b|merge)$")
_LORA_ROLES = {(TpRole.COLUMN, "a"): TpRole.LORA_IN_COLUMN, (TpRole.COLUMN, "b"): TpRole.LORA_OUT_COLUMN,
               (TpRole.ROW, "a"): TpRole.LORA_IN_ROW, (TpRole.ROW, "b"): TpRole.LORA_OUT_ROW,
               # the merge adds B's output to the base's: split like a column output, or (row) like the residual
               (TpRole.COLUMN, "merge"): TpRole.SHARDED, (TpRole.ROW, "merge"): TpRole.SEQUENCE}


@dataclass(frozen=True)
class TpCollective:
    """One collective on the tp group: `size_bytes` in nccl-tests' convention (the full, unsharded tensor)."""

    op: CollectiveOp
    size_bytes: float
    phase: Phase
    layer: int  # index of the layer (in forward order) it is attached to
    when: When
    what: str  # e.g. 'blocks.0.attn.proj output partial sums'


@dataclass(frozen=True)
class TpLayer:
    """One layer as a tp rank runs it: its shard, its time for the micro-batch, its collectives."""

    shard: LayerSpec
    role: TpRole
    time: LayerTime
    efficiency_factor: float  # gemm_shrink_factor of the split matmul (1 when nothing shrinks)
    collectives: tuple[TpCollective, ...]


@dataclass(frozen=True)
class TensorParallelPlan:
    """Per layer, what each rank of a tp group computes and communicates for one micro-batch."""

    tp: int
    sequence_parallel: bool
    micro_batch: int
    layers: tuple[TpLayer, ...]

    @property
    def fwd_s(self) -> float:
        return math.fsum(x.time.fwd_s for x in self.layers)

    @property
    def bwd_s(self) -> float:
        return math.fsum(x.time.bwd_s for x in self.layers)

    @property
    def layer_costs_s(self) -> list[float]:
        """Forward + backward seconds of each layer on one tp rank: what pipeline stages are balanced on."""
        return [x.time.total_s for x in self.layers]

    @property
    def collectives(self) -> tuple[TpCollective, ...]:
        return tuple(c for x in self.layers for c in x.collectives)

    def bytes_by_op(self, phase: "Phase | str | None" = None) -> dict[CollectiveOp, float]:
        """Total size_bytes per op (in one phase, or both)."""
        out: dict[CollectiveOp, float] = {}
        for c in self.collectives:
            if phase is None or c.phase == Phase(phase):
                out[c.op] = out.get(c.op, 0.0) + c.size_bytes
        return out


def layer_role(layer: LayerSpec) -> TpRole:
    """The tp role of a layer named as simdist.workload.transformer names it (REPLICATED otherwise); a LoRA
    adapter's from its base linear's."""
    lora = _LORA_RE.match(layer.name)
    if lora:
        base = layer_role(replace(layer, name=lora.group("base")))
        return _LORA_ROLES.get((base, lora.group("part")), TpRole.REPLICATED)
    m = _BLOCK_RE.match(layer.name)
    if m and m.group("part") in _BLOCK_PARTS:
        return _BLOCK_PARTS[m.group("part")]
    m = _MTP_RE.match(layer.name)
    if m and m.group("part") in _MTP_PARTS:
        return _MTP_PARTS[m.group("part")]
    return _OTHER_PARTS.get(layer.name, TpRole.REPLICATED)


def _split(n: int, tp: int, layer: LayerSpec, what: str, exact: bool) -> int:
    assert not (exact and n % tp), f"io.rules_parallel: tp {tp} divides {layer.name}'s {what} ({n})"
    return -(-n // tp)  # vocabularies are padded to a multiple of tp, as Megatron-LM does


def shard_layer(layer: LayerSpec, role: TpRole, tp: int, sequence_parallel: bool = False) -> LayerSpec:
    """The part of `layer` one of `tp` ranks holds and computes (per sample)."""
    if tp == 1:
        return layer
    sp = sequence_parallel
    if role is TpRole.REPLICATED or (role is TpRole.SEQUENCE and not sp):
        return layer
    if role in (TpRole.SEQUENCE, TpRole.HEADS, TpRole.SHARDED, TpRole.VOCAB_LOSS):
        return replace(layer, fwd_flops=layer.fwd_flops / tp, input_elems=layer.input_elems / tp,
                       output_elems=layer.output_elems if role is TpRole.VOCAB_LOSS else layer.output_elems / tp,
                       saved_elems=layer.saved_elems / tp, **layer.scaled_kernels(1.0 / tp))
    if role in (TpRole.ROW, TpRole.LORA_IN_ROW):  # weight (out, in) -> (out, in / tp); a bias whole (added after
        # the reduction)
        shapes = tuple((s[0], _split(s[1], tp, layer, "input features", True)) if len(s) == 2 else s
                       for s in layer.grad_shapes)
        return replace(layer, params=_shard_params(layer, shapes, tp), fwd_flops=layer.fwd_flops / tp,
                       input_elems=layer.input_elems / tp, saved_elems=layer.saved_elems / tp, grad_shapes=shapes)
    exact = role is not TpRole.VOCAB_EMBEDDING and role is not TpRole.VOCAB_HEAD
    shapes = tuple((_split(s[0], tp, layer, "output features", exact),) + tuple(s[1:]) for s in layer.grad_shapes)
    params = _shard_params(layer, shapes, tp)
    if role is TpRole.VOCAB_EMBEDDING:
        return replace(layer, params=params, grad_shapes=shapes)
    # an adapter keeps its whole input (A beside a column base: the gathered layernorm output, even with sequence
    # parallelism; B: the rank-r activations)
    split_saved = sp and role in (TpRole.COLUMN, TpRole.VOCAB_HEAD)
    return replace(layer, params=params, fwd_flops=layer.fwd_flops / tp, output_elems=layer.output_elems / tp,
                   saved_elems=layer.saved_elems / tp if split_saved else layer.saved_elems, grad_shapes=shapes)


def _shard_params(layer: LayerSpec, shapes, tp: int) -> int:
    """A weight-split layer's parameters on one rank: its gradient tensors' elements. A frozen layer keeps no
    gradient shapes (LayerSpec.frozen), so its weights split evenly (a row-parallel bias, whole on every rank in
    Megatron, then counts split: h (1 - 1/tp) elements per layer)."""
    return -(-layer.params // tp) if layer.frozen else sum(math.prod(s) for s in shapes)


def shard_model(model: ModelSpec, tp: int, sequence_parallel: bool = False) -> ModelSpec:
    """The model as one tp rank holds it; refuses tp > 1 on a model without recognised transformer blocks."""
    assert isinstance(tp, int) and tp >= 1, tp
    roles = [layer_role(x) for x in model.layers]
    assert tp == 1 or TpRole.COLUMN in roles, f"io.rules_parallel: tp {tp} needs transformer blocks ({model.name})"
    layers = tuple(shard_layer(x, r, tp, sequence_parallel) for x, r in zip(model.layers, roles))
    return replace(model, layers=layers) if tp > 1 else model


def _collectives(i: int, layer: LayerSpec, role: TpRole, b: int, act: int, sp: bool, backward: bool = True,
                 dgrad: bool = True, overlap: bool = False) -> list[TpCollective]:
    """Megatron's collectives around layer i (the unsharded layer) for a micro-batch of b samples. `backward`:
    the layer runs a backward (it is not before the first trainable layer); `dgrad`: it computes an input
    gradient (it is after it); `overlap`: training.tp_comm_overlap (LoRA's A then gathers its own input)."""
    AR, RS, AG = CollectiveOp.ALL_REDUCE, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_GATHER
    F, B = Phase.FWD, Phase.BWD
    out_bytes, in_bytes = b * layer.output_elems * act, b * layer.input_elems * act
    n = layer.name

    def c(op, size, phase, when, what):
        return TpCollective(op, float(size), phase, i, when, f"{n} {what}")

    out = []
    if role in _LORA_COLLECTIVE_ROLES:
        out = _lora_collectives(c, role, out_bytes, in_bytes, sp, overlap, dgrad)
    elif role is TpRole.ROW or role is TpRole.VOCAB_EMBEDDING:  # forward output is a partial sum
        if not sp:
            out = [c(AR, out_bytes, F, When.AFTER, "output partial sums")]
        else:
            out = [c(RS, out_bytes, F, When.AFTER, "output partial sums to sequence shards"),
                   c(AG, out_bytes, B, When.BEFORE, "output gradient from sequence shards")]
    elif role is TpRole.COLUMN or role is TpRole.VOCAB_HEAD:  # forward input replicated: its gradient is a sum
        if not sp:
            out = [c(AR, in_bytes, B, When.AFTER, "input gradient partial sums")] if dgrad else []
        else:  # a frozen layer has no weight gradient to re-gather its input for
            out = [c(AG, in_bytes, F, When.BEFORE, "input from sequence shards")]
            if not layer.frozen:
                out.append(c(AG, in_bytes, B, When.BEFORE, "input re-gathered for the weight gradient"))
            out += [c(RS, in_bytes, B, When.AFTER, "input gradient partial sums to sequence shards")] if dgrad else []
    elif role is TpRole.VOCAB_LOSS:
        size = b * layer.output_elems * LOSS_REDUCTION_BYTES
        out = [c(AR, size, F, When.BEFORE, w) for w in ("logit max", "target logit", "sum of exponentials")]
    return [x for x in out if backward or x.phase is F]


_LORA_COLLECTIVE_ROLES = frozenset({TpRole.LORA_IN_COLUMN, TpRole.LORA_OUT_COLUMN, TpRole.LORA_IN_ROW,
                                    TpRole.LORA_OUT_ROW})


def _lora_collectives(c, role: TpRole, out_bytes: float, in_bytes: float, sp: bool, overlap: bool,
                      dgrad: bool) -> list[TpCollective]:
    """An adapter's tp collectives as Megatron-Bridge's ParallelLinearAdapter runs them (peft/utils.py; the
    adapter's own linears run with sequence_parallel off). Beside a column base, A is a ColumnParallelLinear with
    gather_output: its r / tp outputs all_gathered (forward); its input is the layernorm output, which Transformer
    Engine returns already gathered under sequence parallelism (return_layernorm_output_gathered; with
    tp_comm_overlap the adapter all_gathers it itself, and reduce_scatters its gradient back), else replicated,
    its gradient then all_reduced (copy_to_tensor_model_parallel_region). B (ColumnParallelLinear, output split
    like the base's) all_reduces its input gradient (r wide). Beside a row base, A is a RowParallelLinear on the
    base's split input: its r-wide partial sums all_reduced; B is a ColumnParallelLinear with gather_output: its
    out / tp outputs all_gathered to the full width, its r-wide input gradient all_reduced, and under sequence
    parallelism the output scattered to sequence shards (scatter_to_sequence_parallel_region: all_gather of the
    output gradient in backward)."""
    AR, RS, AG = CollectiveOp.ALL_REDUCE, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_GATHER
    F, B = Phase.FWD, Phase.BWD
    if role is TpRole.LORA_IN_COLUMN:
        out = [c(AG, in_bytes, F, When.BEFORE, "adapter input from sequence shards")] if sp and overlap else []
        out.append(c(AG, out_bytes, F, When.AFTER, "rank-r output gathered"))
        if dgrad and not sp:
            out.append(c(AR, in_bytes, B, When.AFTER, "adapter input gradient partial sums"))
        elif dgrad and overlap:
            out.append(c(RS, in_bytes, B, When.AFTER, "adapter input gradient to sequence shards"))
        return out
    if role is TpRole.LORA_OUT_COLUMN:
        return [c(AR, in_bytes, B, When.AFTER, "rank-r input gradient partial sums")]
    if role is TpRole.LORA_IN_ROW:
        return [c(AR, out_bytes, F, When.AFTER, "rank-r output partial sums")]
    out = [c(AG, out_bytes, F, When.AFTER, "output gathered to the full width")]
    if sp:
        out.append(c(AG, out_bytes, B, When.BEFORE, "output gradient from sequence shards"))
    return out + [c(AR, in_bytes, B, When.AFTER, "rank-r input gradient partial sums")]


@functools.lru_cache(maxsize=16)  # by value: a plan's or sweep's candidates of one (tp, micro-batch, ...) share it
def tensor_parallel_plan(model: ModelSpec, gpu: GpuSpec, micro_batch: int, precision: str, tp: int,
                         sequence_parallel: bool = False, calibration: ComputeCalibration | None = None,
                         heads: int | None = None, kv_heads: int | None = None,
                         accumulation_bytes: int = 0, reference: ModelSpec | None = None,
                         tp_comm_overlap: bool = False) -> TensorParallelPlan:
    """Per layer: the shard, its forward/backward time per tp rank for `micro_batch` samples, its collectives.

    Each split matmul runs FLOPs / tp at gemm_shrink_factor of the unsplit layer's efficiency. `heads`, when
    and `kv_heads` (grouped-query attention: Megatron-LM splits the key/value groups too), when known, are
    checked to be divisible by tp (the blocks do not record them). tp = 1 gives the model's own layer_times
    and no collectives. `reference`: the model whose matrices the efficiency describes when `model` is already
    cut (context parallelism's s / cp tokens): every GEMM then runs at the shrink factor against it.
    `tp_comm_overlap`: training.tp_comm_overlap, which changes where LoRA's adapters gather their input.
    Memoised on its arguments' values (all frozen): the candidates of a plan that differ only in dp, ZeRO or the
    schedule pay each layer's shard, time and collectives once per process.
    """
    for count, what in ((heads, "attention heads"), (kv_heads, "key/value heads")):
        assert count is None or tp == 1 or count % tp == 0, f"io.rules_parallel: tp {tp} divides the {count} {what}"
    assert not (sequence_parallel and tp == 1), "io.resolve: sequence_parallel needs tp > 1"
    sharded = shard_model(model, tp, sequence_parallel)
    roles = [layer_role(x) for x in model.layers]
    b = micro_batch
    factors = []
    cut = reference is not None
    for full, part, role in zip((reference or model).layers, sharded.layers, roles):
        split = (cut or tp > 1 and role in _SPLIT_ROLES) and full.kind in GEMM_KINDS
        factors.append(gemm_shrink_factor(full.fwd_flops * b, part.fwd_flops * b, gpu, precision, calibration)
                       if split else 1.0)
    times = layer_times(sharded, gpu, b, precision, calibration,
                        efficiency_factors=factors if tp > 1 or cut else None,
                        accumulation_bytes=accumulation_bytes)  # per micro-batch gradient accumulation (compute.py)
    act = ACTIVATION_BYTES[str(precision)]
    layers = []
    first = first_trainable_layer(model)
    for i, (full, part, role, t, f) in enumerate(zip(model.layers, sharded.layers, roles, times, factors)):
        colls = _collectives(i, full, role, b, act, sequence_parallel, i >= first, i > first,
                             tp_comm_overlap) if tp > 1 else []
        layers.append(TpLayer(part, role, t, f, tuple(colls)))
    return TensorParallelPlan(tp, sequence_parallel, b, tuple(layers))
