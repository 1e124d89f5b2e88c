"""A hand check for the interference tests: the closed form of what estimate's timed fold does to one
compute task (simdist/engine/closed_form.py re-times it event by event instead)."""
from __future__ import annotations


def stretched_end(start: float, work_s: float, busy: list[tuple[float, float, float]]) -> float:
    """End of `work_s` seconds of compute from `start` when it runs at 1 / (1 + s) inside each busy
    interval [begin, end) with slowdown s (the largest where they overlap): the closed form of what the
    timed pass does to one compute task (a hand-check helper)."""
    points = sorted({p for b, e, _ in busy for p in (b, e) if p > start})
    t, left = start, work_s
    for p in points:
        s = max((x for b, e, x in busy if b <= t < e), default=0.0)
        rate = 1.0 / (1.0 + s)
        if left <= (p - t) * rate:
            return t + left / rate
        left -= (p - t) * rate
        t = p
    return t + left
