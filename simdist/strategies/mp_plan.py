"""One model-parallel (dp x tp x pp) iteration laid out before any event runs: layout, stages, per-chunk work.

`training.parallelism` and `training.placement_order` give the layout (simdist.layout); the model's
transformer blocks are cut into pp x v contiguous chunks balanced by their cost on one tp rank (whole blocks,
the embedding joining the first chunk and the head the last, so every boundary carries b x s x h
activations); each chunk's forward and backward per micro-batch are compute segments separated by the
Megatron tp collectives (strategies.tensor_parallel), with full recomputation repeating the chunk's forward
(and its collectives) before its backward, and selective recomputation Megatron-Core's modules (default the
attention cores; `moe` a MoE layer's forward, its token dispatch and combine included, before its backward). Pipeline
sends use Megatron's scatter/gather (Narayanan et al. 2021, section 4.1): with tp > 1 each tp rank sends its
1/tp slice and the receiving tp group all_gathers it over the node's links (sequence parallelism keeps the
activations sequence-sharded, so no gather). Every stage's dp gradients are all_reduced in buckets after its
last backward micro-batch, then the optimizer steps its shard (LoRA: frozen base layers add no gradients, buckets
or optimizer work: only the adapters'; tensor_parallel places the adapters); with ZeRO (training.parallelism.zero) the
stage's dp group shards them instead (pipeline_graph), the optimizer stepping 1/dp, and at stage 3 the segments
are also cut at the units (blocks) whose parameters are gathered. With training.tp_comm_overlap each block
GEMM and its sequence-parallel collectives become one overlapped segment (strategies/chunk_segments.py). With context
parallelism (training.parallelism.cp) every layer runs on s / cp tokens and each attention core becomes one
segment carrying its ring steps or cp collectives (strategies.context_parallel); the dense gradients are
reduced (and ZeRO shards) over dp x cp ranks.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from simdist.compute import (ACTIVATION_BYTES, DTYPE_BYTES, GEMM_KINDS,
                             gemm_shrink_factor)
from simdist.graph.tasks import RankClass
from simdist.layout import Layout, build_layout
from simdist.low_precision import gathered_param_bytes
from simdist.memory import TransformerShape
from simdist.scenario import CpCommType, PipelineSchedule, Recompute, Scenario
from simdist.strategies.chunk_segments import Overlap, Segment, as_recompute, segments  # noqa: F401 (Overlap: users)
from simdist.strategies.context_parallel import CpAttention, cp_attention, ring_steps, shard_sequence
from simdist.strategies.expert_parallel import ExpertLoad, expert_buckets, expert_parallel_plan
from simdist.strategies.pipeline_schedule import Orders, balance_stages, boundary_bytes, schedule_order
from simdist.strategies.plan import data_parallel_degree, resolve_batch
from simdist.strategies.recompute_policy import (recompute_flops, recompute_seconds, rerun_spans,
                                                 selective_modules)
from simdist.strategies.tensor_parallel import Phase, TensorParallelPlan, TpRole, tensor_parallel_plan
from simdist.strategies.update_cost import update_time
from simdist.workload.lora import trainable_params
from simdist.workload.specs import model_flops_per_sample

_BLOCK = re.compile(r"^((?:blocks|encoder)\.\d+)\.")


@dataclass(frozen=True)
class ChunkWork:
    """What one virtual stage runs per micro-batch on one tp rank."""

    virtual_stage: int
    layers: tuple[int, int]  # [start, end) in forward order
    fwd: tuple[Segment, ...]
    bwd: tuple[Segment, ...]  # recomputation (if any) first, then the backward
    grad_bytes: float  # this tp rank's gradients of the chunk (its dense ones under expert parallelism)
    expert_grad_bytes: float = 0.0  # its routed experts' gradients, reduced over edp (expert parallelism)

    @property
    def fwd_s(self) -> float:
        return math.fsum(s.compute_s for s in self.fwd)

    @property
    def bwd_s(self) -> float:
        return math.fsum(s.compute_s for s in self.bwd)


@dataclass(frozen=True)
class StageUnit:
    """A ZeRO-3 unit of a stage: a transformer block, or a chunk's other layers with parameters (its
    embedding or head), gathered and resharded together over the stage's dp group."""

    name: str
    params: float  # of one tp rank
    chunk: int
    trainable: float  # of those, the ones with gradients (all but a frozen base's under LoRA)


