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
the other E - 1 experts share the rest evenly, (E - f)/(E - 1) of the mean each. A GPU's load is the mean over its
local experts, so dropless (the default) the hot GPU receives and computes g = (f + (L - 1)(E - f)/(E - 1))/L times
the balanced share (L = E/ep), and the layer waits for it: its combine cannot finish before the hot GPU's experts.
With a capacity factor c every expert takes exactly c x the mean rows (Megatron's `--moe-expert-capacity-factor`
with `--moe-pad-expert-input-to-capacity`, as Megatron-Bridge's token-drop runs set them, and as compute.py pads
the grouped GEMMs: tokens over capacity are dropped before the dispatch, the rest padded to it), so g = c on every
GPU whatever the imbalance.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from simdist.collectives.schedule import CollectiveOp
from simdist.compute import ACTIVATION_BYTES, gemm_shrink_factor, layer_times
from simdist.memory import model_state_bytes, quantized_copy_bytes
from simdist.strategies.tensor_parallel import Phase, TensorParallelPlan, TpCollective, When
from simdist.workload.specs import LayerSpec, ModelSpec

A2A, AG, RS = CollectiveOp.ALL_TO_ALL, CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER


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

    def expert_tokens(self) -> np.ndarray:
        """Each expert's routed tokens over the mean per expert (expert 0 the hot one)."""
        e, f = self.experts, self.imbalance
        tokens = np.full(e, (e - f) / (e - 1) if e > 1 else 1.0)
        tokens[0] = f
        return tokens

    def expert_rows(self) -> np.ndarray:
        """Each expert's rows (tokens it receives and computes) over the mean: its tokens when dropless; with a
        capacity factor c exactly c (tokens above capacity dropped, the rest padded to it)."""
        if self.capacity_factor is None:
            return self.expert_tokens()
        return np.full(self.experts, float(self.capacity_factor))

    def gpu_loads(self) -> np.ndarray:
        """Each ep rank's rows over the balanced share (the mean of its local experts' rows; rank 0 hot)."""
        return self.expert_rows().reshape(self.ep, self.local_experts).mean(axis=1)

    @property
    def hot_gpu_factor(self) -> float:
        """The hottest GPU's received rows and expert compute over the balanced share."""
        return float(self.gpu_loads().max())

    @property
    def kept_fraction(self) -> float:
        """The share of routed tokens kept (1 when dropless or nothing exceeds capacity)."""
        tokens = self.expert_tokens()
        if self.capacity_factor is None:
            return 1.0
        return float(np.minimum(tokens, self.capacity_factor).mean())


def dispatch_matrix(routed_bytes: float, load: ExpertLoad) -> np.ndarray:
    """(ep, ep) bytes rank i's dispatch sends rank j: every rank routes `routed_bytes` (T k h bytes) with the same
    spread, rank j getting its GPU load / ep of it (the diagonal stays on the GPU; with a capacity factor every
    rank gets c / ep, padded). The combine is its transpose."""
    share = load.gpu_loads() / load.ep * float(routed_bytes)
    return np.tile(share, (load.ep, 1))


@dataclass(frozen=True)
class EpCall:
    """One collective of the MoE layer: on the stage's `axis` groups ('ep' or 'etp'), nccl-tests' size (all-to-all:
    the per-rank send buffer of the balanced call; all-gather: the gathered output). `combine`: an all-to-all whose
    send matrix is the dispatch's transpose (the combine forward, the dispatch's backward: the hot GPU sends g x)."""

    op: CollectiveOp
    axis: str
    size_bytes: float
    what: str
    combine: bool = False


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
        fa.append(EpCall(A2A, "ep", routed, f"{name} combine all_to_all", combine=True))
        bb.append(EpCall(A2A, "ep", routed, f"{name} combine backward all_to_all"))
    if etp > 1:
        bb.append(EpCall(AG, "etp", gathered, f"{name} output gradients all_gather"))
        ba.append(EpCall(RS, "etp", gathered, f"{name} input gradients reduce_scatter"))
    if load.ep > 1:
        ba.append(EpCall(A2A, "ep", routed, f"{name} dispatch backward all_to_all", combine=True))
    return MoeLayerWork(tuple(fb), tuple(fa), tuple(bb), tuple(ba), g, load, routed)


def ep_send_matrix(call: EpCall, load: ExpertLoad) -> np.ndarray:
    """The (ep, ep) send matrix of an ep all-to-all of the layer: the dispatch's, or its transpose for the
    calls that bring the experts' outputs (or the dispatch's input gradients) back."""
    m = dispatch_matrix(call.size_bytes, load)
    return m.T.copy() if call.combine else m


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


# ---- the MoE layers on one GPU of a model-parallel stage ------------------------------------------------------

