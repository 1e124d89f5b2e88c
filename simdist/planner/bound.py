"""An upper bound on a candidate's throughput from its compute alone, to skip candidates in `plan`.

Every data-parallel iteration a rank takes runs its forward and backward passes for each of its k
micro-batches and then its optimizer step, which waits for the last bucket's exchange
(strategies/data_parallel.py bsp_graph; local SGD's local steps likewise): in the plan the engine
builds (strategies/plan.py build_plan), rank class c spends at least `k (fwd_s + bwd_s) + optimizer_s`
(scaled by its slowdown; `optimizer_s` is 0 under a parameter server, whose servers apply the update)
per iteration of k x `batch` samples, whatever the bucket size, codec or overlap does on top
(communication, compression kernels and interference only add time). So a cluster processes at most

    sum over classes of  len(ranks) x batch x k / (k (fwd_s + bwd_s) + optimizer_s)   samples per second

(the engine's own "linear" rate, `single_gpu_samples_per_s`, except for the PS case), and tokens per
second are that times the model's tokens per sample. Nothing under `communication.` changes a rank's
compute, and only the strategy (parameter server or not) changes its optimizer step, so one bound
serves every candidate that differs from another only in communication keys other than the strategy
(a "compute class"). `plan` estimates classes best bound first and skips a class whose bound cannot
reach the top-k or the Pareto front of what it has already estimated.

Bounded here, each by the plan its engine builds:

* data-parallel training (`build_plan`), with ZeRO/FSDP by its sharded plan (`build_sharded_plan`: its
  classes carry the recomputation in backward and the optimizer step on the shard, and the sharded
  collectives only add time);
* tensor/pipeline parallelism (`build_mp_plan`): every stage runs each of its chunks' forward and backward
  segments (recomputation included) for every micro-batch, then its optimizer step, so an iteration of
  `global_batch` samples takes at least the busiest stage's `micro_batches x sum over chunks (fwd_s + bwd_s)
  + optimizer_s` (tp collectives, pipeline sends, bubbles and dp exchanges only add), and the rate is at most
  global_batch over that (a layout plan's arrays also count the pipeline's fill and drain and each stage's
  blocking tp calls at their floor: `pipeline_bound_s`, `tp_floor`);
* failures: a result under failures reports the healthy run's rate (`engine/composite.py healthy_scenario`,
  the scenario without its failures) and a goodput ratio <= 1 (useful time over wall time), so the healthy
  scenario's bound bounds both the rate and the useful rate (rate x ratio) the goodput objective ranks by.
  No keys under `failures.` change the healthy run, so they are compute-free too.

Not bounded (`no_bound_reason` says which; the plan always estimates them and reports how many): a
dynamic batch split (it moves samples between ranks, and a rank's compute rate at another batch is not
bounded by its rate at this one: the compute model does not promise per-sample time falls with batch),
hybrid sync (two phases, each its own engine path), a benchmark workload (no training rate), and a
candidate whose plan cannot be built (it is estimated and gets its reason).
`plan` also checks every estimated candidate against its class's bound and stops skipping
(estimating everything it skipped) if one ever exceeds it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

from simdist.engine.composite import healthy_scenario, is_phased
from simdist.engine.context_cache import estimate_context
from simdist.engine.mp_groups import endpoint_group, group_schedule
from simdist.layout import Axis, build_layout
from simdist.network.congruence import GroupClasses
from simdist.results.cost import cluster_price_per_hour
from simdist.scenario import SyncMode
from simdist.strategies.chunk_segments import Overlap
from simdist.strategies.expert_parallel import EpCollective
from simdist.strategies.mp_plan import build_mp_plan
from simdist.strategies.plan import build_plan, is_model_parallel
from simdist.strategies.sharded_dp import build_sharded_plan

COMPUTE_FREE_PREFIXES = ("communication.", "failures")  # axis keys that never change a rank's compute ...
COMPUTE_KEYS = ("communication.strategy",)  # ... except this one (a PS worker runs no optimizer step)


def is_compute_free(key: str) -> bool:
    """Whether an axis key leaves every candidate's compute bound unchanged (the healthy run's, under failures)."""
    return (key.startswith(COMPUTE_FREE_PREFIXES[0]) or key == "failures" or key.startswith("failures.")) \
        and key not in COMPUTE_KEYS


@dataclass(frozen=True)
class ClassBound:
    """What a compute class can at best reach: samples (and tokens) per second, and its price per hour."""

    samples_per_s: float
    tokens_per_sample: float | None
    price_per_hour: float | None


def no_bound_reason(scenario: Any) -> str | None:
    """Why `compute_bound` gives no bound for `scenario` (None: it may give one)."""
    if scenario.workload.benchmark is not None or scenario.workload.model is None:
        return "a benchmark workload"
    s = _healthy(scenario)
    if s.training.sync is SyncMode.HYBRID:
        return "hybrid sync"
    if is_phased(s):
        return "dynamic batch split"
    return None


def _healthy(scenario: Any) -> Any:
    if scenario.failures is None:
        return scenario

    return healthy_scenario(scenario)


TpFloor = Callable[[int, Any, float], float]  # (stage, op, bytes) -> seconds, at most what estimate charges


def pipeline_bound_s(mp, tp_floor: TpFloor | None = None) -> float:
    """A lower bound on a model-parallel iteration (an MpPlan) that counts the pipeline's fill and drain.

    Stage r runs all its chunks' forward and backward segments for every micro-batch (W_r each) on one compute
    stream. Its first operation is a forward, which waits for the forwards of that micro-batch on every stage
    before it, chunk 0 of each at least (H_r = sum over i < r of f_i,0); its last operation is a backward
    (every forward's backward follows it on the same stage), after which the backwards of that micro-batch on
    the stages before it run, chunk 0 of each at least (T_r = sum over i < r of b_i,0), then stage 0's
    optimizer step. So the iteration takes at least max over r of
    H_r + m W_r + max(optimizer_r, T_r + optimizer_0); communication only adds. With identical stages of one
    chunk this is 1F1B's (m + pp - 1)(f + b) plus the step; it is never below `compute_bound`'s busiest stage.
    With `tp_floor` (`tp_floor`'s) W_r also counts the stage's blocking tp calls, each at its floor: a
    segment's compute waits for the call before it (pipeline_graph._chunk), so the stage's compute stream is
    idle while one runs."""
    stages = mp.stages
    head = tail = 0.0
    best = 0.0
    for r, st in enumerate(stages):
        calls = math.fsum(tp_floor(r, x.call.op, x.call.size_bytes) for c in st.chunks for x in (*c.fwd, *c.bwd)
                          if blocking_tp(x)) if tp_floor is not None else 0.0
        work = mp.micro_batches * (math.fsum(c.fwd_s + c.bwd_s for c in st.chunks) + calls)
        best = max(best, head + work + max(st.optimizer_s, tail + stages[0].optimizer_s))
        head += st.chunks[0].fwd_s
        tail += st.chunks[0].bwd_s
    return best


def blocking_tp(segment) -> bool:
    """A segment whose tp collective runs after its compute on the stage's tp group (not beside it, not an
    expert group's dispatch)."""
    return segment.call is not None and segment.overlap is Overlap.NONE and not isinstance(segment.call, EpCollective)


def tp_floor(scenario: Any) -> TpFloor:
    """Per pipeline stage, the seconds of a tp call on the stage's first tp group alone on the idle fabric, on
    the analytical network and context that estimate uses. Estimate charges the union of the stage's tp groups
    at once (engine/mp_groups.py), and static congestion only adds load on shared links, so this never exceeds
    it; memoised per congruence class of the group (network/congruence.py), op and size."""
    t = scenario.training
    par = t.parallelism
    ctx = estimate_context(scenario)
    layout = build_layout(scenario.cluster, par.dp, par.tp, par.pp, t.placement_order, par.cp)
    groups, pipelines = layout.joint_groups((Axis.TP,)), layout.pp_groups()
    firsts = []
    for stage in range(layout.pp):
        mine = {g[stage] for g in pipelines}
        firsts.append(endpoint_group(ctx.topology, next(g for g in groups if g[0] in mine)))
    net, memo = ctx.analytical(), {}
    classes = GroupClasses(ctx.scenario, ctx.topology, net)  # congruent groups take the same time

    def floor(stage: int, op, size_bytes: float) -> float:
        key = (classes.of(f"tp floor {stage}", "tp", [firsts[stage]]), op, size_bytes)
        if key not in memo:
            memo[key] = net.schedule_time(group_schedule(ctx, firsts[stage], op, size_bytes, "tp"))
        return memo[key]
    return floor


def layout_tp_floors(reference: Any) -> Callable[[int, int, int, int], TpFloor]:
    """`tp_floor` of each (tp, pp, dp, cp) layout of `reference` (its cluster, placement and communication),
    built once per layout: what planner/layout_costs.py counts the blocking tp calls with."""
    memo: dict[tuple, TpFloor] = {}

    def floors(tp: int, pp: int, dp: int, cp: int) -> TpFloor:
        key = (tp, pp, dp, cp)
        if key not in memo:
            t = reference.training
            par = replace(t.parallelism, tp=tp, pp=pp, dp=dp, cp=cp)
            memo[key] = tp_floor(replace(reference, training=replace(t, parallelism=par)))
        return memo[key]
    return floors


def compute_bound(scenario: Any) -> ClassBound | None:
    """The class bound of `scenario`, or None where the bound above is not known to hold."""
    if no_bound_reason(scenario):
        return None
    try:
        s = _healthy(scenario)
        if is_model_parallel(s):
            mp = build_mp_plan(s)
            busiest = max(mp.micro_batches * math.fsum(c.fwd_s + c.bwd_s for c in st.chunks) + st.optimizer_s
                          for st in mp.stages)
            rate, tokens = (mp.global_batch / busiest if busiest > 0 else math.inf), mp.tokens_per_sample
        else:
            plan = build_plan(s)
            if s.training.parallelism.zero:
                plan = build_sharded_plan(s, plan).plan
            k = plan.micro_steps
            rate = sum(len(c.rank_class.ranks) * c.rank_class.batch * k / (k * (c.fwd_s + c.bwd_s) + c.optimizer_s)
                       for c in plan.classes)
            tokens = plan.tokens_per_sample
        price = cluster_price_per_hour(scenario)
    except Exception:  # noqa: BLE001 - a candidate that cannot be planned is estimated (and gets its reason)
        return None
    if not (rate > 0 and math.isfinite(rate)):
        return None
    return ClassBound(rate, tokens, price)
