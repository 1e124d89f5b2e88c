"""Expert parallelism's process groups as Megatron-Core lays them out, and its uneven all-to-alls on them.

Megatron-Core (megatron/core/parallel_state.py's expert rank generator, order "tp-ep-dp-pp" over the expert
degrees) re-reads each pipeline stage's tp x cp x dp GPUs as etp x ep x edp, etp innermost, so edp = tp cp dp /
(ep etp). The dispatcher's all-to-alls run on the ep groups: in the dispatch direction (group kind "ep": the hot
expert's GPU receives g x its share) or the combine direction ("epc": it sends g x), the expert GEMMs' all-gather
and reduce-scatter on the etp groups, the experts' gradients on the edp groups.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from simdist.collectives.all_to_all import LABEL, with_send_bytes
from simdist.collectives.schedule import Group, Schedule
from simdist.strategies.expert_parallel import ExpertLoad, dispatch_matrix

EXPERT_AXES = ("ep", "epc", "etp")  # EpCollective.axis: dispatch- and combine-direction all-to-alls, etp calls
EP_KINDS = ("ep", "epc")  # process-group kinds whose all-to-alls carry the expert load's uneven matrix


def expert_group(stage: int, axis: str) -> str:
    """The stage's expert groups along `axis` (EXPERT_AXES); named under tp so that the breakdown counts their
    calls with the stage's other model-parallel collectives."""
    assert axis in EXPERT_AXES, axis
    return f"tp.s{stage}.{axis}"


def edp_group(stage: int) -> str:
    """The stage's expert-data-parallel groups (the routed experts' gradients)."""
    return f"dp.s{stage}.edp"


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
    grid = np.asarray(ranks, dtype=np.int64).reshape(n // (ep * etp), ep, etp)  # [edp][ep][etp]

    def groups(last_varies: np.ndarray) -> tuple[tuple[int, ...], ...]:
        flat = last_varies.reshape(-1, last_varies.shape[-1])
        return tuple(sorted(tuple(int(r) for r in row) for row in flat))

    return ExpertGroups(ep=groups(grid.transpose(0, 2, 1)), etp=groups(grid), edp=groups(grid.transpose(1, 2, 0)))


def stage_expert_groups(layout, stage: int, stage_ranks: Sequence[int], ep: int, etp: int,
                        own_edp: bool) -> list[tuple[str, str, tuple]]:
    """(name, process-group kind, groups) of a stage's expert groups: its ranks (`stage_ranks`) ordered as
    Megatron-Core orders the dense ones (tp fastest, then cp, then dp), re-read by expert_groups; the edp groups
    only where the experts' gradients do not simply go over the dense dp x cp groups (`own_edp`)."""
    coords = {r: layout.coords(r) for r in stage_ranks}
    ordered = sorted(stage_ranks, key=lambda r: (coords[r].dp, coords[r].cp, coords[r].tp))
    g = expert_groups(ordered, ep, etp)
    out = [(expert_group(stage, "ep"), "ep", g.ep), (expert_group(stage, "epc"), "epc", g.ep),
           (expert_group(stage, "etp"), "tp", g.etp)]
    if own_edp:
        out.append((edp_group(stage), "dp", g.edp))
    return out


def uneven_all_to_all(balanced: Schedule, group: Group, kind: str, load: ExpertLoad) -> Schedule:
    """The backend's balanced all-to-all of one ep group (its per-rank buffer R as `balanced.size_bytes`)
    carrying the expert load: the dispatch matrix ("ep"), or its transpose ("epc"); the hot expert's GPU is the
    group's first rank."""
    assert any(step.label.startswith(LABEL) for chain in balanced.chains for step in chain), \
        "io.rules_parallel: expert parallelism runs NCCL's point-to-point all-to-all"
    m = dispatch_matrix(balanced.size_bytes, load)
    return with_send_bytes(balanced, group, m.T.copy() if kind == "epc" else m)


def busy_link_time_s(net, schedule: Schedule) -> float:
    """An uneven all-to-all alone on the idle fabric, as max-min sharing runs it: each step lasts its latency, then
    the most bytes any link carries over that link's capacity (every flow at most its own per-flow cap), then its
    delay; step i of every chain runs at once. Max-min keeps that busiest link busy to the end (a flow on it that
    finishes leaves its share to the rest), so the flow network takes exactly this on these node-structured
    all-to-alls, where the static sharing of the analytical network (each link split by its flow count) charges
    every flow on a link at the largest one's size (`net`: the context's AnalyticalNetwork: its compiled steps
    and link capacities)."""
    compiled = [[net.steps.get(s) for s in chain] for chain in schedule.chains]
    capacity = net.capacity_Bps
    total = 0.0
    for i in range(max((len(c) for c in compiled), default=0)):
        stage = [c[i] for c in compiled if i < len(c)]
        groups = [g for cs in stage for g in cs.groups]
        move = 0.0
        if groups:
            load = np.bincount(np.concatenate([g.links for g in groups]),
                               weights=np.concatenate([g.link_bytes for g in groups]), minlength=capacity.size)
            used = load > 0
            move = max(float((load[used] / capacity[used]).max()) if used.any() else 0.0,
                       max(g.size_bytes / g.cap_Bps for g in groups))
        total += max(cs.latency_s + cs.delay_s for cs in stage) + move
    return total