@dataclass(frozen=True)
class EpCollective(TpCollective):
    """A collective of the MoE layer in a stage's segments: on the stage's `axis` groups ('ep': the hot GPU
    receives, as the dispatch; 'epc': it sends, as the combine; 'etp'), with the tp collectives' fields."""

    axis: str = "ep"


def _part(layer_name: str) -> str:
    return layer_name.rsplit(".", 1)[-1]


def _collectives_of(i: int, work: MoeLayerWork) -> tuple[EpCollective, ...]:
    out = []
    for calls, phase, when in ((work.fwd_before, Phase.FWD, When.BEFORE), (work.fwd_after, Phase.FWD, When.AFTER),
                               (work.bwd_before, Phase.BWD, When.BEFORE), (work.bwd_after, Phase.BWD, When.AFTER)):
        for c in calls:
            axis = "etp" if c.axis == "etp" else ("epc" if c.combine else "ep")
            out.append(EpCollective(c.op, c.size_bytes, phase, i, when, c.what, axis))
    return tuple(out)


def _shared_expert_collectives(i: int, layer: LayerSpec, b: int, act: float) -> tuple[TpCollective, ...]:
    """The shared experts as Megatron's SharedExpertMLP runs them under tp with sequence parallelism: a column- then
    row-parallel MLP (input all-gathered, output reduce-scattered; backward the output gradient gathered, the
    input re-gathered for the weight gradient and the input gradient reduce-scattered)."""
    n = layer.name
    size = b * layer.input_elems * act
    return (TpCollective(AG, size, Phase.FWD, i, When.BEFORE, f"{n} input from sequence shards"),
            TpCollective(RS, size, Phase.FWD, i, When.AFTER, f"{n} output partial sums to sequence shards"),
            TpCollective(AG, size, Phase.BWD, i, When.BEFORE, f"{n} output gradient from sequence shards"),
            TpCollective(AG, size, Phase.BWD, i, When.BEFORE, f"{n} input re-gathered for the weight gradient"),
            TpCollective(RS, size, Phase.BWD, i, When.AFTER, f"{n} input gradient partial sums to sequence shards"))


def expert_parallel_plan(tpp: TensorParallelPlan, model: ModelSpec, gpu, precision: str, *, ep: int, etp: int,
                         tokens: float, hidden: int, imbalance: float = 1.0, calibration=None,
                         accumulation_bytes: int = 0) -> tuple[TensorParallelPlan, tuple[MoeLayerWork, ...]]:
    """`tpp` (one tp rank's layers of `model`, the model tensor_parallel_plan was given: context parallelism's
    s / cp tokens) with the MoE blocks as expert parallelism runs them: each routed-experts layer holds 1/(ep etp)
    of the experts' weights and computes the GPU's 1/tp of the tokens (sequence-parallel) times the hot GPU's load
    as a grouped GEMM of its experts / ep local experts, with the dispatcher's collectives around it (`tokens`:
    b s / (tp cp) per micro-batch; `hidden`: the model width); the router runs on the GPU's tokens with its weights
    whole; under tp the shared experts are a tp-split MLP with its sequence-parallel collectives. The layers are
    re-timed together (compute.layer_times) as tensor_parallel_plan times them. Returns the plan and each MoE
    layer's work."""
    moe = model.moe
    assert moe is not None, "io.rules_parallel: ep > 1 needs a mixture-of-experts model"
    tp = tpp.tp
    share = 1.0 / tp
    load = ExpertLoad(moe.experts, ep, imbalance, moe.capacity_factor)
    # compute.layer_times pads the expert GEMMs to the capacity factor itself: the hot GPU's rows over that
    hot = load.hot_gpu_factor / (moe.capacity_factor or 1.0)
    act = ACTIVATION_BYTES[str(precision)]
    shards, colls, works, factors = [], [], [], []
    for i, (full, x) in enumerate(zip(model.layers, tpp.layers)):
        part = _part(full.name)
        factor = x.efficiency_factor
        if full.experts:
            f = share * hot
            shard = replace(full, params=full.params // (ep * etp), fwd_flops=full.fwd_flops * f,
                            input_elems=full.input_elems * f, output_elems=full.output_elems * f,
                            saved_elems=full.saved_elems * f, experts=load.local_experts,
                            grad_shapes=_split_shapes(full.grad_shapes, ep * etp), **full.scaled_kernels(f))
            work = moe_layer_work(tokens, hidden, moe.top_k, act, load, etp, full.name)
            works.append(work)
            shards.append(shard)
            colls.append(_collectives_of(i, work))
            factor = 1.0  # the grouped GEMM's own size factor (compute.grouped_gemm_factor) on its local experts
        elif part == "router" and tp > 1:  # replicated weights, the GPU's sequence shard of tokens
            shards.append(replace(full, fwd_flops=full.fwd_flops * share, input_elems=full.input_elems * share,
                                  output_elems=full.output_elems * share, saved_elems=full.saved_elems * share,
                                  **full.scaled_kernels(share)))
            colls.append(())
        elif part == "shared_experts" and tp > 1:
            shards.append(replace(full, params=full.params // tp, fwd_flops=full.fwd_flops / tp,
                                  saved_elems=full.saved_elems / tp, grad_shapes=_split_shapes(full.grad_shapes, tp),
                                  **full.scaled_kernels(1.0 / tp)))
            colls.append(_shared_expert_collectives(i, full, tpp.micro_batch, act) if tpp.sequence_parallel else ())
            flops = full.fwd_flops * tpp.micro_batch
            factor *= gemm_shrink_factor(flops, flops / tp, gpu, precision, calibration)  # as tp's split GEMMs
        else:
            shards.append(x.shard)
            colls.append(x.collectives)
        factors.append(factor)
    times = layer_times(replace(model, layers=tuple(shards)), gpu, tpp.micro_batch, precision, calibration,
                        efficiency_factors=factors, accumulation_bytes=accumulation_bytes)
    layers = tuple(replace(x, shard=s, time=t, collectives=tuple(c), efficiency_factor=f)
                   for x, s, t, c, f in zip(tpp.layers, shards, times, colls, factors))
    return replace(tpp, layers=layers), tuple(works)


