"""A pipeline chunk's forward or backward as compute segments cut at its tensor-parallel collectives: the
segments the model-parallel plan (strategies/mp_plan.py) gives each chunk and the pipeline graph
(strategies/pipeline_graph.py) turns into tasks. Recomputation repeats forward segments before a backward;
training.tp_comm_overlap makes each block GEMM one segment overlapped with its collectives (`_overlapped`)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from simdist.collectives.schedule import CollectiveOp
from simdist.strategies.context_parallel import CpAttention
from simdist.strategies.tensor_parallel import Phase, TensorParallelPlan, TpCollective, TpRole, When


class Overlap(StrEnum):
    """How a segment's tp collective runs against its compute (training.tp_comm_overlap)."""

    NONE = ""  # compute, then the collective; the next segment waits for it
    RING_AG = "ring_ag"  # the all_gather as tp - 1 ring exchanges, each beside the GEMM chunk of the piece it has
    RING_RS = "ring_rs"  # the GEMM in tp chunks, each chunk's partial sums sent on beside the next chunk's GEMM
    BULK = "bulk"  # the whole collective beside the whole compute (a column GEMM's dgrad and wgrad in backward)


@dataclass(frozen=True)
class Segment:
    """Compute of `compute_s` seconds (layers `name`), then the tp collective `call` (None: none); with
    `overlap` the call runs beside the compute instead (`compute_s` is then the chunked GEMMs' total).
    `unit`: the stage's ZeRO-3 unit whose gathered parameters the compute needs (-1: none). `cp`: an attention
    core under context parallelism (its ring steps or cp collectives; `compute_s` is their compute)."""

    compute_s: float
    name: str
    call: TpCollective | None = None
    kind: str = "forward"
    unit: int = -1
    overlap: Overlap = Overlap.NONE
    cp: CpAttention | None = None


def segments(tpp: TensorParallelPlan, lo: int, hi: int, phase: Phase, names, kind: str,
              redo: dict[int, float] | None = None, unit_of: list[int] | None = None,
              chunk_factor: list[float] | None = None,
              cp_core: dict[int, tuple[CpAttention, CpAttention]] | None = None,
              rerun: dict[int, tuple[int, ...]] | None = None) -> list[Segment]:
    """Compute cut at the tp collectives of layers lo..hi-1 in `phase` (backward runs them in reverse), and
    at ZeRO-3 unit boundaries (`unit_of`: layer -> stage unit). With `chunk_factor` (tp_comm_overlap: per
    layer, the efficiency of its GEMM cut into tp chunks) each block GEMM becomes one overlapped segment.
    With `cp_core` (context parallelism: the (forward, backward) of an attention core) each core is its own
    segment, its forward again before its backward when recomputed. `redo`: layer -> the forward seconds run again
    just before its backward (selective recomputation's modules, recompute_policy.recompute_seconds). `rerun`:
    modules checkpointed whole (last layer -> first layers, outermost first: recompute_policy.rerun_spans), whose
    forward segments, tp collectives included, run again when the backward reaches them (Megatron-Core's
    tensor_parallel.checkpoint around MoELayer under `moe`, the MLP under `mlp`, the shared experts)."""
    out: list[Segment] = []
    redo = redo or {}
    rerun_at = (rerun or {}) if phase is Phase.BWD else {}
    acc, first, last, cur = 0.0, None, None, -1
    order = range(lo, hi) if phase is Phase.FWD else range(hi - 1, lo - 1, -1)

    def flush(call):
        nonlocal acc, first
        label = f"{kind} {names[first]}..{names[last]}" if first is not None else f"{kind}"
        out.append(Segment(acc, label, call, kind, cur))
        acc, first = 0.0, None

    for i in order:
        layer = tpp.layers[i]
        u = unit_of[i] if unit_of is not None else -1
        if u != cur:
            if first is not None:
                flush(None)
            cur = u
        if i in rerun_at:
            if first is not None:
                flush(None)
            for start in rerun_at[i]:
                assert lo <= start, "pipeline_units: chunks are cut between blocks"
                out += as_recompute(segments(tpp, start, i + 1, Phase.FWD, names, "forward", unit_of=unit_of,
                                               chunk_factor=chunk_factor, cp_core=cp_core))
        calls = [c for c in layer.collectives if c.phase is phase]
        t = layer.time.fwd_s if phase is Phase.FWD else layer.time.bwd_s
        if cp_core and i in cp_core:
            if first is not None:
                flush(None)
            fwd, bwd = cp_core[i]
            atts = [fwd] if phase is Phase.FWD else ([fwd, bwd] if i in redo else [bwd])
            out += [Segment(a.compute_s, f"{kind} {names[i]} (cp {a.mode.value})", None, kind, cur, cp=a)
                    for a in atts]
            continue
        if chunk_factor is not None and calls and layer.role in (TpRole.COLUMN, TpRole.ROW):
            if first is not None:
                flush(None)
            if i in redo:  # its forward GEMM again (a module checkpointed whole reruns its collectives: rerun)
                out.append(Segment(redo[i], f"{kind} {names[i]} (recompute)", None, kind, cur))
            out += _overlapped(layer, calls, t, chunk_factor[i], f"{kind} {names[i]}", kind, cur, phase)
            continue
        for c in calls:
            if c.when is When.BEFORE:
                flush(c)
        if first is None:
            first = i
        last = i
        acc += t
        if i in redo:
            acc += redo[i]  # the module's forward recomputed before its backward
        for c in calls:
            if c.when is When.AFTER:
                flush(c)
    if first is not None or acc:
        flush(None)
    return [s for s in out if s.compute_s > 0 or s.call is not None]


def as_recompute(segments: list[Segment]) -> list[Segment]:
    """Forward segments run again before a backward (recomputation), named and kinded so."""
    return [replace(x, name=x.name.replace("forward", "recompute", 1), kind="recompute") for x in segments]


def _overlapped(layer, calls, t: float, factor: float, label: str, kind: str, unit: int,
                phase: Phase) -> list[Segment]:
    """A block GEMM with its sequence-parallel collectives overlapped (Transformer Engine's userbuffers, as
    Megatron-LM's --tp-comm-overlap configures them): the forward all_gather before a column GEMM and the
    backward all_gather before a row GEMM run as ring exchanges beside the GEMM chunks, the forward
    reduce_scatter after a row GEMM is pipelined with them; a column GEMM's backward runs its input
    re-gather beside the dgrad GEMM and its input-gradient reduce_scatter beside the wgrad GEMM (bulk)."""
    if len(calls) == 2:  # column backward: all_gather (for wgrad) before, reduce_scatter (of dgrad) after
        ag, rs = sorted(calls, key=lambda c: c.when is When.AFTER)
        half = t / 2  # dgrad and wgrad: one forward's FLOPs each
        return [Segment(half, f"{label} dgrad", ag, kind, unit, Overlap.BULK),
                Segment(half, f"{label} wgrad", rs, kind, unit, Overlap.BULK)]
    (c,) = calls
    mode = Overlap.RING_AG if c.op is CollectiveOp.ALL_GATHER else Overlap.RING_RS
    return [Segment(t / factor, label, c, kind, unit, mode)]
