"""Reference timing of any schedule on an idle uniform star: every endpoint has one full-duplex link
of `bandwidth_Bps` to a non-blocking switch and every step pays `alpha_s` once per repetition.

This is the fabric on which the closed forms of cost.py hold, so tests use it to check that each
schedule realises its closed form. Lockstep steps move at the slowest transfer's max-min share
(an endpoint with k transfers out or in gives each B/k); independent (lockstep=False) steps end
when the most loaded endpoint has moved its bytes (exact for the symmetric patterns built here).
Chains are aligned step by step and their concurrent steps share the endpoints' links.
"""
from __future__ import annotations

from collections import Counter

from simdist.collectives.schedule import Schedule, Step


def _step_time(steps: list[Step], alpha_s: float, bandwidth_Bps: float) -> float:
    transfers = [t for s in steps for t in s.transfers]
    delay = max(s.delay_s for s in steps)
    if not transfers:
        return delay
    if all(s.lockstep for s in steps):
        repeats = {s.repeat for s in steps if s.transfers}
        sizes = {t.size_bytes for t in transfers}
        if len(repeats) != 1 or len(sizes) != 1:
            raise ValueError("concurrent lockstep steps must share repeat and transfer size")
        out = Counter(t.src for t in transfers)
        inn = Counter(t.dst for t in transfers)
        k = max(max(out.values()), max(inn.values()))
        return repeats.pop() * (alpha_s + k * sizes.pop() / bandwidth_Bps) + delay
    repeats = {s.repeat for s in steps if not s.lockstep and s.transfers}
    if len(repeats) > 1:
        raise ValueError("concurrent independent steps must share repeat on the star")
    repeat = repeats.pop() if repeats else 1
    out: Counter = Counter()
    inn: Counter = Counter()
    for t in transfers:
        out[t.src] += t.size_bytes
        inn[t.dst] += t.size_bytes
    load = max(max(out.values()), max(inn.values()))
    return repeat * (alpha_s + load / bandwidth_Bps) + delay


def star_time(schedule: Schedule, alpha_s: float, bandwidth_Bps: float) -> float:
    """Seconds `schedule` takes on the idle uniform star described in the module docstring."""
    longest = max((len(c) for c in schedule.chains), default=0)
    return sum(
        _step_time([c[i] for c in schedule.chains if i < len(c)], alpha_s, bandwidth_Bps) for i in range(longest)
    )


def endpoint_bytes(schedule: Schedule) -> tuple[Counter, Counter]:
    """Bytes each endpoint sends and receives over the whole schedule (repeats counted)."""
    sent: Counter = Counter()
    received: Counter = Counter()
    for chain in schedule.chains:
        for step in chain:
            for t in step.transfers:
                sent[t.src] += t.size_bytes * step.repeat
                received[t.dst] += t.size_bytes * step.repeat
    return sent, received
