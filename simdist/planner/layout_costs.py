"""Memory per GPU and the compute bound of every candidate layout of a plan, without a Scenario per candidate.

A model-parallel layout's compute bound (planner/bound.py: the busiest pipeline stage's micro-batches x its
chunks' forward and backward, plus its optimizer step) and its memory per GPU (strategies/rank_memory.py, through
strategies/sharding.model_parallel_memory) are sums over layers of per-layer figures that depend on only a few of
the layout's numbers: a layer's time on a tp rank on (tp, micro-batch, precision, sequence parallelism), its
shard on (tp, sequence parallelism). So they are computed here once per such key with the engine's own functions
(tensor_parallel_plan, shard_model, layer_activation_bytes, balance_stages, update_time, model_state_bytes), the
pipeline's cut once per (key, recomputation, stages), and combined over dp, ZeRO and the micro-batch count in
numpy. This re-implements build_mp_plan's sums and model_parallel_memory's; tests/planner/test_layout_exact.py
checks both equal the scalar functions on every candidate of a small space. Layouts this module does not cover
(expert parallelism, mixture-of-experts models, LoRA's frozen layers, tp_comm_overlap, data parallelism alone) are
left to the scalar path (layout_search.py), which checks them one by one with the run's own functions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from simdist.compute import ACTIVATION_BYTES, DTYPE_BYTES
from simdist.low_precision import RECIPES, gathered_param_bytes
from simdist.memory import (FRAMEWORK_RESERVE_BYTES, layer_activation_bytes, model_state_bytes, quantized_copy_bytes,
                            saved_gemm_input_bytes)
from simdist.planner.bound import blocking_tp
from simdist.planner.layout_space import RECOMPUTES, SCHEDULES, LayoutGrid, replica_batch
from simdist.results.cost import cluster_price_per_hour
from simdist.scenario import CpCommType, Precision, Recompute
from simdist.strategies.context_parallel import buffer_bytes as cp_buffer_bytes
from simdist.strategies.context_parallel import ring_steps, shard_sequence
from simdist.strategies.mp_plan import _BLOCK, _cp_cores, pipeline_units, transformer_shape
from simdist.strategies.pipeline_schedule import balance_stages
from simdist.strategies.chunk_segments import segments
from simdist.strategies.recompute_policy import recomputes_layer, rerun_spans, selective_modules
from simdist.strategies.sharding import fsdp_units
from simdist.strategies.tensor_parallel import Phase, TpRole, layer_role, shard_model, tensor_parallel_plan
from simdist.strategies.update_cost import update_time

PARTS = ("weights", "gradients", "optimizer_states", "activations", "buffers", "workspace")


@dataclass
class LayoutCosts:
    """Per candidate: memory per GPU of its tightest stage, whether every stage fits, the first stage that
    does not fit (-1: none) with its six parts, and its compute bound (iteration seconds, samples/s)."""

    memory_bytes: np.ndarray
    fits: np.ndarray
    parts: np.ndarray  # (n, 6): the parts of the first stage that does not fit, else of the tightest stage
    failing_stage: np.ndarray
    bound_s: np.ndarray
    bound_samples_per_s: np.ndarray
    covered: np.ndarray  # computed here (False: left to the scalar path)
    capacity_bytes: float
    gpu: str
    tokens_per_sample: float | None
    price_per_hour: float


@dataclass
class _Layers:
    """Per layer, for one (tp, micro-batch, precision, sequence parallelism): the plan's times and shard params."""

    fwd: np.ndarray
    bwd: np.ndarray
    heads_fwd: np.ndarray  # fwd where selective recomputation repeats the layer (its modules: the attention cores)
    params: np.ndarray  # tp rank's parameters (tensor_parallel_plan's shards)
    total: list[float]
    fwd_list: list[float]
    tpp: Any  # the tensor_parallel_plan these come from, and its context-parallel attention cores
    cores: dict


@dataclass
class _Shard:
    """Per layer, for one (tp, sequence parallelism): what memory reads of the shard."""

    params: np.ndarray
    saved: np.ndarray
    live: np.ndarray
    block: np.ndarray  # inside a transformer block
    heads: np.ndarray  # an attention core (counted once per block)
    others_saved: np.ndarray  # saved elements of the layers outside blocks (0 inside)
    embed: int | None
    tied_heads: np.ndarray  # an LM head without parameters (tied to the embedding)
    units: list[tuple[np.ndarray, float]]  # FSDP units: their layers and parameters
    model: Any  # the sharded model (its layers, for Transformer Engine's quantized weight copies)