@dataclass(frozen=True)
class StagePlan:
    """A pipeline stage (one rank class: its tp ranks and dp replicas): its chunks and optimizer step."""

    rank_class: RankClass
    chunks: tuple[ChunkWork, ...]  # chunk c = virtual stage c x pp + stage
    params: float  # parameters of one tp rank of the stage
    optimizer_s: float
    grad_buckets: tuple[float, ...]  # bytes of each dp all_reduce, in launch order
    units: tuple[StageUnit, ...] = ()  # ZeRO-3 only
    expert_buckets: tuple[tuple[float, int], ...] = ()  # (bytes, chunk) of each edp reduction, in launch order


@dataclass(frozen=True)
class MpPlan:
    layout: Layout
    schedule: PipelineSchedule
    virtual_stages: int
    micro_batch: int
    micro_batches: int  # per pipeline per step
    orders: Orders
    stages: tuple[StagePlan, ...]
    p2p_bytes: float  # one (dp, tp) pair's activation (or gradient) send per micro-batch and boundary
    p2p_gather_bytes: float  # the tp all_gather after a receive (scatter/gather); 0 when none
    overlap: bool  # dp buckets of a chunk launch after its last backward (else after the stage's last)
    global_batch: int
    tokens_per_sample: int | None
    hardware_flops: float  # per step, with recomputation's extra forwards (the paper's achieved FLOP/s)
    single_gpu_samples_per_s: float  # no communication, no bubble (scaling efficiency's reference)
    warnings: tuple[str, ...] = ()
    zero: int = 0  # ZeRO stage over each stage's dp group
    param_bytes: float = 2  # bytes per gathered parameter (low_precision.gathered_param_bytes)
    grad_elem_bytes: int = 4  # bytes per reduced gradient element (workload.grad_dtype)
    tp_comm_overlap: bool = False
    cp_comm_type: CpCommType = CpCommType.P2P
    moe_load: ExpertLoad | None = None  # the routed experts' load (a mixture-of-experts model)
    etp: int = 1  # expert tensor parallelism
    expert_groups: bool = False  # the experts' gradients reduced over edp groups of their own

    @property
    def pp(self) -> int:
        return self.layout.pp

    @property
    def cp(self) -> int:
        return self.layout.cp

    @property
    def grad_dp(self) -> int:
        """Ranks the dense gradients are reduced over (and ZeRO shards over): dp x cp, as Megatron-Core does."""
        return self.layout.dp * self.layout.cp

    @property
    def tp(self) -> int:
        return self.layout.tp

    @property
    def ep(self) -> int:
        return self.moe_load.ep if self.moe_load is not None else 1

    @property
    def edp(self) -> int:
        """Expert-data-parallel ranks: tp x cp x dp / (ep x etp), Megatron-Core's expert layout."""
        return self.layout.dp * self.layout.cp * self.layout.tp // (self.ep * self.etp)

    @property
    def dp(self) -> int:
        return self.layout.dp


