"""A schedule step compiled onto directed links: its flow groups, their link counts and latency.

A lockstep step is ONE group (all transfers share a rate, the pace of a pipelined ring); an
independent step has one group per transfer. Each group moves `repeat x size` bytes per member,
so a repeated step is solved once, not once per repetition. Compiled steps are cached by Step
identity and by value, so equal steps of later schedules are not routed again.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from simdist.collectives.schedule import Step
from simdist.network.paths import PathTable


@dataclass(frozen=True, eq=False)
class FlowGroup:
    """Members moving at one shared rate: per member `size_bytes`; `counts[i]` members cross `links[i]`."""

    links: np.ndarray  # unique directed link ids
    counts: np.ndarray  # members crossing each link (float, for the solver)
    size_bytes: float  # bytes each member moves (all repetitions)
    link_bytes: np.ndarray  # bytes the group puts on each of `links` in total


@dataclass(frozen=True, eq=False)
class CompiledStep:
    """A step ready for a network model: latency phase, then groups, then delay."""

    latency_s: float  # repeat x the largest (pipelined rings: the mean) path latency of the step's transfers
    groups: tuple[FlowGroup, ...]
    delay_s: float


def _single(path: np.ndarray, size_bytes: float, repeat: int) -> FlowGroup:
    """One transfer: a shortest path never repeats a directed link, so no dedup is needed."""
    total = size_bytes * repeat
    return FlowGroup(path, np.ones(path.size), float(total), np.full(path.size, float(total)))


def _group(paths: list[np.ndarray], sizes: list[float], repeat: int) -> FlowGroup | None:
    lengths = [p.size for p in paths]
    if sum(lengths) == 0:
        return None
    flat = np.concatenate(paths)
    weights = np.repeat(np.asarray(sizes, dtype=float), lengths) * repeat
    links, inverse = np.unique(flat, return_inverse=True)
    counts = np.bincount(inverse, minlength=links.size).astype(float)
    link_bytes = np.bincount(inverse, weights=weights, minlength=links.size)
    size = max(s for s, n in zip(sizes, lengths) if n) * repeat
    return FlowGroup(links, counts, float(size), link_bytes)


def compile_step(step: Step, paths: PathTable) -> CompiledStep:
    """Route every transfer of `step` and form its flow groups (zero-byte transfers move nothing)."""
    routed = [(paths.path(t.src, t.dst), t.size_bytes) for t in step.transfers]
    latencies = [lat for (_, lat), _ in routed]
    if not latencies:
        latency = 0.0
    elif step.pipelined:  # a ring's critical path runs through consecutive hops: their mean
        latency = sum(latencies) / len(latencies)
    else:
        latency = max(latencies)
    live = [(p, s) for (p, _), s in routed if s > 0 and p.size > 0]
    groups: list[FlowGroup] = []
    if step.repeat > 0 and live:
        if step.lockstep:
            g = _group([p for p, _ in live], [s for _, s in live], step.repeat)
            groups = [g] if g is not None else []
        else:
            groups = [_single(p, s, step.repeat) for p, s in live]
    return CompiledStep(step.repeat * latency, tuple(groups), step.delay_s)


class StepCache:
    """Compiled steps, found by Step identity (fast) or else by value (equal steps of a new schedule,
    e.g. the same bucket size next iteration); least recently used entries are dropped first."""

    def __init__(self, paths: PathTable, max_entries: int = 4096) -> None:
        self.paths = paths
        self.max_entries = max_entries
        self._by_id: OrderedDict[int, tuple[Step, CompiledStep]] = OrderedDict()
        self._by_value: OrderedDict[Step, CompiledStep] = OrderedDict()

    def get(self, step: Step) -> CompiledStep:
        hit = self._by_id.get(id(step))
        if hit is not None and hit[0] is step:
            self._by_id.move_to_end(id(step))
            return hit[1]
        compiled = self._by_value.get(step)
        if compiled is None:
            compiled = compile_step(step, self.paths)
            self._by_value[step] = compiled
            if len(self._by_value) > self.max_entries:
                self._by_value.popitem(last=False)
        else:
            self._by_value.move_to_end(step)
        self._by_id[id(step)] = (step, compiled)  # keeps `step` alive, so its id is not reused
        if len(self._by_id) > self.max_entries:
            self._by_id.popitem(last=False)
        return compiled

    def clear(self) -> None:
        self._by_id.clear()
        self._by_value.clear()
