"""Context parallelism as Megatron-Core runs it (Transformer Engine's attention with a cp group).

The sequence of every sample is cut into 2 cp chunks and rank i of a cp group holds chunks i and 2 cp - 1 - i,
so that under a causal mask every rank does the same attention work. Every layer but the attention core runs
on the rank's s / cp tokens (FLOPs, activations and tensor-parallel collectives / cp). The attention core
needs every earlier token's K and V; `training.cp_comm_type` says how they come (TE's
AttnFuncWithCPAndKVP2P, AttnFuncWithCPAndKVAllGather, AttnFuncWithCPAndQKVOA2A):

- p2p (ring, the default): cp steps; at step k the rank sends the K/V block it holds to the next rank of the
  ring and receives one from the previous, beside the attention of its local queries against the block it
  holds, so a step lasts max(attention, transfer). Forward sends cp - 1 blocks; backward cp transfers
  (K/V at step 0, K/V and the accumulated dK/dV in between, dK/dV alone at the last step), each in the
  K/V dtype (TE's p2p_comm_buffers). Each step's attention is 1/cp of the rank's (2 cp chunk balancing).
- all_gather: K and V all-gathered before the attention (again in backward), dK and dV reduce-scattered after
  it; nothing overlapped.
- a2a (Ulysses): all-to-alls of Q, K, V before the attention scatter the heads and gather the sequence, one of
  the output after it; backward all-to-alls the output and its gradient before and dQ, dK, dV after. The
  attention runs the whole sequence on heads / (tp x cp) heads.

Per micro-batch sample the K/V block of one step is 2 (s / cp) (kv / tp) d bytes-per-element bytes; the
attention work per rank is the whole core's / cp in every mode.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simdist.collectives.schedule import CollectiveOp
from simdist.memory import TransformerShape
from simdist.scenario import CpCommType
from simdist.workload.specs import Kernel, LayerSpec, ModelSpec

AG, RS, A2A = CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_TO_ALL


@dataclass(frozen=True)
class CpCall:
    """A blocking collective on the stage's cp groups: `size_bytes` in nccl-tests' convention."""

    op: CollectiveOp
    size_bytes: float
    what: str


@dataclass(frozen=True)
class CpAttention:
    """One attention core of one micro-batch on one rank in one phase: blocking calls `before`, compute
    `steps_s` (p2p: one per ring step), `exchanges[k]`: the bytes each rank sends its ring successor beside
    step k (p2p only), blocking calls `after`."""

    mode: CpCommType
    steps_s: tuple[float, ...]
    exchanges: tuple[float, ...] = ()
    before: tuple[CpCall, ...] = ()
    after: tuple[CpCall, ...] = ()

    @property
    def compute_s(self) -> float:
        return math.fsum(self.steps_s)

    def timeline(self, exchange_s, call_s) -> tuple[float, tuple[tuple[float, float], ...], tuple[tuple[float, float], ...]]:
        """(seconds, the spans (offsets) the compute waits for communication, the spans transfers run beside the
        compute) alone on the fabric: `exchange_s(bytes)` and `call_s(op, bytes)` time one transfer step or call.
        Ring step k lasts max(compute, transfer): the next step needs both the block received and this one's
        compute; its transfer runs beside the compute for min(compute, transfer) and is waited for after that."""
        t, waits, beside = 0.0, [], []
        for c in self.before:
            d = call_s(c.op, c.size_bytes)
            waits.append((t, t + d))
            t += d
        for k, c in enumerate(self.steps_s):
            x = exchange_s(self.exchanges[k]) if k < len(self.exchanges) else 0.0
            if x > 0:
                beside.append((t, t + min(c, x)))
            if x > c:
                waits.append((t + c, t + x))
            t += max(c, x)
        for c in self.after:
            d = call_s(c.op, c.size_bytes)
            waits.append((t, t + d))
            t += d
        return t, tuple(waits), tuple(beside)


def kv_block_bytes(shape: TransformerShape, micro_batch: int, cp: int, tp: int, element_bytes: float) -> float:
    """K and V of one rank's s / cp tokens on one tp rank: b (s / cp) (w_k + w_v) / tp bytes-per-element (2 kv d
    when a head is d wide; MLA's keys are wider than its values)."""
    _, wk, wv, _ = shape.widths()
    return micro_batch * (shape.seq_len / cp) * (wk + wv) / tp * element_bytes


def q_block_bytes(shape: TransformerShape, micro_batch: int, cp: int, tp: int, element_bytes: float) -> float:
    """Q of one rank's s / cp tokens on one tp rank: b (s / cp) w_q / tp bytes-per-element."""
    return micro_batch * (shape.seq_len / cp) * shape.widths()[0] / tp * element_bytes


def _scaled(layer: LayerSpec, f: float) -> LayerSpec:
    """The layer on a fraction f of its tokens."""
    return replace(layer, fwd_flops=layer.fwd_flops * f, input_elems=layer.input_elems * f,
                   output_elems=layer.output_elems * f, saved_elems=layer.saved_elems * f, **layer.scaled_kernels(f))


def _kernels(kernels: tuple[Kernel, ...], flops_f: float, elems_f: float) -> tuple[Kernel, ...]:
    return tuple(replace(k, flops=k.flops * flops_f, elems=k.elems * elems_f, mask_bytes=k.mask_bytes * elems_f)
                 for k in kernels)


