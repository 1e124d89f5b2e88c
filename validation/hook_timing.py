"""In-step codec timing: the wall time a DDP communication hook spends on its own work (encode, decode, the
hook's bookkeeping) inside the measured step, with the time its collectives are in flight taken out.

Why: a codec's cost timed outside the step (the one-rank codec probe) is not what the step pays. On a
shared CPU the 4 ranks' hooks run at the same time, time-sliced with each other and with gloo's threads,
and the probe missed that in both directions (int8 15-30 % slow, PowerSGD 20-25 % fast). Timing the
hook inside the step needs no change to the hooks themselves (torch's fp16 / PowerSGD hooks, or
validation/hooks.py's codec hook):

* `PhaseClock` (validation/ddp_case.py) records each bucket's hook span: from DDP's call of the hook to
  the completion of the future it returned (encode, collectives, decode);
* `CollectiveLog.patched()` wraps `torch.distributed.all_reduce` / `all_gather` / `all_to_all_single`
  (the functions every hook calls through the module) and records each collective's span: issue to
  completion (a blocking call: its duration; an async one: until its future completes);
* the step's timeline, built from every rank's spans measured from the step's start (each step starts
  from a barrier): a bucket's hook runs from the LATEST rank's call (earlier ranks are waiting for a
  peer's backward pass, which is compute) to the latest completion; a collective transfers for the MIN
  over ranks of its span (the rank that reaches it last waits for nobody; on the others the rest of the
  span is waiting for that rank's encode), ending at its latest completion;
* the step's codec time is the union of the hooks' runs minus the union of the transfers: the time the
  hooks' own code (encode, decode, on whichever rank the others wait for) holds the step with nothing on
  the wire. Every hook here runs one collective at a time per bucket (PowerSGD: 1-D tensors, then P, then
  Q), so for one bucket this is its encode + decode on the step's critical path; with several buckets in
  flight it is the codec time not hidden behind another bucket's collective (a collective queued behind
  another is queued on every rank, so its queueing stays communication).

`codec_own` (each rank's own spans: its hook's span minus its collectives' whole spans, MAX over ranks;
waiting for a peer's encode not counted) is kept next to it: it is what a one-rank view of the hook sees,
and on 4 ranks time-sliced on 2 cores it is well below what the step pays.
"""
from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence

Interval = tuple[float, float]

COLLECTIVES = ("all_reduce", "all_gather", "all_to_all_single")  # what torch's and validation/hooks.py's hooks call


def union(spans: Iterable[Interval]) -> list[Interval]:
    """Disjoint, sorted intervals covering `spans` (empty and reversed spans dropped)."""
    out: list[list[float]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def length(spans: Iterable[Interval]) -> float:
    """Total time covered by `spans` (overlaps counted once)."""
    return sum(b - a for a, b in union(spans))


def covered_outside(spans: Iterable[Interval], holes: Iterable[Interval]) -> float:
    """Time covered by `spans` and by none of `holes`: |U spans \\ U holes|."""
    s, h = union(spans), union(holes)
    inside = 0.0
    for a, b in s:
        for c, d in h:
            lo, hi = max(a, c), min(b, d)
            if hi > lo:
                inside += hi - lo
    return sum(b - a for a, b in s) - inside


class CollectiveLog:
    """Spans (issue, completion) of the collectives called through `torch.distributed` while `patched()`.

    Thread-safe: PowerSGD issues its P and Q all_reduces from gloo's callback threads.
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self._spans: list[Interval] = []
        self._lock = threading.Lock()

    def spans(self) -> list[Interval]:
        with self._lock:
            return list(self._spans)

    def clear(self) -> None:
        with self._lock:
            self._spans = []

    def _add(self, t0: float) -> None:
        t1 = self.clock()
        with self._lock:
            self._spans.append((t0, t1))

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn` (a torch.distributed collective) that records its span here."""
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = self.clock()
            work = fn(*args, **kwargs)
            if work is None:  # blocking: done on return
                self._add(t0)
            else:  # async_op=True: done when its future completes (callbacks run in the order added)
                work.get_future().add_done_callback(lambda _fut: self._add(t0))
            return work

        timed.__wrapped__ = fn  # type: ignore[attr-defined]
        return timed

    @contextmanager
    def patched(self, module: Any = None) -> Iterator["CollectiveLog"]:
        """Record the collectives of `module` (default torch.distributed) until the block ends; restores them."""
        if module is None:
            import torch.distributed as module  # type: ignore[no-redef]
        originals = {name: getattr(module, name) for name in COLLECTIVES if hasattr(module, name)}
        try:
            for name, fn in originals.items():
                setattr(module, name, self.wrap(fn))
            yield self
        finally:
            for name, fn in originals.items():
                setattr(module, name, fn)


def in_hooks(hook_spans: Iterable[Interval], collective_spans: Iterable[Interval]) -> list[Interval]:
    """The collectives that overlap some hook span, in the order they were issued (the same on every rank)."""
    hooks = list(hook_spans)
    return sorted(c for c in collective_spans if any(c[0] < b and a < c[1] for a, b in hooks))


def merged_timeline(hook_start: Sequence[float], hook_end: Sequence[float], coll_end: Sequence[float],
                    coll_span: Sequence[float]) -> tuple[dict[int, Interval], list[Interval]]:
    """The step's hook runs and collective transfers from the per-rank figures reduced over ranks (times from
    the step's start): hook_start / hook_end / coll_end the MAX over ranks, coll_span the MIN (module
    docstring). A collective some rank did not run (span inf, end -inf) is left out."""
    hooks = {i: (a, b) for i, (a, b) in enumerate(zip(hook_start, hook_end)) if b > a}
    colls = [(e - d, e) for e, d in zip(coll_end, coll_span) if math.isfinite(e) and math.isfinite(d)]
    return hooks, colls


def split_step(hook_spans: dict[int, Interval], collective_spans: list[Interval]) -> dict[str, Any]:
    """One step's hook work: {"codec": the hooks' spans not covered by a collective, "collectives": the rest,
    "bucket_codec": {index: that bucket's codec s}} (module docstring). Either one rank's own spans
    (`codec_own`) or the step's merged timeline (`merged_timeline`)."""
    spans = list(hook_spans.values())
    codec = covered_outside(spans, collective_spans)
    return {"codec": codec, "collectives": length(spans) - codec,
            "bucket_codec": {i: covered_outside([s], collective_spans) for i, s in hook_spans.items()}}
