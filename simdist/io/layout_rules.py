"""Which candidate layouts the loader refuses, for a whole plan space at once, with the first rule each breaks.

The rules on the layout keys (io/resolve.py: dp x tp x pp x cp = the GPUs, the global batch over dp,
_model_parallel_keys; io/rules_parallel.py pipeline_issues; io/rules_relevance.py's micro-batch, schedule and
loss-scaling rules) are arithmetic on the grid's arrays; the rules that read the model or the GPU
(tensor_parallel_issues, precision_issues, parallelism_issues, sharded_issues, zero_model_issues) are the loader's
own functions, called once per distinct value of the fields they read, on the reference scenario with those
fields replaced. tests/planner/test_layout_exact.py checks the verdicts against loading every candidate.
The planner reaches this through the loader it is given (io/sweep_load.py PointLoader.invalid_layouts).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import numpy as np

from simdist.io.rules_parallel import (context_parallel_issues, expert_parallel_issues, tensor_parallel_issues,
                                       zero_model_issues)
from simdist.io.rules_precision import precision_issues
from simdist.io.rules_relevance import relevance_issues
from simdist.io.rules_training import parallelism_issues, sharded_issues
from simdist.planner.layout_space import RECOMPUTES, SCHEDULES, LayoutGrid, replica_batch
from simdist.scenario import PipelineSchedule, Precision, Recompute
import simdist.strategies.mp_plan as mp_plan
from simdist.strategies.plan import is_model_parallel

_INTERLEAVED = SCHEDULES.index("interleaved")
_NONE, _FULL, _SELECTIVE = RECOMPUTES.index("none"), RECOMPUTES.index("full"), RECOMPUTES.index("selective")
_SELECTIVE_OP = RECOMPUTES.index("selective_op") if "selective_op" in RECOMPUTES else -1


def invalid_reasons(g: LayoutGrid) -> np.ndarray:
    """Per candidate, the first rule it breaks ('' where it loads), as the loader words it."""
    reasons = np.full(g.n, "", dtype=object)
    for mask, text in _rules(g):
        new = mask & (reasons == "")
        if new.any():
            idx = np.flatnonzero(new)
            reasons[idx] = [text(int(i)) for i in idx]
    return reasons


def _rules(g: LayoutGrid):
    """(mask of the candidates breaking it, its message for candidate i), in the loader's order."""
    s = g.reference
    t, w, comm = s.training, s.workload, s.communication
    tp, pp, dp, cp, zero, v, mb = (g[k] for k in ("tp", "pp", "dp", "cp", "zero", "v", "mb"))
    rc, sched, sp = g["recompute"], g["schedule"], g["sp"].astype(bool)
    G = g.gpus
    ranks = tp * pp * cp
    yield g.dp_given & (dp * ranks != G), \
        lambda i: (f"training.parallelism: dp x tp x pp = {dp[i]} x {tp[i]} x {pp[i]}{f' x cp {cp[i]}' if cp[i] > 1 else ''}"
                   f" = {dp[i] * ranks[i]}; expected the cluster's {G} GPUs")
    yield ~g.dp_given & (dp == 0), lambda i: f"training.parallelism: tp x pp = {ranks[i]} does not divide the {G} GPUs"
    k = t.grad_accumulation
    if w.global_batch is not None:
        yield (dp > 0) & (w.global_batch % np.maximum(dp * k, 1) != 0), \
            lambda i: f"workload.global_batch: got {w.global_batch}; expected a multiple of dp x grad_accumulation"
    yield sp & (tp == 1), lambda i: "training.sequence_parallel: got true; it needs training.parallelism.tp > 1"
    if t.tp_comm_overlap:
        yield ~sp, lambda i: "training.tp_comm_overlap: got true; it needs training.sequence_parallel: true"
    if t.placement_order is not None:
        many = (dp > 1).astype(int) + (tp > 1) + (pp > 1) + (cp > 1)
        yield many < 2, lambda i: f"training.placement_order: got {t.placement_order!r}; two of dp, tp, pp exceed 1"
        if "cp" not in t.placement_order.split(","):
            yield cp > 1, lambda i: "training.placement_order: with training.parallelism.cp > 1 it names cp too"
    if getattr(t, "cp_comm_type", None) is not None and _given_cp_comm(s):
        yield cp == 1, lambda i: "training.cp_comm_type: read only with training.parallelism.cp > 1"
    yield (rc != _NONE) & (tp == 1) & (pp == 1) & (cp == 1) & (g["ep"] == 1) & (zero == 0), \
        lambda i: f"training.recompute: got '{RECOMPUTES[rc[i]]}'; modelled for model-parallel layouts only"
    if t.recompute_every != 1:
        yield rc != _FULL, lambda i: "training.recompute_every: it chooses which blocks recompute full checkpoints"
        yield (tp > 1) | (pp > 1), lambda i: "training.recompute_every: not modelled with tp or pp > 1"
    if t.recompute_modules:  # io/rules_recompute.py recompute_module_issues
        yield rc != _SELECTIVE, lambda i: (f"training.recompute_modules: got {list(t.recompute_modules)!r}; read only "
                                           f"with training.recompute: selective (got '{RECOMPUTES[rc[i]]}')")
        yield (tp == 1) & (pp == 1) & (cp == 1) & (g["ep"] == 1), \
            lambda i: (f"training.recompute_modules: got {list(t.recompute_modules)!r}; modelled for model-parallel "
                       "layouts (tp, pp, cp or ep > 1); ZeRO / FSDP data parallelism recomputes core_attn only (leave "
                       "the key unset)")
    yield (rc == _SELECTIVE_OP) & ((tp > 1) | (pp > 1)), \
        lambda i: "training.recompute: selective_op is modelled for ZeRO / FSDP data parallelism, not with tp or pp"
    inter = sched == _INTERLEAVED
    yield (v > 1) & ~(inter & (pp > 1)), \
        lambda i: f"training.virtual_stages: got {v[i]}; model chunks need schedule interleaved and pp > 1"
    yield inter & (pp > 1) & (v < 2), lambda i: "training.virtual_stages: got 1; interleaved needs >= 2 chunks"
    ep = g["ep"]
    mp = _by_flag(g, np.stack([tp, pp, cp, ep], 1),
                  lambda k: is_model_parallel(_par(s, tp=int(k[0]), pp=int(k[1]), cp=int(k[2]), ep=int(k[3]))))
    # io/rules.py on the scenario: relevance (micro-batch, schedule, loss scaling), training, model-parallel and
    # precision rules, each once per distinct value of what it reads
    yield from _by_value(g, np.stack([tp, pp, cp, ep, zero, mb, sched, g["precision"]], 1),
                         lambda k: relevance_issues(_relevant(s, g, *map(int, k))))
    yield from _by_value(g, mp.astype(np.int64),
                         lambda m: parallelism_issues(_par(s, tp=2 if m else 1, pp=1, cp=1, ep=1)))
    yield from _by_value(g, np.stack([zero, dp, cp], 1),
                         lambda key: sharded_issues(_par(s, zero=int(key[0]), dp=int(key[1]), cp=int(key[2]))))
    yield from _by_value(g, np.stack([mp, zero, rc], 1).astype(np.int64),
                         lambda key: zero_model_issues(_non_mp(s, int(key[0]), int(key[1]), RECOMPUTES[key[2]])))
    etp = np.full(g.n, t.parallelism.etp) if g.etp_given else tp
    experts = mp | (t.moe_load_imbalance != 1.0)
    yield from _by_value(g, np.where(experts[:, None], np.stack([ep, etp, tp, cp, dp, sp, zero], 1), -1),
                         lambda k: [] if k[0] < 0 else expert_parallel_issues(_layout(s, *map(int, k))))
    yield from _by_value(g, np.where(tp > 1, tp, 1), lambda x: tensor_parallel_issues(_par(s, tp=int(x))))
    model = w.model
    replica = replica_batch(g)
    if mp_plan.transformer_shape(model) is None:
        yield mp & (rc != _NONE), lambda i: "training.recompute: none for a model without attention blocks"
    safe_mb = np.maximum(mb, 1)
    yield mp & (replica % safe_mb != 0), \
        lambda i: f"training.micro_batch: got {mb[i]}; expected a divisor of the per-replica batch {replica[i]}"
    m = replica // safe_mb
    yield mp & (replica % safe_mb == 0) & inter & (m % np.maximum(pp, 1) != 0), \
        lambda i: f"training.schedule: a number of micro-batches ({m[i]}) divisible by pp ({pp[i]}) for interleaving"
    units = len(mp_plan.pipeline_units(model))
    yield mp & (pp * v > 1) & (pp * v > units) if units else mp & (pp * v > 1), \
        lambda i: f"training.parallelism.pp: got {pp[i]}; pp x virtual_stages = {pp[i] * v[i]} at most {units} blocks"
    yield from _by_value(g, np.where(mp[:, None], np.stack([cp, tp], 1), 1),
                         lambda k: context_parallel_issues(_par(s, cp=int(k[0]), tp=int(k[1]))))
    yield from _by_value(g, g["precision"], lambda p: precision_issues(_precision(s, g.precisions[int(p)])))