def attention_part(core: LayerSpec, cp: int, mode: CpCommType) -> LayerSpec:
    """What one rank computes of the attention core at a time: p2p one ring step (its s / cp queries against
    one block of s / cp keys: 1 / cp^2 of the FLOPs, 1 / cp of the tensors read and written); all_gather and
    a2a the rank's whole share at once (1 / cp of the FLOPs and tensors)."""
    flops_f = 1.0 / (cp * cp) if CpCommType(mode) is CpCommType.P2P else 1.0 / cp
    elems_f = 1.0 / cp
    return replace(core, fwd_flops=core.fwd_flops * flops_f, input_elems=core.input_elems * elems_f,
                   output_elems=core.output_elems * elems_f, saved_elems=core.saved_elems * elems_f,
                   fwd_kernels=_kernels(core.fwd_kernels, flops_f, elems_f),
                   bwd_kernels=_kernels(core.bwd_kernels, flops_f, elems_f))


def is_core(layer: LayerSpec) -> bool:
    return layer.name.endswith("attn.core")


def shard_sequence(model: ModelSpec, cp: int, mode: CpCommType) -> ModelSpec:
    """The model as one cp rank runs it per sample: every layer on s / cp tokens, the attention core as
    `attention_part` (one ring step under p2p)."""
    if cp == 1:
        return model
    layers = tuple(attention_part(x, cp, mode) if is_core(x) else _scaled(x, 1.0 / cp) for x in model.layers)
    return replace(model, layers=layers)


def ring_steps(cp: int, mode: CpCommType) -> int:
    """Attention compute steps per core and phase: cp under p2p, else 1."""
    return cp if CpCommType(mode) is CpCommType.P2P else 1


def cp_attention(mode: CpCommType, cp: int, tp: int, shape: TransformerShape, micro_batch: int,
                 element_bytes: float, part_fwd_s: float, part_bwd_s: float) -> tuple[CpAttention, CpAttention]:
    """(forward, backward) of one attention core on one rank, from the time of one `attention_part`."""
    mode = CpCommType(mode)
    kv = kv_block_bytes(shape, micro_batch, cp, tp, element_bytes)
    wq, wk, wv, wo = shape.widths()
    k_share = wk / (wk + wv)  # K's part of the K/V bytes (one half unless MLA's keys are wider)
    if mode is CpCommType.P2P:
        fwd = CpAttention(mode, (part_fwd_s,) * cp, (kv,) * (cp - 1))
        bwd = CpAttention(mode, (part_bwd_s,) * cp, (kv,) + (2 * kv,) * (cp - 2) + (kv,))
        return fwd, bwd
    if mode is CpCommType.ALL_GATHER:  # K and V each gathered whole (cp blocks), dK and dV reduce-scattered
        k_all, v_all = cp * kv * k_share, cp * kv * (1 - k_share)
        gather = (CpCall(AG, k_all, "K all_gather"), CpCall(AG, v_all, "V all_gather"))
        return (CpAttention(mode, (part_fwd_s,), before=gather),
                CpAttention(mode, (part_bwd_s,), before=gather,
                            after=(CpCall(RS, k_all, "dK reduce_scatter"), CpCall(RS, v_all, "dV reduce_scatter"))))
    k, v = kv * k_share, kv * (1 - k_share)
    q = q_block_bytes(shape, micro_batch, cp, tp, element_bytes)  # Q of the rank's tokens
    o = q * wo / wq  # the output (and its gradient)
    qkv = (CpCall(A2A, q, "Q all_to_all"), CpCall(A2A, k, "K all_to_all"), CpCall(A2A, v, "V all_to_all"))
    fwd = CpAttention(mode, (part_fwd_s,), before=qkv, after=(CpCall(A2A, o, "output all_to_all"),))
    bwd = CpAttention(mode, (part_bwd_s,),
                      before=(CpCall(A2A, o, "output all_to_all"), CpCall(A2A, o, "output gradient all_to_all")),
                      after=(CpCall(A2A, q, "dQ all_to_all"), CpCall(A2A, k, "dK all_to_all"),
                             CpCall(A2A, v, "dV all_to_all")))
    return fwd, bwd


def buffer_bytes(mode: CpCommType, shape: TransformerShape, micro_batch: int, cp: int, tp: int,
                 element_bytes: float) -> float:
    """The attention's transient communication buffers on one rank, from one K/V block (`kv_block_bytes`) and the
    rank's Q (`q_block_bytes`): p2p backward's two buffers of K/V and dK/dV (TE's p2p_comm_buffers; forward holds
    two K/V blocks); all_gather the gathered K and V and, in backward, their gradients before the reduce-scatter;
    a2a the head-scattered Q, K, V and output copies."""
    mode = CpCommType(mode)
    if cp == 1:
        return 0.0
    kv = kv_block_bytes(shape, micro_batch, cp, tp, element_bytes)
    q = q_block_bytes(shape, micro_batch, cp, tp, element_bytes)
    if mode is CpCommType.P2P:
        return 4.0 * kv
    if mode is CpCommType.ALL_GATHER:
        return 2.0 * cp * kv
    return 2.0 * q + kv
