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
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from enum import StrEnum

from simdist.collectives.schedule import CollectiveOp
from simdist.compute import (ACTIVATION_BYTES, GEMM_KINDS, ComputeCalibration, LayerTime, gemm_shrink_factor,
                             layer_times)
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
                          TpRole.VOCAB_LOSS})


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
    """The tp role of a layer named as simdist.workload.transformer names it (REPLICATED otherwise)."""
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
    if role is TpRole.ROW:  # weight (out, in) -> (out, in / tp); the bias is added after the reduction, whole
        shapes = tuple((s[0], _split(s[1], tp, layer, "input features", True)) if len(s) == 2 else s
                       for s in layer.grad_shapes)
        return replace(layer, params=sum(math.prod(s) for s in shapes), fwd_flops=layer.fwd_flops / tp,
                       input_elems=layer.input_elems / tp, saved_elems=layer.saved_elems / tp, grad_shapes=shapes)
    exact = role is TpRole.COLUMN
    shapes = tuple((_split(s[0], tp, layer, "output features", exact),) + tuple(s[1:]) for s in layer.grad_shapes)
    params = sum(math.prod(s) for s in shapes)
    if role is TpRole.VOCAB_EMBEDDING:
        return replace(layer, params=params, grad_shapes=shapes)
    return replace(layer, params=params, fwd_flops=layer.fwd_flops / tp, output_elems=layer.output_elems / tp,
                   saved_elems=layer.saved_elems / tp if sp else layer.saved_elems, grad_shapes=shapes)


def shard_model(model: ModelSpec, tp: int, sequence_parallel: bool = False) -> ModelSpec:
    """The model as one tp rank holds it; refuses tp > 1 on a model without recognised transformer blocks."""
    assert isinstance(tp, int) and tp >= 1, tp
    roles = [layer_role(x) for x in model.layers]
    assert tp == 1 or TpRole.COLUMN in roles, f"io.rules_parallel: tp {tp} needs transformer blocks ({model.name})"
    layers = tuple(shard_layer(x, r, tp, sequence_parallel) for x, r in zip(model.layers, roles))
    return replace(model, layers=layers) if tp > 1 else model


def _collectives(i: int, layer: LayerSpec, role: TpRole, b: int, act: int, sp: bool) -> list[TpCollective]:
    """Megatron's collectives around layer i (the unsharded layer) for a micro-batch of b samples."""
    AR, RS, AG = CollectiveOp.ALL_REDUCE, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_GATHER
    F, B = Phase.FWD, Phase.BWD
    out_bytes, in_bytes = b * layer.output_elems * act, b * layer.input_elems * act
    n = layer.name

    def c(op, size, phase, when, what):
        return TpCollective(op, float(size), phase, i, when, f"{n} {what}")

    if role is TpRole.ROW or role is TpRole.VOCAB_EMBEDDING:  # forward output is a partial sum
        if not sp:
            return [c(AR, out_bytes, F, When.AFTER, "output partial sums")]
        return [c(RS, out_bytes, F, When.AFTER, "output partial sums to sequence shards"),
                c(AG, out_bytes, B, When.BEFORE, "output gradient from sequence shards")]
    if role is TpRole.COLUMN or role is TpRole.VOCAB_HEAD:  # forward input replicated: its gradient is a sum
        if not sp:
            return [c(AR, in_bytes, B, When.AFTER, "input gradient partial sums")]
        return [c(AG, in_bytes, F, When.BEFORE, "input from sequence shards"),
                c(AG, in_bytes, B, When.BEFORE, "input re-gathered for the weight gradient"),
                c(RS, in_bytes, B, When.AFTER, "input gradient partial sums to sequence shards")]
    if role is TpRole.VOCAB_LOSS:
        size = b * layer.output_elems * LOSS_REDUCTION_BYTES
        return [c(AR, size, F, When.BEFORE, w) for w in ("logit max", "target logit", "sum of exponentials")]
    return []


def tensor_parallel_plan(model: ModelSpec, gpu: GpuSpec, micro_batch: int, precision: str, tp: int,
                         sequence_parallel: bool = False, calibration: ComputeCalibration | None = None,
                         heads: int | None = None, kv_heads: int | None = None,
                         accumulation_bytes: int = 0, reference: ModelSpec | None = None) -> TensorParallelPlan:
    """Per layer: the shard, its forward/backward time per tp rank for `micro_batch` samples, its collectives.

    Each split matmul runs FLOPs / tp at gemm_shrink_factor of the unsplit layer's efficiency. `heads`, when
    and `kv_heads` (grouped-query attention: Megatron-LM splits the key/value groups too), when known, are
    checked to be divisible by tp (the blocks do not record them). tp = 1 gives the model's own layer_times
    and no collectives. `reference`: the model whose matrices the efficiency describes when `model` is already
    cut (context parallelism's s / cp tokens): every GEMM then runs at the shrink factor against it.
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
    for i, (full, part, role, t, f) in enumerate(zip(model.layers, sharded.layers, roles, times, factors)):
        colls = _collectives(i, full, role, b, act, sequence_parallel) if tp > 1 else []
        layers.append(TpLayer(part, role, t, f, tuple(colls)))
    return TensorParallelPlan(tp, sequence_parallel, b, tuple(layers))
