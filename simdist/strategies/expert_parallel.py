"""Expert parallelism as Megatron-Core runs it: expert ranks, the all-to-all token dispatcher, expert load, expert
memory.

Megatron-Core (megatron/core/transformer/moe/README.md, `--expert-model-parallel-size`,
`--expert-tensor-parallel-size`) lays the expert ranks etp x ep x edp (innermost first) over the same GPUs as the
dense layers' tp x cp x dp of each pipeline stage, so edp = tp cp dp / (ep etp). Its `alltoall` token dispatcher
(MoEAlltoAllTokenDispatcher), per MoE layer and micro-batch on one GPU holding T = b s / (tp cp) tokens
(sequence-parallel: Megatron requires sequence parallelism with MoE under tp): the router scores the T tokens,
permute copies each token once per chosen expert (T k rows of h), the dispatch all-to-all over the ep group sends
each expert's rows to the rank holding it (T k h bytes per rank, (ep-1)/ep of it off the GPU when balanced), with
etp > 1 an all-gather over the etp group gives every expert shard all its rows, the experts/ep local experts run
their grouped GEMMs, a reduce-scatter over etp returns the partial outputs, the combine all-to-all sends them back
and unpermute sums each token's k outputs. Backward runs the same collectives in reverse order (the transpose of
an all-to-all is an all-to-all; of an all-gather a reduce-scatter).

Load: `training.moe_load_imbalance` f is the hottest expert's tokens over the mean per expert (1 = balanced, as
the published runs force-balance with auxiliary losses or DeepSeek-V3's bias). The hot expert sits on ep rank 0;
the other E - 1 experts share the rest evenly, (E - f)/(E - 1) of the mean each. With a capacity factor c every
expert keeps at most c x the mean (Megatron's `--moe-expert-capacity-factor`: tokens over capacity are dropped
before dispatch and never sent); dropless (None) keeps all. A GPU's load is the mean over its local experts, so the
hot GPU computes and receives g = (f' + (L - 1) r)/L times the balanced share (f' = min(f, c), r = min((E - f)/(E -
1), c), L = E/ep), and the layer waits for it: its combine cannot finish before the hot GPU's experts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from simdist.collectives.schedule import CollectiveOp
from simdist.memory import model_state_bytes

A2A, AG, RS = CollectiveOp.ALL_TO_ALL, CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER


@dataclass(frozen=True)
class ExpertGroups:
    """One pipeline stage's expert process groups (global ranks, each in coordinate order)."""

    ep: tuple[tuple[int, ...], ...]
    etp: tuple[tuple[int, ...], ...]
    edp: tuple[tuple[int, ...], ...]


def expert_groups(stage_ranks: Sequence[int], ep: int, etp: int = 1) -> ExpertGroups:
    """Megatron-Core's expert groups of one stage: its tp x cp x dp ranks in order (`stage_ranks`, position p)
    re-read as etp x ep x edp, etp innermost: etp coordinate p mod etp, ep (p // etp) mod ep, edp p // (etp ep)."""
    ranks = list(stage_ranks)
    n = len(ranks)
    assert ep >= 1 and etp >= 1 and n % (ep * etp) == 0, f"io.rules_parallel: ep x etp divides {n} ({ep} x {etp})"
    edp = n // (ep * etp)
    grid = np.asarray(ranks, dtype=np.int64).reshape(edp, ep, etp)  # [edp][ep][etp]

    def groups(axis_last: np.ndarray) -> tuple[tuple[int, ...], ...]:
        flat = axis_last.reshape(-1, axis_last.shape[-1])
        return tuple(sorted(tuple(int(r) for r in row) for row in flat))

    return ExpertGroups(ep=groups(grid.transpose(0, 2, 1)), etp=groups(grid), edp=groups(grid.transpose(1, 2, 0)))


@dataclass(frozen=True)
class ExpertLoad:
    """How the routed tokens spread over E experts on ep ranks: `imbalance` f (hottest expert over the mean),
    `capacity_factor` c (None: dropless)."""

    experts: int
    ep: int
    imbalance: float = 1.0
    capacity_factor: float | None = None

    def __post_init__(self) -> None:
        assert self.experts >= 1 and self.ep >= 1 and self.experts % self.ep == 0, \
            f"io.rules_parallel: ep divides the experts ({self.experts} / {self.ep})"
        assert 1.0 <= self.imbalance <= self.experts, f"io.rules_parallel: 1 <= imbalance <= experts ({self.imbalance})"
        assert self.capacity_factor is None or self.capacity_factor > 0, "the schema checks capacity_factor > 0"

    @property
    def local_experts(self) -> int:
        return self.experts // self.ep

    def expert_loads(self) -> np.ndarray:
        """Each expert's tokens over the balanced mean, after dropping (expert 0 the hot one)."""
        e, f = self.experts, self.imbalance
        loads = np.full(e, (e - f) / (e - 1) if e > 1 else 1.0)
        loads[0] = f
        if self.capacity_factor is not None:
            loads = np.minimum(loads, self.capacity_factor)
        return loads

    def gpu_loads(self) -> np.ndarray:
        """Each ep rank's tokens over the balanced share (the mean of its local experts' loads; rank 0 hot)."""
        return self.expert_loads().reshape(self.ep, self.local_experts).mean(axis=1)

    @property
    def hot_gpu_factor(self) -> float:
        """The hottest GPU's received tokens and expert compute over the balanced share."""
        return float(self.gpu_loads().max())

    @property
    def kept_fraction(self) -> float:
        """The share of routed tokens kept (1 when dropless or nothing exceeds capacity)."""
        return float(self.expert_loads().mean())


