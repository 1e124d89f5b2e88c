"""A pipeline iteration's steady state folded once and repeated, exactly.

Adding d micro-batches to a 1F1B or interleaved schedule (d = 1, or pp when interleaved) adds to every stage's
graph one more block of its steady state: the graphs for m_long = m_short + d are those for m_short with a
block of n_k tasks inserted at position q_k of stage k (`insertion`: found by aligning the two graphs' tasks,
their shapes, dependencies and stream order). Once the graphs for m_long are folded, `repeat_of` checks that
the inserted block and the L blocks before it each run λ seconds after the block before them (every task of
every stage), and that nothing reaches further back: the block's tasks wait only for tasks of that window or
of the block, the tasks after it only for the block and each other, the tasks before it for nothing later
(a collective waits for the prerequisites of each member, but not for a receive posted at the start). The
fold is a max-plus recurrence, so then every further block repeats the last one λ later and everything after
them comes λ later per block: the iteration of m micro-batches is `expanded` from the shorter one's spans
without building or folding its tasks (docs/performance.md). Where a check fails, the caller folds the whole
graphs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simdist.graph.spans import FusedCalls, SpanTable
from simdist.graph.tasks import Collective, Compute, Graph, Stream

UNSETTLED, REACHES = "unsettled", "reaches"  # why a shorter run does not repeat
WINDOW = 2  # blocks before the inserted one that must repeat it (L); the block may wait on tasks that far back
TOLERANCE = 1e-12  # relative to the iteration's end: what "λ later" allows for the fold's rounding


def _shape(t) -> tuple:
    """What a task must share with its counterpart in another block (its name and key carry micro-batch indices)."""
    return (type(t), t.stream, getattr(t, "group", None), getattr(t, "op", None), getattr(t, "size_bytes", None),
            getattr(t, "duration_s", None), getattr(t, "kind", None))


def _prerequisites(g: Graph) -> list[tuple[int, ...]]:
    """Per task: its dependencies and the previous task on its stream, sorted, keeping of those on one stream only
    the latest: a stream runs its tasks in order, so it ends after the others (ZeRO 2's optimizer step, which
    waits for every micro-batch's reduce_scatter, waits in effect for the last)."""
    prev = g.prerequisites()[2]
    streams = [t.stream for t in g.tasks]
    out = []
    for t in g.tasks:
        before = prev[t.id]
        pre = set(t.deps)
        if before >= 0:
            pre.add(before)
        if len(pre) > 1:
            latest: dict = {}
            for d in pre:
                key = streams[d] if streams[d] is not None else ("unordered", d)
                if latest.get(key, -1) < d:
                    latest[key] = d
            if len(latest) < len(pre):
                pre = set(latest.values())
        out.append(tuple(sorted(pre)))
    return out


def insertion(short: Graph, long: Graph, pb: list[tuple[int, ...]]) -> tuple[int, int] | None:
    """(q, n): `long` is `short` with n tasks inserted at q (tasks after them waiting on the inserted ones as they
    waited on the n before q in `short`), or None (`pb`: `long`'s prerequisites); the largest such q, the block
    starting anywhere in a repeating run.

    Task i >= q of `short` must have the shape of task i + n of `long`, and each prerequisite y of that task must
    be the matching one of task i: y itself where y < q, y - n where y >= q. So a prerequisite equal in both
    asks q > y, one n apart asks q <= y, and any other rules out every q <= i: each task allows an interval of
    q, and q is valid when every task from q on allows it. One pass from the end keeps that intersection."""
    a, b = [_shape(t) for t in short.tasks], [_shape(t) for t in long.tasks]
    pa = _prerequisites(short)
    n = len(b) - len(a)
    if n <= 0:
        return None
    top = 0
    while top < len(a) and a[top] == b[top] and pa[top] == pb[top]:
        top += 1
    lowest = max(n, top - n)
    lo, hi = -1, len(b)  # the q every task from q on allows: lo < q <= hi
    for q in range(len(a), lowest - 1, -1):
        if q < len(a):  # take in task q
            mine, theirs = pa[q], pb[q + n]
            if a[q] != b[q + n] or len(mine) != len(theirs):
                return None
            for x, y in zip(mine, theirs):
                if x == y:
                    lo = max(lo, y)
                elif x == y - n:
                    hi = min(hi, y)
                else:
                    return None
            if lo >= hi:
                return None
        if q <= top and lo < q <= hi:
            return q, n
    return None


@dataclass(frozen=True)
class Repeat:
    """Per class the inserted block [at, at + size) of the longer graphs, and the seconds λ (`period_s`) each
    repetition of it adds."""

    at: tuple[int, ...]
    size: tuple[int, ...]
    period_s: float


def repeat_of(graphs: list[Graph], blocks: list[tuple[int, int]], spans: list[np.ndarray],
              pre: list[list[tuple[int, ...]]], slowdown=None) -> Repeat | str:
    """The repeat that the folded longer graphs (`spans`: per class an (n, 2) array of starts and ends; `pre`:
    their prerequisites) show, or why not: UNSETTLED (the window does not repeat yet: a longer run may) or
    REACHES (a task reaches outside the window: a longer run would too) (module docstring). `slowdown(class index, op)`: a class's compute runs slower while its collectives
    of a positive slowdown run, so each compute must also overlap only such collectives of its own block or
    older ones (`_overlaps_repeat`)."""
    members: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for k, g in enumerate(graphs):
        for t in g.tasks:
            if isinstance(t, Collective):
                members.setdefault((t.group, t.key), []).append((k, t.id))
    q0, n0 = blocks[0]
    period = float(spans[0][q0, 0] - spans[0][q0 - n0, 0]) if q0 >= n0 else 0.0
    end = max(float(s[:, 1].max()) for s in spans if len(s))
    tol = TOLERANCE * max(end, 1e-300)

    def waits(k: int, y: int) -> tuple[list[int], list[tuple[int, int]]]:
        """What task y of class k waits for: its prerequisites, and (a collective) every other member whose
        arrival can matter (one posted at the start, waiting for nothing, cannot) with that member's."""
        t, mates = graphs[k].tasks[y], []
        if isinstance(t, Collective):
            mates = [(kk, x) for kk, yy in members[(t.group, t.key)] if (kk, yy) != (k, y) and pre[kk][yy]
                     for x in (yy, *pre[kk][yy])]
        return list(pre[k][y]), mates

    def block(k: int, y: int) -> int:
        """0: the inserted block, j > 0: the j-th before it, -1: after it."""
        q, n = blocks[k]
        return -1 if y >= q + n else (0 if y >= q else (q - y - 1) // n + 1)

    for k, (q, n) in enumerate(blocks):
        win = np.arange(q - (WINDOW - 1) * n, q + n)
        if q < WINDOW * n or not np.all(np.abs(spans[k][win] - spans[k][win - n] - period) <= tol):
            return UNSETTLED
    for k, (g, (q, n)) in enumerate(zip(graphs, blocks)):
        for y in range(q - (WINDOW - 1) * n, q + n):
            if _shape(g.tasks[y]) != _shape(g.tasks[y - n]) or pre[k][y] != tuple(x + n for x in pre[k][y - n]):
                return REACHES
            if sorted(waits(k, y)[1]) != sorted((kk, x + blocks[kk][1]) for kk, x in waits(k, y - n)[1]):
                return REACHES
        for y in range(len(g.tasks)):
            mine = block(k, y)
            own, mates = waits(k, y)
            if not all(_reaches(mine, block(k, x), True) for x in own) or \
                    not all(_reaches(mine, block(kk, x), False) for kk, x in mates):
                return REACHES
        if slowdown is not None and not _overlaps_repeat(g, spans[k], [block(k, y) for y in range(len(g.tasks))],
                                                         slowdown):
            return REACHES
    return Repeat(tuple(q for q, _ in blocks), tuple(n for _, n in blocks), period)


def _overlaps_repeat(graph: Graph, spans: np.ndarray, blocks: list[int], slowdown) -> bool:
    """With interference a compute task's span depends on the class's collectives running beside it: the repeat
    holds where the inserted block's computes overlap only collectives of their own block or older ones (a
    repeated block then meets the same ones, a period later), those after it none older than the window, and
    those before it none of the block or after it (what does not move in the expansion meets only what does not
    move: a decomposed GEMM split across two older blocks is fine)."""
    index = graph.rank_class.index
    work = np.array([t.id for t in graph.tasks if isinstance(t, Compute) and t.stream == Stream.COMPUTE], dtype=int)
    calls = np.array([t.id for t in graph.tasks if isinstance(t, Collective) and slowdown(index, str(t.op)) > 0],
                     dtype=int)
    if not len(work) or not len(calls):
        return True
    age = np.array(blocks)
    age[age < 0] = -1  # after the inserted block: the newest
    w_age, c_age = age[work], age[calls]
    for a in np.unique(w_age):
        mine = work[w_age == a]
        # before the block nothing moves: a compute there may overlap any collective before the block too
        newer = calls[(c_age <= 0) if a > 0 else ((c_age < a) | (c_age > WINDOW))]
        if _meets(spans[newer], spans[mine]).any():
            return False
    return True


def _meets(intervals: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Per query (start, end): whether it overlaps one of `intervals` (start < the other's end, both ways)."""
    if not len(intervals):
        return np.zeros(len(queries), dtype=bool)
    s, e = intervals[np.argsort(intervals[:, 0])].T
    reach = np.maximum.accumulate(e)
    first = np.flatnonzero(np.r_[True, s[1:] >= reach[:-1]])  # disjoint runs (touching ones apart)
    run_s, run_e = s[first], reach[np.r_[first[1:] - 1, len(s) - 1]]
    i = np.searchsorted(run_s, queries[:, 1], side="left") - 1  # the last run starting before the query ends
    return (i >= 0) & (run_e[np.maximum(i, 0)] > queries[:, 0])


def _reaches(mine: int, theirs: int, own: bool) -> bool:
    """Whether a task of block `mine` (-1: after the inserted block) may wait on one of block `theirs` (its
    own class's, or another's through a collective) for the repeat to hold."""
    if mine > 0:
        return theirs > 0  # before the block: nothing that the repeats move
    if mine == 0:
        return 0 <= theirs <= WINDOW  # the block: the window, which repeats λ apart
    return theirs <= 0 if own else theirs <= WINDOW  # after it: its own class's block (the others' relative)


def expanded(graph: Graph, spans: np.ndarray, repeat: Repeat, k: int, times: int,
             fused: dict[int, FusedCalls] | None = None) -> SpanTable:
    """Class k's iteration with its inserted block `times` more times (each λ after the last) and what follows
    that many λ later, as a SpanTable (roles, fused tp spans and the communication mask repeated with them)."""
    q, n, lam = repeat.at[k], repeat.size[k], repeat.period_s
    ids = np.arange(len(graph.tasks))
    order = np.concatenate([ids[:q + n], np.tile(ids[q:q + n], times), ids[q + n:]])
    shift = np.concatenate([np.zeros(q + n), np.repeat(np.arange(1, times + 1) * lam, n),
                            np.full(len(ids) - q - n, times * lam)])
    table = SpanTable.of(graph, spans, fused)
    inner = {key: np.flatnonzero(np.isin(order, members)) for key, members in table.inner.items()}
    return SpanTable(table.start[order] + shift, table.end[order] + shift, table.role[order], inner,
                     table.comm[order])


def fold_repeated(graphs_for, micro_batches: int, sizes, fold_spans,
                  slowdown=None) -> tuple[list[Graph], list[SpanTable]] | None:
    """The SpanTable per class of the iteration of `micro_batches` (with the shorter graphs it came from), from the
    first (m_short, m_long) of `sizes` whose longer graphs repeat (`graphs_for(m)`: the graphs and their fused tp
    spans for m micro-batches; `fold_spans(graphs, fused)`: per class an (n, 2) array of task spans and the fused
    tp spans as they ran; `slowdown`: the interference that `fold_spans` ran with), or None."""
    for short, long in sizes:
        few, _ = graphs_for(short)
        graphs, fused = graphs_for(long)
        pre = [_prerequisites(g) for g in graphs]
        blocks = [insertion(a, b, p) for a, b, p in zip(few, graphs, pre)]
        if any(b is None for b in blocks):
            return None  # the graphs do not grow by one block: a longer run will not either
        spans, fused = fold_spans(graphs, fused)
        repeat = repeat_of(graphs, blocks, spans, pre, slowdown)  # type: ignore[arg-type]
        if repeat == REACHES:
            return None
        if isinstance(repeat, Repeat):
            times = (micro_batches - long) // (long - short)
            return graphs, [expanded(g, s, repeat, k, times, f) for k, (g, s, f) in enumerate(zip(graphs, spans, fused))]
    return None