def transformer_shape(model) -> TransformerShape | None:
    """The first block's shape read off its layers (None without an attention core): hidden, heads, sequence
    length, the attention's widths (the core's operands: Q, K and V, its output; K/V heads from them), MLA's
    latents (its q_norm and kv_norm), the MLP's kind and width (its activation layer), dropout (the residual's
    dropout kernels) and flash attention (the core's flash backward kernel)."""
    s = model.tokens_per_sample
    core = next((x for x in model.layers if x.name.endswith("attn.core")), None)
    if core is None or not s:
        return None
    prefix = core.name[:-len("attn.core")]
    block = {x.name[len(prefix):]: x for x in model.layers if x.name.startswith(prefix)}
    flash = any(k.name.endswith(".flash_bwd") for k in core.bwd_kernels)
    out = core.output_elems / s  # heads x the value head width
    if flash:
        heads = (core.saved_elems - core.input_elems - s * out) / s  # Q, K, V, output and log-sum-exp
    else:
        heads = (core.saved_elems - core.input_elems) / (s * s)  # Q, K, V and the probabilities
    qkv = core.input_elems / s
    mla = "attn.kv_down" in block
    if mla:  # every head its own query and key (no-RoPE + RoPE wide) and value (the output's width)
        q = k = (qkv - out) / 2
        v, kv_heads = out, heads
    else:  # (heads + 2 kv) x head_dim
        q, v = out, (qkv - out) / 2
        k, kv_heads = v, v / (out / heads)
    latent = sum(block[n].input_elems / s for n in ("attn.q_norm", "attn.kv_norm") if n in block) if mla else 0
    mlp = next((k for k in ("swiglu", "gelu", "squared_relu") if f"mlp.{k}" in block), None)
    moe = model.moe
    if mlp is None:  # a mixture-of-experts block: its tokens' SwiGLU activations through top_k + shared experts
        assert moe is not None and "experts" in block, f"{model.name}: a block without an MLP"
        mlp, ffn = "swiglu", (moe.top_k + moe.shared_experts) * moe.expert_ffn_hidden
        routed = moe.top_k * moe.expert_ffn_hidden
    else:
        ffn, routed = int(round(block[f"mlp.{mlp}"].output_elems / s)), 0
    residual = block["attn.residual"]
    hidden = int(round(block["attn.proj"].output_elems / s))
    widths = [int(round(x)) for x in (q, k, v, out)]
    plain = widths == [hidden, hidden * kv_heads / heads, hidden * kv_heads / heads, hidden]
    return TransformerShape(hidden=hidden, heads=int(round(heads)), seq_len=int(s), kv_heads=int(round(kv_heads)),
                            ffn_hidden=ffn, mlp=mlp, dropout=any("dropout" in x.name for x in residual.fwd_kernels),
                            flash_attention=flash, **({} if plain else dict(zip(("q_width", "k_width", "v_width",
                                                                                  "out_width"), widths))),
                            latent_width=int(round(latent)), routed_ffn=routed,
                            shared_ffn=moe.shared_experts * moe.expert_ffn_hidden if moe is not None else 0)


def pipeline_units(model) -> list[tuple[int, int]]:
    """Contiguous [start, end) layer ranges the pipeline may cut between: one per block, the layers before the
    first block joined to it and those after the last joined to it ([] for a model without transformer blocks)."""
    starts: dict[str, int] = {}
    for i, x in enumerate(model.layers):
        m = _BLOCK.match(x.name)
        if m and m.group(1) not in starts:
            starts[m.group(1)] = i
    cuts = sorted(starts.values())
    if not cuts:
        return []
    bounds = [0, *cuts[1:], len(model.layers)]
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def _stage_units(tpp: TensorParallelPlan, model, chunks: list[tuple[int, int, int]]) -> tuple[
        tuple["StageUnit", ...], dict[int, int]]:
    """ZeRO-3 units of one stage's chunks ((chunk, lo, hi)): each block, and per chunk its other layers with
    parameters; layers without parameters outside blocks join the unit before them (or after, at the start)."""
    units: list[StageUnit] = []
    unit_of: dict[int, int] = {}
    for c, lo, hi in chunks:
        own: dict[str, int] = {}
        for i in range(lo, hi):
            m = _BLOCK.match(model.layers[i].name)
            key = m.group(1) if m else (f"root.{c}" if tpp.layers[i].shard.params else None)
            if key is None:
                continue
            if key not in own:
                own[key] = len(units)
                units.append(StageUnit(key.replace(f".{c}", f" (chunk {c})") if key.startswith("root.") else key,
                                       0.0, c, 0.0))
            j, shard = own[key], tpp.layers[i].shard
            units[j] = StageUnit(units[j].name, units[j].params + shard.params, c,
                                 units[j].trainable + trainable_params(shard))
            unit_of[i] = j
        prev = None
        for i in range(lo, hi):  # forward fill, then the leading ones from the first unit
            if i in unit_of:
                prev = unit_of[i]
            elif prev is not None:
                unit_of[i] = prev
        lead = next((unit_of[i] for i in range(lo, hi) if i in unit_of), -1)
        for i in range(lo, hi):
            unit_of.setdefault(i, lead)
    return tuple(units), unit_of