def dispatch_matrix(routed_bytes: float, load: ExpertLoad) -> np.ndarray:
    """(ep, ep) bytes rank i's dispatch sends rank j: every rank routes `routed_bytes` (T k h bytes) with the same
    spread, rank j getting its GPU load / ep of it (the diagonal stays on the GPU). The combine is its transpose."""
    share = load.gpu_loads() / load.ep * float(routed_bytes)
    return np.tile(share, (load.ep, 1))


@dataclass(frozen=True)
class EpCall:
    """One collective of the MoE layer: on the stage's `axis` groups ('ep' or 'etp'), nccl-tests' size (all-to-all:
    the per-rank send buffer of the balanced call; all-gather: the gathered output), before or after the experts."""

    op: CollectiveOp
    axis: str
    size_bytes: float
    what: str


@dataclass(frozen=True)
class MoeLayerWork:
    """Per MoE layer and micro-batch on one GPU: the collectives around the experts in forward and in backward
    (each list in execution order; `before` the experts, `after` them) and the hot GPU's expert compute scale."""

    fwd_before: tuple[EpCall, ...]
    fwd_after: tuple[EpCall, ...]
    bwd_before: tuple[EpCall, ...]
    bwd_after: tuple[EpCall, ...]
    compute_factor: float  # the hot GPU's expert GEMM work over the balanced share
    load: ExpertLoad
    routed_bytes: float  # T k h bytes: one rank's balanced dispatch buffer

    def calls(self) -> tuple[EpCall, ...]:
        return self.fwd_before + self.fwd_after + self.bwd_before + self.bwd_after


def moe_layer_work(tokens: float, hidden: int, top_k: int, activation_bytes: float, load: ExpertLoad,
                   etp: int = 1, name: str = "experts") -> MoeLayerWork:
    """The all-to-all dispatcher's collectives for one MoE layer on a GPU holding `tokens` tokens per micro-batch:
    dispatch and combine of T k h activation bytes over ep (ep > 1), the etp all-gather of the received rows and
    reduce-scatter of the experts' partial outputs (etp > 1; the hot GPU's rows, g x the balanced share, times etp
    gathered); backward: combine's transpose, the etp pair reversed, dispatch's transpose."""
    routed = float(tokens) * top_k * hidden * activation_bytes
    g = load.hot_gpu_factor
    fb, fa, bb, ba = [], [], [], []
    if load.ep > 1:
        fb.append(EpCall(A2A, "ep", routed, f"{name} dispatch all_to_all"))
    if etp > 1:
        gathered = g * routed * etp
        fb.append(EpCall(AG, "etp", gathered, f"{name} tokens all_gather"))
        fa.append(EpCall(RS, "etp", gathered, f"{name} outputs reduce_scatter"))
    if load.ep > 1:
        fa.append(EpCall(A2A, "ep", routed, f"{name} combine all_to_all"))
        bb.append(EpCall(A2A, "ep", routed, f"{name} combine backward all_to_all"))
    if etp > 1:
        bb.append(EpCall(AG, "etp", gathered, f"{name} output gradients all_gather"))
        ba.append(EpCall(RS, "etp", gathered, f"{name} input gradients reduce_scatter"))
    if load.ep > 1:
        ba.append(EpCall(A2A, "ep", routed, f"{name} dispatch backward all_to_all"))
    return MoeLayerWork(tuple(fb), tuple(fa), tuple(bb), tuple(ba), g, load, routed)


def is_combine(call: EpCall) -> bool:
    """Whether the call's send matrix is the dispatch's transpose (combine forward, dispatch backward: the hot
    GPU sends g x)."""
    return call.what.endswith("combine all_to_all") or call.what.endswith("dispatch backward all_to_all")


def ep_send_matrix(call: EpCall, load: ExpertLoad) -> np.ndarray:
    """The (ep, ep) send matrix of an ep all-to-all of the layer: the dispatch's, or its transpose for the
    calls that bring the experts' outputs (or the dispatch's input gradients) back."""
    m = dispatch_matrix(call.size_bytes, load)
    return m.T.copy() if is_combine(call) else m


@dataclass(frozen=True)
class ExpertStateBytes:
    """Model-state bytes of the routed experts on one GPU."""

    params: float  # expert parameters on this GPU
    weights_bytes: float
    gradients_bytes: float
    optimizer_states_bytes: float

    @property
    def total_bytes(self) -> float:
        return math.fsum((self.weights_bytes, self.gradients_bytes, self.optimizer_states_bytes))


def expert_state_bytes(expert_params: float, ep: int, etp: int, edp: int, precision: str, optimizer: str,
                       grad_dtype: str = "fp32", zero: int = 0) -> ExpertStateBytes:
    """A stage's routed-expert parameters `expert_params` held on one GPU: 1/(ep etp) of them (its local experts,
    each split etp ways), weights and gradients whole, the optimizer states (fp32 master and moments) over the
    expert-data-parallel group edp with the distributed optimizer (zero >= 1), as memory.model_state_bytes counts
    them over dp for the dense layers."""
    params = float(expert_params) / (ep * etp)
    weights, grads, states = model_state_bytes(params, precision, optimizer, grad_dtype, min(zero, 1), edp)
    return ExpertStateBytes(params, weights, grads, states)
