"""Symbolic execution of schedules for tests: each rank holds, per block of the buffer, a Counter of
the contributions summed into it (a Counter, so double counting shows up)."""
from __future__ import annotations

from collections import Counter

from simdist.collectives.schedule import Step

State = dict[int, dict[int, Counter]]


def initial(ranks, blocks: int) -> State:
    """Every rank holds its own contribution in every block."""
    return {r: {b: Counter({r: 1}) for b in range(blocks)} for r in ranks}


def full(ranks) -> Counter:
    return Counter({r: 1 for r in ranks})


def rings_of(step: Step) -> list[tuple[int, ...]]:
    """The rings a ring step's transfers form, each in position order from its first transfer."""
    nxt = {t.src: t.dst for t in step.transfers}
    assert len(nxt) == len(step.transfers), "a rank sends twice in a ring step"
    seen, rings = set(), []
    for t in step.transfers:
        if t.src in seen:
            continue
        ring, r = [], t.src
        while r not in seen:
            seen.add(r)
            ring.append(r)
            r = nxt[r]
        assert r == ring[0], "ring transfers do not close a cycle"
        rings.append(tuple(ring))
    return rings


def split(blocks: list[int], n: int) -> list[list[int]]:
    assert len(blocks) % n == 0
    k = len(blocks) // n
    return [blocks[i * k : (i + 1) * k] for i in range(n)]


def ring_reduce_scatter(state: State, step: Step, ranges: dict, block_bytes: float) -> dict:
    """Apply a ring reduce-scatter step: rep k, position i sends chunk (i-k-1) mod n of its range."""
    new_ranges = {}
    for ring in rings_of(step):
        n = len(ring)
        chunks = split(ranges[ring[0]], n)
        assert all(ranges[r] == ranges[ring[0]] for r in ring)
        assert step.repeat == n - 1
        for k in range(n - 1):
            sends = [(ring[i], ring[(i + 1) % n], chunks[(i - k - 1) % n]) for i in range(n)]
            snap = {(s, b): Counter(state[s][b]) for s, _, ch in sends for b in ch}
            for s, d, ch in sends:
                for b in ch:
                    assert not (set(state[d][b]) & set(snap[(s, b)])), "double counting"
                    state[d][b] = state[d][b] + snap[(s, b)]
        for t in step.transfers:
            if t.src in ring:
                assert t.size_bytes == len(chunks[0]) * block_bytes
        for i, r in enumerate(ring):
            new_ranges[r] = chunks[i]
    return new_ranges


def ring_all_gather(state: State, step: Step, owned: dict, block_bytes: float) -> dict:
    """Apply a ring all-gather step: rep k, position i forwards the chunk first owned by position i-k."""
    new_ranges = {}
    for ring in rings_of(step):
        n = len(ring)
        assert step.repeat == n - 1
        chunks = [owned[r] for r in ring]
        for k in range(n - 1):
            sends = [(ring[i], ring[(i + 1) % n], chunks[(i - k) % n]) for i in range(n)]
            snap = {(s, b): Counter(state[s][b]) for s, _, ch in sends for b in ch}
            for s, d, ch in sends:
                for b in ch:
                    state[d][b] = snap[(s, b)]
        for t in step.transfers:
            if t.src in ring:
                assert t.size_bytes == len(chunks[0]) * block_bytes
        union = sorted(b for ch in chunks for b in ch)
        for r in ring:
            new_ranges[r] = union
    return new_ranges


def run_phases(state: State, steps, ranges: dict, block_bytes: float) -> dict:
    """Interpret ring / halving-doubling steps by label, threading each rank's current range."""
    for step in steps:
        if step.label == "ring reduce-scatter":
            ranges = {**ranges, **ring_reduce_scatter(state, step, ranges, block_bytes)}
        elif step.label == "ring all-gather":
            ranges = {**ranges, **ring_all_gather(state, step, ranges, block_bytes)}
        elif step.label.startswith("halving distance"):
            ranges = {**ranges, **halving(state, step, ranges, block_bytes)}
        elif step.label.startswith("doubling distance"):
            ranges = {**ranges, **doubling(state, step, ranges, block_bytes)}
        elif step.label == "fold to power of two":
            for t in step.transfers:
                for b in ranges[t.src]:
                    assert not (set(state[t.dst][b]) & set(state[t.src][b])), "double counting"
                    state[t.dst][b] = state[t.dst][b] + state[t.src][b]
                assert t.size_bytes == len(ranges[t.src]) * block_bytes
            ranges = {r: v for r, v in ranges.items() if r not in {t.src for t in step.transfers}}
        elif step.label == "unfold":
            for t in step.transfers:
                for b in ranges[t.src]:
                    state[t.dst][b] = Counter(state[t.src][b])
                assert t.size_bytes == len(ranges[t.src]) * block_bytes
                ranges = {**ranges, t.dst: list(ranges[t.src])}
        else:
            raise AssertionError(f"unexpected step {step.label}")
    return ranges


def halving(state: State, step: Step, ranges: dict, block_bytes: float) -> dict:
    """Each rank sends the half of its range that its partner keeps: partner keeps the half whose
    index (within the range) has the distance bit equal to the partner's side."""
    new = {}
    snap = {r: {b: Counter(c) for b, c in state[r].items()} for r in ranges}
    for t in step.transfers:
        rng = ranges[t.src]
        assert ranges[t.dst] == rng
        half = len(rng) // 2
        lo, hi = rng[:half], rng[half:]
        # the rank earlier in the group order keeps the low half
        keep_src, give = (lo, hi) if _order(t.src, t.dst, step) else (hi, lo)
        assert t.size_bytes == len(give) * block_bytes
        for b in give:
            assert not (set(state[t.dst][b]) & set(snap[t.src][b])), "double counting"
            state[t.dst][b] = state[t.dst][b] + snap[t.src][b]
        new[t.src] = keep_src
    return new


def doubling(state: State, step: Step, ranges: dict, block_bytes: float) -> dict:
    new = {}
    snap = {r: {b: Counter(state[r][b]) for b in ranges[r]} for r in ranges}
    for t in step.transfers:
        assert t.size_bytes == len(ranges[t.src]) * block_bytes
        for b in ranges[t.src]:
            state[t.dst][b] = snap[t.src][b]
        new[t.dst] = sorted(ranges[t.dst] + ranges[t.src])
    return new


def _order(a: int, b: int, step: Step) -> bool:
    """Whether a comes before b in the step's transfer order (the group's position order)."""
    idx = {t.src: i for i, t in enumerate(step.transfers)}
    return idx[a] < idx[b]