class _Context:
    """What every candidate shares: the model, GPU, units, and caches per key."""

    def __init__(self, s: Any):
        self.s = s
        self.model = s.workload.model
        self.gpu = s.cluster.node_groups[0].gpu
        self.shape = transformer_shape(self.model)
        self.units = pipeline_units(self.model)
        self.roles = [layer_role(x) for x in self.model.layers]
        self.n = len(self.model.layers)
        self.block = np.asarray([bool(self.shape is not None and _BLOCK.match(x.name)) for x in self.model.layers])
        self.grad_bytes = DTYPE_BYTES[s.workload.grad_dtype]
        self.cp_mode = CpCommType(s.training.cp_comm_type)
        self.modules = selective_modules(Recompute.SELECTIVE, s.training.recompute_modules)  # under selective
        self.names = [x.name for x in self.model.layers]
        self._layers: dict = {}
        self._shards: dict = {}
        self._ranges: dict = {}
        self._calls: dict = {}
        self._update: dict = {}
        self._states: dict = {}
        self._scenarios: dict = {}

    def scenario(self, precision: str):
        if precision not in self._scenarios:
            self._scenarios[precision] = replace(self.s, workload=replace(self.s.workload,
                                                                          precision=Precision(precision)))
        return self._scenarios[precision]

    def layers(self, tp: int, mb: int, precision: str, sp: bool, cp: int) -> _Layers:
        """build_mp_plan's per-layer times: under cp the model on s / cp tokens, each attention core's segment
        its ring steps' compute (mp_plan._cp_cores), its balancing cost the part's time x the ring steps."""
        key = (tp, mb, precision, sp, cp)
        if key not in self._layers:
            tpp = tensor_parallel_plan(shard_sequence(self.model, cp, self.cp_mode), self.gpu, mb, precision, tp, sp,
                                       self.s.compute_calibration, heads=self.shape.heads if self.shape else None,
                                       accumulation_bytes=self.grad_bytes, reference=self.model if cp > 1 else None)
            cores = _cp_cores(tpp, self.shape, self.cp_mode, cp, mb, precision) if cp > 1 else {}
            steps = ring_steps(cp, self.cp_mode)
            fwd = [cores[i][0].compute_s if i in cores else x.time.fwd_s for i, x in enumerate(tpp.layers)]
            bwd = [cores[i][1].compute_s if i in cores else x.time.bwd_s for i, x in enumerate(tpp.layers)]
            mult = [steps if i in cores else 1 for i in range(len(tpp.layers))]
            self._layers[key] = _Layers(
                np.asarray(fwd), np.asarray(bwd),
                np.asarray([f if recomputes_layer(x.shard.name, self.modules) else 0.0
                            for f, x in zip(fwd, tpp.layers)]),
                np.asarray([float(x.shard.params) for x in tpp.layers]),
                [x.time.total_s * k for x, k in zip(tpp.layers, mult)], [x.time.fwd_s * k for x, k in zip(tpp.layers, mult)],
                tpp, cores)
        return self._layers[key]

    def layer_calls(self, key: tuple, rc: Recompute) -> dict[tuple, np.ndarray]:
        """The blocking tp calls per micro-batch as build_mp_plan's segments have them (chunk_segments.segments:
        forward, backward with the modules rerun whole, the forward again under full recomputation), counted as
        bound.pipeline_bound_s counts them: (op, bytes) -> the running count over the layers each call belongs to
        (a chunk [lo, hi) has c[hi] - c[lo]). A segment's calls do not depend on where chunks are cut (a module
        rerun whole lies inside one), so one pass over the whole model serves every cut."""
        k = (key, rc)
        if k not in self._calls:
            lay, n = self._layers[key], len(self.names)
            fwd = segments(lay.tpp, 0, n, Phase.FWD, self.names, "forward", cp_core=lay.cores)
            bwd = segments(lay.tpp, 0, n, Phase.BWD, self.names, "backward", cp_core=lay.cores,
                           rerun=rerun_spans(self.model, selective_modules(rc, self.s.training.recompute_modules)))
            counts: dict[tuple, np.ndarray] = {}
            for seg in (*fwd, *bwd, *(fwd if rc is Recompute.FULL else ())):
                if blocking_tp(seg):
                    counts.setdefault((seg.call.op, seg.call.size_bytes), np.zeros(n + 1))[seg.call.layer + 1] += 1
            self._calls[k] = {c: np.cumsum(x) for c, x in counts.items()}
        return self._calls[k]

    def shard(self, tp: int, sp: bool, cp: int) -> _Shard:
        key = (tp, sp, cp)
        if key not in self._shards:
            sh = shard_model(shard_sequence(self.model, cp, self.cp_mode), tp, sp)
            roles = self.roles
            saved = np.asarray([float(x.saved_elems) for x in sh.layers])
            units = [(np.asarray(u.layers), float(u.params)) for u in fsdp_units(sh)]
            self._shards[key] = _Shard(
                np.asarray([float(x.params) for x in sh.layers]), saved,
                np.asarray([float(x.input_elems + x.output_elems) for x in sh.layers]), self.block,
                np.asarray([r is TpRole.HEADS for r in roles]) & self.block, np.where(self.block, 0.0, saved),
                next((i for i, r in enumerate(roles) if r is TpRole.VOCAB_EMBEDDING), None),
                np.asarray([r is TpRole.VOCAB_HEAD and x.params == 0 for r, x in zip(roles, sh.layers)]), units, sh)
        return self._shards[key]

    def ranges(self, layers: _Layers, key: tuple, full: bool, stages: int) -> list[tuple[int, int]]:
        """The pipeline's cut as build_mp_plan makes it (the same unit costs, the same balance_stages)."""
        k = (key, full, stages)
        if k not in self._ranges:
            cost = [t + (f if full else 0.0) for t, f in zip(layers.total, layers.fwd_list)]
            us = self.units if stages > 1 else [(0, self.n)]
            ucost = [math.fsum(cost[a:b]) for a, b in us]
            self._ranges[k] = [(us[a][0], us[b - 1][1]) for a, b in balance_stages(ucost, stages)]
        return self._ranges[k]

    def update_s(self, precision: str, shard: int) -> float:
        k = (precision, shard)
        if k not in self._update:
            self._update[k] = update_time(shard, self.gpu, self.scenario(precision))
        return self._update[k]

    def states(self, params: float, precision: str, zero: int, dp: int, qcopy: float) -> tuple[float, float, float]:
        k = (params, precision, zero, dp, qcopy)
        if k not in self._states:
            t, w = self.s.training, self.s.workload
            self._states[k] = model_state_bytes(params, precision, t.optimizer.value, w.grad_dtype.value, zero, dp,
                                                qcopy)
        return self._states[k]