def _by_value(g: LayoutGrid, keys: np.ndarray, issues_of: Callable[[Any], list]):
    """The rules `issues_of` checks, once per distinct key (a row of `keys`), spread over the candidates."""
    flat = keys.reshape(g.n, -1)
    distinct, inverse = np.unique(flat, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    for j, key in enumerate(distinct):
        k = key if flat.shape[1] > 1 else key[0]
        found = issues_of(k)
        if found:
            text = "; ".join(str(x) for x in found)
            yield inverse == j, (lambda i, text=text: text)


def _by_flag(g: LayoutGrid, keys: np.ndarray, flag: Callable[[Any], bool]) -> np.ndarray:
    """`flag` per candidate, computed once per distinct key (a row of `keys`)."""
    distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
    return np.asarray([bool(flag(k)) for k in distinct])[inverse.reshape(-1)]


def _relevant(s, g: LayoutGrid, tp: int, pp: int, cp: int, ep: int, zero: int, mb: int, sched: int, precision: int):
    t = s.training
    par = replace(t.parallelism, tp=tp, pp=pp, cp=cp, ep=ep, zero=zero)
    return replace(s, training=replace(t, parallelism=par, micro_batch=mb,
                                       schedule=PipelineSchedule(SCHEDULES[sched])),
                   workload=replace(s.workload, precision=Precision(g.precisions[precision])))


def _par(s, **fields):
    t = s.training
    par = t.parallelism
    return replace(s, training=replace(t, parallelism=replace(par, **fields)))


def _layout(s, ep: int, etp: int, tp: int, cp: int, dp: int, sp: int, zero: int):
    t = s.training
    par = replace(t.parallelism, ep=ep, etp=etp, tp=tp, cp=cp, dp=dp, zero=zero)
    return replace(s, training=replace(t, parallelism=par, sequence_parallel=bool(sp)))


def _non_mp(s, mp: int, zero: int, recompute: str):
    t = s.training
    par = replace(t.parallelism, tp=2 if mp else 1, pp=1, cp=1, zero=zero)
    return replace(s, training=replace(t, parallelism=par, recompute=Recompute(recompute)))


def _precision(s, precision: str):
    return replace(s, workload=replace(s.workload, precision=Precision(precision)))


def _given_cp_comm(s) -> bool:
    return False  # the resolved spec always holds a cp_comm_type; a given one is refused at cp 1 by the loader