def build_mp_plan(scenario: Scenario) -> MpPlan:
    """The layout, balanced chunks, per-chunk segments, p2p sizes and dp buckets of a model-parallel run."""
    dp = data_parallel_degree(scenario)
    s, t, w, comm = scenario, scenario.training, scenario.workload, scenario.communication
    model = w.model
    assert model is not None
    par = t.parallelism
    tp, pp, v, cp = par.tp, par.pp, t.virtual_stages, par.cp
    layout = build_layout(s.cluster, dp, tp, pp, t.placement_order, cp)
    gpus = {g.gpu.key for g in s.cluster.node_groups}
    assert len(gpus) == 1, "io.rules_parallel: one GPU kind for tp or pp"
    gpu = s.cluster.node_groups[0].gpu
    precision = w.precision.value
    shape = transformer_shape(model)
    # Megatron-LM's DDP keeps a main_grad buffer in the gradient dtype and adds every micro-batch's weight
    # gradients into it with a separate kernel (compute.layer_times, accumulation_bytes)
    mode = CpCommType(t.cp_comm_type)
    cut = shard_sequence(model, cp, mode)
    tpp = tensor_parallel_plan(cut, gpu, t.micro_batch, precision, tp,
                               t.sequence_parallel, s.compute_calibration, heads=shape.heads if shape else None,
                               accumulation_bytes=DTYPE_BYTES[w.grad_dtype], reference=model if cp > 1 else None,
                               tp_comm_overlap=t.tp_comm_overlap)
    cores = _cp_cores(tpp, shape, mode, cp, t.micro_batch, precision) if cp > 1 else {}
    load, etp = None, par.etp
    if model.moe is not None:  # the MoE layers as expert parallelism runs them (strategies.expert_parallel)
        assert shape is not None, "io.rules_parallel: a mixture-of-experts model has transformer blocks"
        tpp, works = expert_parallel_plan(
            tpp, cut, gpu, precision, ep=par.ep, etp=etp, tokens=t.micro_batch * shape.seq_len / (tp * cp),
            hidden=shape.hidden, imbalance=t.moe_load_imbalance, calibration=s.compute_calibration,
            accumulation_bytes=DTYPE_BYTES[w.grad_dtype])
        load = works[0].load if works else None
    # the experts' gradients go over edp groups of their own unless those are the dense dp x cp groups
    own_edp = load is not None and (par.ep > 1 or etp != tp)
    rc = Recompute(t.recompute)
    assert rc is Recompute.NONE or shape is not None, "io.rules_parallel: recomputation needs attention blocks"
    modules = selective_modules(rc, t.recompute_modules)
    redo = recompute_seconds(model, tpp, modules, gpu, t.micro_batch, precision, s.compute_calibration)
    rerun = rerun_spans(model, modules)
    replica = resolve_batch(s, dp) * t.grad_accumulation
    assert replica % t.micro_batch == 0, "io.rules_parallel: micro-batches divide the per-replica batch"
    m = replica // t.micro_batch
    orders = schedule_order(t.schedule, pp, m, v)
    names = [x.name for x in model.layers]
    steps = ring_steps(cp, mode)
    cost = [(x.time.total_s + (x.time.fwd_s if rc is Recompute.FULL else 0.0)) * (steps if i in cores else 1)
            for i, x in enumerate(tpp.layers)]
    us = pipeline_units(model) if pp * v > 1 else [(0, len(names))]
    assert 1 <= pp * v <= len(us), "io.rules_parallel: pp x virtual_stages stages cut between blocks"
    ucost = [math.fsum(cost[a:b]) for a, b in us]
    ranges = [(us[a][0], us[b - 1][1]) for a, b in balance_stages(ucost, pp * v)]
    grad_bytes = DTYPE_BYTES[w.grad_dtype]
    cal = s.compute_calibration
    zero = par.zero
    factors = _chunk_factors(tpp, gpu, precision, cal) if t.tp_comm_overlap else None
    stages = []
    for st in range(pp):
        ranks = tuple(sorted(r for g in layout.pp_groups() for r in [g[st]]))
        rank_class = RankClass(st, ranks, 0, gpu.key, t.micro_batch)
        spans = [(c, *ranges[c * pp + st]) for c in range(v)]
        zunits, unit_of = _stage_units(tpp, model, spans) if zero == 3 else ((), None)
        uo = [unit_of.get(i, -1) for i in range(len(names))] if unit_of is not None else None
        chunks = []
        for c, lo, hi in spans:
            vs = c * pp + st
            fwd = segments(tpp, lo, hi, Phase.FWD, names, "forward", unit_of=uo, chunk_factor=factors,
                            cp_core=cores)
            bwd = segments(tpp, lo, hi, Phase.BWD, names, "backward", redo=redo,
                            unit_of=uo, chunk_factor=factors, cp_core=cores, rerun=rerun)
            if rc is Recompute.FULL:
                bwd = as_recompute(fwd) + bwd
            experts = [i for i in range(lo, hi) if own_edp and tpp.layers[i].shard.experts]
            gb = sum(trainable_params(tpp.layers[i].shard) for i in range(lo, hi)) * grad_bytes
            eb = sum(tpp.layers[i].shard.params for i in experts) * grad_bytes
            chunks.append(ChunkWork(vs, (lo, hi), tuple(fwd), tuple(bwd), float(gb - eb), float(eb)))
        params = float(sum(tpp.layers[i].shard.params for c in chunks for i in range(*c.layers)))
        trainable = math.fsum(c.grad_bytes + c.expert_grad_bytes for c in chunks) / grad_bytes  # LoRA: adapters'
        expert_params = math.fsum(c.expert_grad_bytes for c in chunks) / grad_bytes
        edp = dp * cp * tp // (par.ep * etp)
        # ZeRO: each dp x cp rank steps its share of the dense parameters, each edp rank its experts' share
        shard = math.ceil((trainable - expert_params) / (dp * cp) + expert_params / edp) if zero else int(trainable)
        opt = update_time(shard, gpu, scenario)
        stages.append(StagePlan(rank_class, tuple(chunks), params, opt, _buckets(chunks, comm.bucket_size_bytes,
                                                                                 comm.overlap), zunits,
                                expert_buckets(chunks, comm.bucket_size_bytes)))
    act = ACTIVATION_BYTES[precision]
    p2p = gather = 0.0
    if pp > 1:
        h = shape.hidden if shape else int(model.layers[ranges[0][1] - 1].output_elems)
        seq = shape.seq_len // cp if shape else 1  # each cp rank sends its own tokens
        shards = tp if tp > 1 else 1
        p2p = boundary_bytes(t.micro_batch, seq, h, act, shards)
        gather = 0.0 if (tp == 1 or t.sequence_parallel) else float(t.micro_batch * seq * h * act)
    global_batch = replica * dp
    extra = 0.0
    if rc is Recompute.FULL:
        extra = sum(x.fwd_flops for x in model.layers if _BLOCK.match(x.name))
    elif rc is Recompute.SELECTIVE:
        extra = recompute_flops(model, modules)
    # the same GPUs with no communication and no bubble: every stage busy m micro-batches, then its step
    step_s = max(m * math.fsum(c.fwd_s + c.bwd_s for c in x.chunks) + x.optimizer_s for x in stages)
    single = global_batch / step_s if step_s > 0 else 0.0
    warnings = layout.warnings
    if zero >= 2 and pp > 1:
        warnings += (f"training.parallelism.zero = {zero} with pp = {pp}: gradients are reduce_scattered every "
                     f"micro-batch ({m} per step, {m} x ZeRO-1's dp gradient traffic)"
                     + (" and parameters all_gathered twice per micro-batch" if zero == 3 else "")
                     + "; DeepSpeed's pipeline engine refuses ZeRO-2/3 with pipeline parallelism for this reason",)
    p = precision
    return MpPlan(layout, t.schedule, v, t.micro_batch, m, orders, tuple(stages), p2p, gather, comm.overlap,
                  global_batch, model.tokens_per_sample, (model_flops_per_sample(model) + extra) * global_batch, single,
                  warnings, zero, gathered_param_bytes(p, t.fp8_param_gather), grad_bytes,
                  t.tp_comm_overlap, mode, load, etp, own_edp)