def layout_costs(g: LayoutGrid, valid: np.ndarray, tp_floors: Callable | None = None) -> LayoutCosts:
    """Memory and compute bound of every valid candidate this module covers (`covered`); NaN elsewhere.
    `tp_floors(tp, pp, dp, cp)`: that layout's bound.tp_floor, whose blocking tp calls the bound then counts
    (bound.pipeline_bound_s); None: compute alone."""
    s = g.reference
    ctx = _Context(s)
    n = g.n
    tp, pp, dp, cp, zero, v, mb = (g[k] for k in ("tp", "pp", "dp", "cp", "zero", "v", "mb"))
    covered = valid & ((tp > 1) | (pp > 1) | (cp > 1)) & (g["ep"] == 1) & (not s.training.tp_comm_overlap) \
        & (ctx.model.moe is None) & (not any(x.frozen for x in ctx.model.layers))
    mem = np.full(n, np.nan)
    fits = np.zeros(n, dtype=bool)
    parts = np.full((n, len(PARTS)), np.nan)
    failing = np.full(n, -1, dtype=np.int64)
    bound = np.full(n, np.nan)
    replica = replica_batch(g)
    keys = np.stack([tp, mb, g["precision"], g["sp"], g["recompute"], pp, v, g["schedule"], cp], 1)
    idx = np.flatnonzero(covered)
    if idx.size:
        distinct, inverse = np.unique(keys[idx], axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        order = np.argsort(inverse, kind="stable")
        bounds_at = np.searchsorted(inverse[order], np.arange(len(distinct) + 1))
        for j, key in enumerate(distinct):
            members = idx[order[bounds_at[j]:bounds_at[j + 1]]]
            _class(ctx, g, tuple(int(x) for x in key), members, dp, zero, replica, mem, fits, parts, failing, bound,
                   tp_floors)
    gb = replica * np.maximum(dp, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(bound > 0, gb / bound, np.nan)
    return LayoutCosts(mem, fits, parts, failing, bound, rate, covered, float(ctx.gpu.memory_bytes), ctx.gpu.key,
                       ctx.model.tokens_per_sample, cluster_price_per_hour(s))


def _class(ctx: _Context, g: LayoutGrid, key: tuple, members: np.ndarray, dp_all, zero_all, replica_all,
           mem, fits, parts, failing, bound, tp_floors: Callable | None) -> None:
    """One class of candidates (same tp, micro-batch, precision, sp, recompute, pp, v, schedule): its stages
    once, then each candidate's dp, ZeRO stage and micro-batch count."""
    tp, mb, pi, sp, ri, pp, v, si, cp = key
    precision, rc, schedule = g.precisions[pi], Recompute(RECOMPUTES[ri]), SCHEDULES[si]
    s, gpu = ctx.s, ctx.gpu
    lay = ctx.layers(tp, mb, precision, bool(sp), cp)
    full, selective = rc is Recompute.FULL, rc is Recompute.SELECTIVE
    ranges = ctx.ranges(lay, (tp, mb, precision, bool(sp), cp), full, pp * v)
    work_layer = lay.fwd + lay.bwd + (lay.heads_fwd if selective else 0.0) + (lay.fwd if full else 0.0)
    cw = np.concatenate([[0.0], np.cumsum(work_layer)])
    back_layer = work_layer - lay.fwd
    cf, cb = np.concatenate([[0.0], np.cumsum(lay.fwd)]), np.concatenate([[0.0], np.cumsum(back_layer)])
    # the pipeline's fill and drain (bound.py pipeline_bound): stage r starts after the forwards of chunk 0
    # of the stages before it, and its last backward is followed by theirs
    head = np.concatenate([[0.0], np.cumsum([cf[hi] - cf[lo] for lo, hi in ranges[:pp]])])
    tail = np.concatenate([[0.0], np.cumsum([cb[hi] - cb[lo] for lo, hi in ranges[:pp]])])
    cparams = np.concatenate([[0.0], np.cumsum(lay.params)])
    # memory: model_parallel_memory over the plan's ranges, at the precision the GPU runs
    run = gpu.runs_as(precision)
    act = ACTIVATION_BYTES[run]
    gemm_input = saved_gemm_input_bytes(run, act)
    param_bytes = gathered_param_bytes(run, s.training.fp8_param_gather)  # sharding.model_parallel_memory's
    sh = ctx.shard(tp, bool(sp), cp)
    shape = ctx.shape
    cp_buffers = 0.0
    if cp > 1:  # rank_memory._stage_memory: the blocks' formula at s / cp, the attention's K/V buffers
        shape = replace(shape, cp=cp)
        cp_buffers = cp_buffer_bytes(ctx.cp_mode, shape, mb, cp, tp, act)
    per_layer = layer_activation_bytes(shape, mb, tp, bool(sp), rc, act, gemm_input, ctx.modules) if shape else 0.0
    per_none = layer_activation_bytes(shape, mb, tp, bool(sp), Recompute.NONE, act, gemm_input) if shape else 0.0
    owner = np.empty(ctx.n, dtype=np.int64)
    for c, (lo, hi) in enumerate(ranges):
        owner[lo:hi] = c % pp
    zeros = zero_all[members]
    any3 = bool((zeros >= 3).any())
    stage = []
    for r in range(pp):
        mine = np.flatnonzero(owner == r)
        spans = [ranges[c] for c in range(r, pp * v, pp)]
        work = math.fsum(cw[hi] - cw[lo] for lo, hi in spans)
        plan_params = float(sum(cparams[hi] - cparams[lo] for lo, hi in spans))
        params = math.fsum(sh.params[mine])
        if pp > 1 and sh.tied_heads[mine].any() and sh.embed is not None and owner[sh.embed] != r:
            params += sh.params[sh.embed]
        blocks = int(sh.heads[mine].sum())
        acts = blocks * per_layer + mb * act * math.fsum(sh.others_saved[mine])
        transient = mb * act * float(sh.live[mine].max()) if mine.size else 0.0
        if blocks and rc is not Recompute.NONE:
            transient += per_none - per_layer
        gathered = _gathered(sh, owner, r, param_bytes) if any3 else 0.0
        qcopy = quantized_copy_bytes([sh.model.layers[i] for i in mine], run, gpu) if run in RECIPES else 0.0
        stage.append((work, plan_params, params, acts, transient, gathered, qcopy))
    extra2 = min(s.communication.bucket_size_bytes, max(
        (cparams[hi] - cparams[lo]) * ctx.grad_bytes for lo, hi in ranges))
    extra3 = _largest_unit(ctx, lay, ranges) * ctx.grad_bytes if any3 else 0.0
    dps = dp_all[members]
    m = replica_all[members] // mb
    tp_s = np.zeros((pp, members.size))  # per stage and candidate: a micro-batch's blocking tp calls at their floor
    if tp_floors is not None and tp > 1:
        calls = [_stage_calls(ctx, (tp, mb, precision, bool(sp), cp), [ranges[c] for c in range(r, pp * v, pp)], rc)
                 for r in range(pp)]
        for d in np.unique(dps):
            floor = tp_floors(tp, pp, int(d), cp)
            for r in range(pp):
                tp_s[r, dps == d] = math.fsum(n * floor(r, op, size) for (op, size), n in calls[r].items())
    best = np.full(members.size, -np.inf)
    first_fail = np.full(members.size, -1, dtype=np.int64)
    worst = np.full(members.size, -np.inf)
    out_parts = np.full((members.size, len(PARTS)), np.nan)
    extra = np.where(zeros == 2, extra2, np.where(zeros == 3, extra3, 0.0)) + cp_buffers
    grad_dp = dps * cp  # ZeRO shards (and the optimizer steps) over dp x cp
    opt0 = None
    for r, (work, plan_params, params, acts, transient, gathered, qcopy) in enumerate(stage):
        shard = [math.ceil(plan_params / d) if z else int(plan_params) for d, z in zip(grad_dp, zeros)]
        opt = np.asarray([ctx.update_s(precision, x) for x in shard])
        opt0 = opt if opt0 is None else opt0
        best = np.maximum(best, head[r] + m * (work + tp_s[r]) + np.maximum(opt, tail[r] + opt0))
        wgs = np.asarray([ctx.states(params, run, int(z), int(d), qcopy) for d, z in zip(grad_dp, zeros)])
        flight = _in_flight(schedule, pp, m, r, v)
        activations = acts * flight
        workspace = FRAMEWORK_RESERVE_BYTES + transient + np.where(zeros >= 3, gathered, 0.0)
        stage_parts = np.column_stack([wgs[:, 0], wgs[:, 1], wgs[:, 2], activations, extra, workspace])
        total = stage_parts.sum(axis=1)
        newly = (total > ctx.gpu.memory_bytes) & (first_fail < 0)
        first_fail[newly] = r
        out_parts[newly] = stage_parts[newly]
        tighter = (total > worst) & (first_fail < 0)
        out_parts[tighter] = stage_parts[tighter]
        worst = np.maximum(worst, total)
    mem[members] = worst
    fits[members] = first_fail < 0
    parts[members] = out_parts
    failing[members] = first_fail
    bound[members] = best


def _stage_calls(ctx: _Context, key: tuple, spans, rc: Recompute) -> dict[tuple, int]:
    """The blocking tp calls of a stage's chunks per micro-batch, (op, bytes) -> count (_Context.layer_calls)."""
    counts = {call: int(sum(c[hi] - c[lo] for lo, hi in spans)) for call, c in ctx.layer_calls(key, rc).items()}
    return {call: n for call, n in counts.items() if n}


def _in_flight(schedule: str, pp: int, m: np.ndarray, stage: int, v: int) -> np.ndarray:
    """memory.in_flight_micro_batches over an array of micro-batch counts."""
    if pp == 1:
        return np.ones(m.shape)
    if schedule == "gpipe":
        return m.astype(float)
    if schedule == "1f1b":
        return np.minimum(pp - stage, m).astype(float)
    return np.minimum(2 * (pp - stage - 1) + (v - 1) * pp + 1, m * v) / v


def _gathered(sh: _Shard, owner: np.ndarray, r: int, param_bytes: int) -> float:
    """zero3_live_param_bytes of the FSDP units wholly on stage r: the largest unit and the next one."""
    sizes = [p * param_bytes for layers, p in sh.units if layers.size and (owner[layers] == r).all()]
    if len(sizes) < 2:
        return float(sum(sizes))
    return float(max(a + b for a, b in zip(sizes, sizes[1:])))


def _largest_unit(ctx: _Context, lay: _Layers, ranges) -> float:
    """The largest ZeRO-3 unit of the plan (mp_plan._stage_units): a block, or a chunk's other layers."""
    best = 0.0
    for lo, hi in ranges:
        own: dict[str, float] = {}
        for i in range(lo, hi):
            mt = _BLOCK.match(ctx.model.layers[i].name)
            key = mt.group(1) if mt else ("root" if lay.params[i] else None)
            if key is not None:
                own[key] = own.get(key, 0.0) + lay.params[i]
        best = max([best, *own.values()])
    return best