def _split_shapes(shapes, n: int):
    """Gradient shapes of 1/n of a layer's weights (the first dimension split, as experts or tp columns are)."""
    return tuple((-(-s[0] // n),) + tuple(s[1:]) for s in shapes if s)


def expert_memory(estimate, shard_layers: Sequence[LayerSpec], layer_ids: Sequence[int], *, ep: int, etp: int,
                  dp: int, edp: int, zero: int, precision: str, optimizer: str, grad_dtype: str,
                  quantized_bytes: float = 0.0):
    """A stage's MemoryEstimate (memory.estimate_parallel_memory over its tp shard, which counts the routed
    experts' parameters as the dense ones: whole on every tp rank, states over dp) with the experts' model states
    as expert parallelism holds them instead: 1/(ep etp) of them, the states over edp with the distributed
    optimizer (expert_state_bytes). `layer_ids`: the stage's layers; `quantized_bytes`: Transformer Engine's
    quantized weight copies counted for its expert layers (split as the weights are)."""
    counted = float(sum(shard_layers[i].params for i in layer_ids if shard_layers[i].experts))
    if not counted:
        return estimate
    w0, g0, s0 = model_state_bytes(counted, precision, optimizer, grad_dtype, zero, dp, quantized_bytes)
    n = ep * etp
    w1, g1, s1 = model_state_bytes(counted / n, precision, optimizer, grad_dtype, min(zero, 1), edp,
                                   quantized_bytes / n)
    return replace(estimate, weights_bytes=estimate.weights_bytes - w0 + w1,
                   gradients_bytes=estimate.gradients_bytes - g0 + g1,
                   optimizer_states_bytes=estimate.optimizer_states_bytes - s0 + s1)


def expert_stage_memory(estimates, model: ModelSpec, chunks: Sequence[tuple[int, int]], pp: int, gpu, *, ep: int,
                        etp: int, dp: int, edp: int, zero: int, precision: str, optimizer: str, grad_dtype: str):
    """Every pipeline rank's estimate (index = pp rank; virtual stage k of `chunks` on rank k mod pp) with its
    routed experts held as expert parallelism holds them (expert_memory); the tp shard keeps an expert layer
    whole, so its layers here are the model's."""
    out = []
    for r, est in enumerate(estimates):
        ids = [i for k, (lo, hi) in enumerate(chunks) if k % pp == r for i in range(lo, hi)]
        experts = [model.layers[i] for i in ids if model.layers[i].experts]
        copies = quantized_copy_bytes(experts, gpu.runs_as(precision), gpu) if experts else 0.0
        out.append(expert_memory(est, model.layers, ids, ep=ep, etp=etp, dp=dp, edp=edp, zero=zero,
                                 precision=gpu.runs_as(precision), optimizer=optimizer, grad_dtype=grad_dtype,
                                 quantized_bytes=copies))
    return tuple(out)


def expert_buckets(chunks, bucket_size_bytes: float) -> tuple[tuple[float, int], ...]:
    """Each chunk's routed experts' gradients (`expert_grad_bytes`, last chunk first: backward finishes it first)
    in buckets of at most the cap, with their chunk: the edp reductions of a stage in launch order."""
    out = []
    for ci in reversed(range(len(chunks))):
        g = chunks[ci].expert_grad_bytes
        if g:
            n = max(1, math.ceil(g / bucket_size_bytes - 1e-12))
            out += [(g / n, ci)] * n
    return tuple(out)