def _cp_cores(tpp: TensorParallelPlan, shape: TransformerShape | None, mode: CpCommType, cp: int,
              micro_batch: int, precision: str) -> dict[int, tuple[CpAttention, CpAttention]]:
    """Every attention core's (forward, backward) under context parallelism, from the time of its part
    (`tpp` holds one ring step of it under p2p); K/V travel in the activation dtype (bf16 under fp8 recipes:
    the attention runs in high precision)."""
    assert shape is not None and shape.flash_attention, "io.rules_parallel: cp needs flash attention blocks"
    out = {}
    for i, x in enumerate(tpp.layers):
        if x.role is TpRole.HEADS:
            out[i] = cp_attention(mode, cp, tpp.tp, shape, micro_batch, ACTIVATION_BYTES[precision],
                                  x.time.fwd_s, x.time.bwd_s)
    return out


def _chunk_factors(tpp: TensorParallelPlan, gpu, precision: str, cal) -> list[float]:
    """Per layer: the efficiency of its tp-shard GEMM cut into tp sequence chunks (tp_comm_overlap's ring
    pieces), relative to the uncut shard (compute.gemm_shrink_factor; 1 for layers that are not GEMMs)."""
    n, b = tpp.tp, tpp.micro_batch
    out = []
    for x in tpp.layers:
        f = x.shard.fwd_flops * b
        gemm = x.role in (TpRole.COLUMN, TpRole.ROW) and x.shard.kind in GEMM_KINDS and f > 0
        out.append(gemm_shrink_factor(f, f / n, gpu, precision, cal) if gemm else 1.0)
    return out


def _buckets(chunks, bucket_size_bytes: float, overlap: bool) -> tuple[float, ...]:
    """Each chunk's gradients (last chunk first: backward finishes it first) in buckets of at most the cap."""
    out = []
    for c in reversed(chunks):
        n = max(1, math.ceil(c.grad_bytes / bucket_size_bytes - 1e-12)) if c.grad_bytes else 0
        out += [c.grad_bytes / n] * n
    return tuple(out)


def chunk_of_bucket(stage: StagePlan, bucket_size_bytes: float) -> list[int]:
    """The chunk index each of the stage's buckets belongs to (buckets are listed last chunk first)."""
    out = []
    for ci in reversed(range(len(stage.chunks))):
        g = stage.chunks[ci].grad_bytes
        n = max(1, math.ceil(g / bucket_size_bytes - 1e-12)) if g else 0
        out += [ci] * n
    return out
