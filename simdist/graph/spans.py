"""Time spans of an iteration's tasks, as the executor or the fold recorded them: their union, the part another
set covers, and a pipeline stage's compute, bubble and tp / dp / pp communication."""
from __future__ import annotations

import math

from simdist.graph.tasks import Collective, Compute, Graph, Stream


def union_s(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of `spans` ((start, end) pairs)."""
    total, end = 0.0, -math.inf
    for s, e in sorted(spans):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def busy_s(graph: Graph, spans: dict[int, tuple[float, float]]) -> tuple[float, float]:
    """One iteration's seconds of compute-stream work (the sum of its tasks) and of communication in flight (the
    union of every other task's span, Horovod's cycle waits left out)."""
    compute = sum(e - s for t in graph.tasks if t.stream == Stream.COMPUTE for s, e in (spans[t.id],))
    comm = union_s([spans[t.id] for t in graph.tasks
                    if t.stream != Stream.COMPUTE and getattr(t, "kind", "") != "wait"])
    return compute, comm


def covered_s(spans: list[tuple[float, float]], by: list[tuple[float, float]]) -> float:
    """Seconds of the union of `spans` that the union of `by` also covers."""
    return union_s(spans) + union_s(by) - union_s(spans + by)


def stage_terms(graph: Graph, spans: dict[int, tuple[float, float]], period_s: float,
                fused: dict[int, tuple[tuple[float, float], ...]] | None = None) -> dict[str, float]:
    """Per stage: compute, optimizer, tp, dp (and their exposed parts), pp transfer time and the bubble
    (`fused`: the tp calls inside estimate's fused tasks, as offsets from each one's start)."""
    compute = opt = 0.0
    busy: list[tuple[float, float]] = []  # the compute stream's spans
    tp, dp, pp = [], [], []
    for t in graph.tasks:
        s, e = spans[t.id]
        if isinstance(t, Compute) and t.stream == Stream.COMPUTE:
            inner = fused.get(t.id, ()) if fused else ()
            if t.kind == "optimizer":
                opt += e - s
            else:
                compute += e - s - math.fsum(b - a for a, b in inner)
            if inner:  # the chain's compute and tp calls, as the unfused graph has them
                cuts = [s, *(x for a, b in inner for x in (s + a, s + b)), e]
                busy += [(cuts[k], cuts[k + 1]) for k in range(0, len(cuts), 2) if cuts[k + 1] > cuts[k]]
                tp += [(s + a, s + b) for a, b in inner]
            else:
                busy.append((s, e))
        elif isinstance(t, Collective):
            {"tp": tp, "dp": dp}.get(t.group.split(".")[0], pp).append((s, e))
    # exposed: communication the compute stream does not hide (tp_comm_overlap's exchanges and bulk
    # collectives run beside their GEMMs; dp buckets beside backward; ZeRO's gathers beside the previous unit)
    tp_s, dp_s = union_s(tp), union_s(dp)
    exposed_tp = tp_s - covered_s(tp, busy)
    exposed_dp = dp_s - covered_s(dp, busy + tp)
    bubble = max(0.0, period_s - compute - opt - exposed_tp - exposed_dp)
    return {"compute": compute, "optimizer": opt, "tp": tp_s, "tp_exposed": exposed_tp, "dp": dp_s,
            "dp_exposed": exposed_dp, "pp": union_s(pp), "bubble": bubble, "comm": union_s(tp + dp + pp)}
