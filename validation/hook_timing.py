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
* a bucket's codec time is its hook span minus the time any collective was in flight during it, and a
  step's codec time is the union of hook spans minus the union of collective spans: the time a hook was
  running its own code with nothing on the wire. Every hook here runs one collective at a time per bucket
  (PowerSGD: 1-D tensors, then P, then Q), so for one bucket this is exactly encode + decode; with several
  buckets in flight it is the codec time not hidden behind another bucket's collective.

The waiting of a rank whose peers are still encoding is collective time (it is spent inside the
collective), so the MAX over ranks of the codec time is the slowest rank's own encode/decode.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

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


def split_step(hook_spans: dict[int, Interval], collective_spans: list[Interval]) -> dict[str, Any]:
    """One step's hook work: {"codec": step codec s, "collectives": collective time within the hooks' spans,
    "bucket_codec": {index: that bucket's codec s}} (see the module docstring)."""
    spans = list(hook_spans.values())
    codec = covered_outside(spans, collective_spans)
    return {"codec": codec, "collectives": length(spans) - codec,
            "bucket_codec": {i: covered_outside([s], collective_spans) for i, s in hook_spans.items()}}
