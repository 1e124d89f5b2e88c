"""Sharded data parallelism (ZeRO stages 1-3, FSDP = stage 3): the collectives of one step over the dp group.

ZeRO-1 and -2 (Rajbhandari et al. 2020, section 7) reduce_scatter each unit's gradients as backward produces
them (each rank keeps the reduced shard it updates) and all_gather the updated parameters after the optimizer
step: the same 2Ψ wire volume as DDP's all_reduce. They differ in memory only (stage 2 frees the gradients
outside its shard). ZeRO-3 / FSDP all_gather each unit's parameters before its forward and again before its
backward (resharded in between), each prefetched one unit ahead so the gather overlaps the previous unit's
compute, and reduce_scatter its gradients after its backward: 3Ψ, 1.5x DDP. Units are FSDP's transformer
wrapping: one per block, plus a root unit of the remaining layers (embeddings, final norm, head).
model_parallel_memory puts ZeRO, tensor, sequence and pipeline parallelism together into memory per GPU.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Sequence

from simdist.collectives.schedule import CollectiveOp
from simdist.compute import ACTIVATION_BYTES
from simdist.hardware.specs import GpuSpec
from simdist.low_precision import gathered_param_bytes
from simdist.memory import (MemoryEstimate, TransformerShape, check_fits, estimate_parallel_memory,
                            in_flight_micro_batches, layer_activation_bytes, quantized_copy_bytes,
                            saved_gemm_input_bytes)
from simdist.scenario import PipelineSchedule, Recompute
from simdist.strategies.pipeline_schedule import balance_stages
from simdist.strategies.recompute_policy import selective_modules
from simdist.strategies.tensor_parallel import TpRole, layer_role, shard_model
from simdist.workload.lora import trainable_params
from simdist.workload.specs import ModelSpec

_BLOCK = re.compile(r"^((?:blocks|encoder)\.\d+)\.")


class ShardPhase(StrEnum):
    FWD = "fwd"
    BWD = "bwd"
    STEP = "step"  # after the optimizer step


@dataclass(frozen=True)
class ShardUnit:
    """A group of layers whose parameters are gathered and sharded together (an FSDP unit)."""

    name: str
    layers: tuple[int, ...]  # layer indices, forward order
    params: int


@dataclass(frozen=True)
class ShardCollective:
    """One collective on the dp group; `size_bytes` is the full, unsharded tensor (nccl-tests convention).

    It is needed before (`phase`, `unit`) runs — or, for reduce_scatters, follows it — and may be issued as
    soon as `issue_with` (phase, unit) starts: the one-ahead prefetch. None: when its dependency is met.
    """

    op: CollectiveOp
    size_bytes: float
    phase: ShardPhase
    unit: int | None
    what: str
    issue_with: tuple[ShardPhase, int] | None = None


def fsdp_units(model: ModelSpec) -> tuple[ShardUnit, ...]:
    """One unit per transformer block (in forward order) and a root unit of every other layer with params.

    A model without recognised blocks is one unit per layer with parameters."""
    blocks: dict[str, list[int]] = {}
    root: list[int] = []
    for i, layer in enumerate(model.layers):
        m = _BLOCK.match(layer.name)
        if m:
            blocks.setdefault(m.group(1), []).append(i)
        elif layer.params:
            root.append(i)
    if not blocks:
        return tuple(ShardUnit(x.name, (i,), x.params) for i, x in enumerate(model.layers) if x.params)
    units = [ShardUnit(k, tuple(v), sum(model.layers[i].params for i in v)) for k, v in blocks.items()]
    if root:
        units.insert(0, ShardUnit("root", tuple(root), sum(model.layers[i].params for i in root)))
    return tuple(units)


def zero_collectives(zero: int, units: Sequence[ShardUnit], dp: int, param_bytes: int,
                     grad_bytes: int) -> tuple[ShardCollective, ...]:
    """The dp-group collectives of one step for ZeRO stage `zero` (0 = DDP's all_reduce, for comparison).

    Parameters are gathered in their compute dtype (`param_bytes`), gradients reduced in `grad_bytes`.
    Backward visits the units in reverse. dp = 1 has nothing to communicate.
    """
    assert zero in (0, 1, 2, 3), f"the schema admits ZeRO stages 0-3, not {zero}"
    assert isinstance(dp, int) and dp >= 1, dp
    if dp == 1:
        return ()
    AR, RS, AG = CollectiveOp.ALL_REDUCE, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_GATHER
    F, B, S = ShardPhase.FWD, ShardPhase.BWD, ShardPhase.STEP
    n = len(units)
    has_root = n > 1 and units[0].name == "root"
    # backward needs the root unit first (the LM head runs first) and finishes its gradients last (embeddings)
    blocks_back = [j for j in reversed(range(n)) if not (has_root and j == 0)]
    gather_back = ([0] if has_root else []) + blocks_back
    out: list[ShardCollective] = []
    if zero == 3:
        for j in range(n):
            out.append(ShardCollective(AG, units[j].params * param_bytes, F, j, f"{units[j].name} parameters",
                                       (F, j - 1) if j > 0 else None))
        for k, j in enumerate(gather_back):
            out.append(ShardCollective(AG, units[j].params * param_bytes, B, j, f"{units[j].name} parameters",
                                       (B, gather_back[k - 1]) if k > 0 else None))
    grad_op = AR if zero == 0 else RS
    for j in blocks_back + ([0] if has_root else []):
        out.append(ShardCollective(grad_op, units[j].params * grad_bytes, B, j, f"{units[j].name} gradients"))
    if zero in (1, 2):
        out.append(ShardCollective(AG, sum(u.params for u in units) * param_bytes, S, None,
                                   "updated parameters"))
    return tuple(out)


RING_SEND_FACTOR = {
    CollectiveOp.ALL_REDUCE: lambda n: 2 * (n - 1) / n,
    CollectiveOp.REDUCE_SCATTER: lambda n: (n - 1) / n,
    CollectiveOp.ALL_GATHER: lambda n: (n - 1) / n,
}


def wire_bytes_per_rank(collectives: Sequence[ShardCollective], dp: int) -> float:
    """Bytes each rank sends for these collectives with bandwidth-optimal (ring) algorithms."""
    return math.fsum(RING_SEND_FACTOR[c.op](dp) * c.size_bytes for c in collectives)


def zero3_live_param_bytes(units: Sequence[ShardUnit], param_bytes: int) -> float:
    """Peak bytes of gathered (unsharded) parameters under ZeRO-3: a unit plus the next one being prefetched."""
    sizes = [u.params * param_bytes for u in units]
    if len(sizes) < 2:
        return float(sum(sizes))
    return float(max(a + b for a, b in zip(sizes, sizes[1:])))


# ----------------------------------------------------------------------------- memory of a dp x tp x pp layout


def _rank_layers(chunks: Sequence[tuple[int, int]], pp: int, rank: int) -> list[int]:
    return [i for c in range(rank, len(chunks), pp) for i in range(*chunks[c])]


def model_parallel_memory(model: ModelSpec, gpu: GpuSpec, *, micro_batch: int, micro_batches: int, precision: str,
                          optimizer: str, grad_dtype: str = "fp32", dp: int = 1, tp: int = 1, pp: int = 1,
                          zero: int = 0, sequence_parallel: bool = False,
                          recompute: "Recompute | str" = Recompute.NONE,
                          schedule: "PipelineSchedule | str" = PipelineSchedule.ONE_F_ONE_B, virtual_stages: int = 1,
                          shape: TransformerShape | None = None,
                          chunks: Sequence[tuple[int, int]] | None = None,
                          extra_buffer_bytes: float = 0.0,
                          fp8_param_gather: bool = False,
                          recompute_modules: tuple[str, ...] = ()) -> tuple[MemoryEstimate, ...]:
    """Peak memory of a GPU on each pipeline rank (index = pp rank), for its tp shard of its layers.
    Selective recomputation drops the tensors of Megatron-Core's `recompute_modules` (default core_attn;
    recompute_policy), `mlp` in the blocks with a dense MLP only, `shared_experts` and `moe` in MoE blocks only;
    a MoE block counts at its own MLP width (moe_block_shape: DeepSeek-V3's first blocks are dense).

    `chunks` are the pp x v contiguous layer ranges (virtual stage k on rank k % pp); default: balanced by
    forward FLOPs. Transformer blocks use layer_activation_bytes (needs `shape`); other layers keep their
    shards' saved tensors. Under pp > 1 with a tied LM head, the rank holding the head keeps its own copy of
    the word embedding, as Megatron-LM does. `precision` counts as the GPU runs it (fp8 without fp8 units is
    fp16); a Transformer Engine recipe saves its GEMMs' inputs quantized and keeps quantized weight copies
    (memory.block_activations, memory.model_state_bytes). Check each with memory.check_fits.
    """
    rc = Recompute(recompute)
    assert shape is not None or rc is Recompute.NONE, "io.rules_parallel: recomputation needs attention blocks"
    modules = selective_modules(rc, recompute_modules)
    v = virtual_stages
    shard = shard_model(model, tp, sequence_parallel)
    if chunks is None:
        chunks = balance_stages([x.fwd_flops for x in shard.layers], pp * v)
    if len(chunks) != pp * v:
        raise ValueError(f"chunks: got {len(chunks)} ranges; expected pp x virtual_stages = {pp * v}")
    precision = gpu.runs_as(str(precision))
    act = ACTIVATION_BYTES[precision]
    gemm_input = saved_gemm_input_bytes(precision, act)
    param_bytes = gathered_param_bytes(precision, fp8_param_gather)  # ZeRO-3's gathered units
    roles = [layer_role(x) for x in model.layers]
    units = fsdp_units(shard)
    embed = next((i for i, r in enumerate(roles) if r is TpRole.VOCAB_EMBEDDING), None)
    # a weightless vocab layer reads the embedding's weights: a tied head, and an MTP module's embedding (Megatron-
    # Core builds the embedding on the MTP stage too, tied to the first stage's); an MTP head shares an untied head's
    # weights, which the last stage holds already
    untied = any(r is TpRole.VOCAB_HEAD and x.params for r, x in zip(roles, model.layers))
    out = []
    for r in range(pp):
        mine = _rank_layers(chunks, pp, r)
        held = list(mine)
        reads_embed = [i for i in mine if shard.layers[i].params == 0 and (
            roles[i] is TpRole.VOCAB_EMBEDDING or (roles[i] is TpRole.VOCAB_HEAD and not untied))]
        if pp > 1 and reads_embed and embed is not None and embed not in mine:
            held.append(embed)  # its own copy of the embedding
        # LoRA: frozen weights are kept without gradients or optimizer states (memory.model_state_bytes)
        params = float(sum(trainable_params(shard.layers[i]) for i in held))
        frozen = float(sum(shard.layers[i].params for i in held)) - params
        block_layers = [i for i in mine if shape is not None and _BLOCK.match(model.layers[i].name)]
        blocks = sum(1 for i in block_layers if roles[i] is TpRole.HEADS)
        per_layer = layer_activation_bytes(shape, micro_batch, tp, sequence_parallel, rc, act, gemm_input,
                                           modules) if shape else 0.0
        others = set(mine) - set(block_layers)
        acts = blocks * per_layer + micro_batch * act * math.fsum(shard.layers[i].saved_elems for i in others)
        moe_blocks = len({_BLOCK.match(model.layers[i].name).group(1) for i in block_layers
                          if model.layers[i].experts})
        moe_shape, moe_layer = shape, per_layer
        if moe_blocks:  # MoE blocks keep their MLP's tensors under `mlp`, drop their shared experts' under
            # `shared_experts` and their MoE layer's inside under `moe` (memory.BlockActivations.under)
            moe_shape = moe_block_shape(shape, model.moe)
            moe_layer = layer_activation_bytes(moe_shape, micro_batch, tp, sequence_parallel, rc, act, gemm_input,
                                               modules, dense_mlp=False)
            acts += moe_blocks * (moe_layer - per_layer)
        if rc is not Recompute.FULL:  # (full recomputation keeps each block's input only, adapters or not)
            acts += micro_batch * lora_saved_delta(model, shard, roles, block_layers, sequence_parallel, tp, act,
                                                   gemm_input)
        live = max((shard.layers[i].input_elems + shard.layers[i].output_elems for i in mine), default=0.0)
        transient = micro_batch * act * live
        if blocks and rc is not Recompute.NONE:  # the layer being recomputed holds its full activations
            dense = layer_activation_bytes(shape, micro_batch, tp, sequence_parallel, Recompute.NONE, act,
                                           gemm_input) - per_layer if blocks > moe_blocks else 0.0
            moe = layer_activation_bytes(moe_shape, micro_batch, tp, sequence_parallel, Recompute.NONE, act,
                                         gemm_input) - moe_layer if moe_blocks else 0.0
            transient += max(dense, moe)
        here = [u for u in units if set(u.layers) <= set(mine)]
        gathered = zero3_live_param_bytes(here, param_bytes)
        flight = in_flight_micro_batches(schedule, pp, micro_batches, r, v)
        out.append(estimate_parallel_memory(
            gpu, params=params, precision=precision,
            quantized_copy_bytes=quantized_copy_bytes([shard.layers[i] for i in mine], precision, gpu),
            optimizer=optimizer, grad_dtype=grad_dtype, zero=zero, dp=dp, frozen_params=frozen,
            activation_bytes_per_micro_batch=acts, in_flight=flight, transient_bytes=transient,
            gathered_param_bytes=gathered, extra_buffer_bytes=extra_buffer_bytes,
            what=f"pipeline stage {r}" if pp > 1 else ""))
    return tuple(out)


def moe_block_shape(shape: TransformerShape, moe) -> TransformerShape:
    """A MoE block's shape: its tokens' SwiGLU activations through top_k routed and the shared experts (the block
    formula's MLP width), whatever block the model's shape was read from (mp_plan.transformer_shape: the first)."""
    f = moe.expert_ffn_hidden
    return replace(shape, mlp="swiglu", ffn_hidden=(moe.top_k + moe.shared_experts) * f, routed_ffn=moe.top_k * f,
                   shared_ffn=moe.shared_experts * f)


def lora_saved_delta(model: ModelSpec, shard: ModelSpec, roles, block_layers, sequence_parallel: bool, tp: int,
                     activation_bytes: float, gemm_input_bytes: float) -> float:
    """Bytes per sample that LoRA changes in the blocks' saved activations on one tp rank (0 without frozen
    layers): a frozen block linear saves no input (memory.block_activations counts q x its input: the column
    layers' whole, / tp with sequence parallelism, the row layers' / tp), and each adapter saves its own input
    in bf16 as tensor_parallel shards it (A beside a column base the gathered layernorm output, whole on every
    rank; B the rank-r activations; A beside a row base the base's split input)."""
    out = 0.0
    for i in block_layers:
        full, part = model.layers[i], shard.layers[i]
        if full.frozen and full.kind == "linear" and roles[i] in (TpRole.COLUMN, TpRole.ROW):
            split = roles[i] is TpRole.ROW or sequence_parallel
            out -= gemm_input_bytes * full.input_elems / (tp if split else 1)
        elif roles[i].value.startswith("lora_"):
            out += activation_bytes * part.saved_elems
    return out


def check_stages_fit(estimates: Sequence[MemoryEstimate]) -> MemoryEstimate:
    """The tightest stage's estimate (highest share of its GPU); InfeasibleError naming the first that does not fit."""
    if not estimates:
        raise ValueError("no stage estimates")
    for e in estimates:
        check_fits(e)
    return max(estimates, key=lambda e: e.total_bytes / e.capacity_bytes)
