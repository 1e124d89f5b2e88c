"""An iteration's calls, timed without the flow network, replayed onto it when none of them shared a link.

A fold times every collective and transfer as if it ran alone on the fabric. Where no two calls that share a
directed link are ever in flight at once, and every call's span is the time its schedule takes alone, the flow
network would give each call exactly its alone rates (max-min fairness only couples groups that share a link),
so the executor's spans would be the fold's. `plan_replay` checks both conditions; `Replay` then carries what the
flow network would have recorded: the bytes per link and, for a trace, when each link was busy (every call's
run alone, shifted to its start). None where a check fails: the caller runs the executor instead.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy

from simdist.collectives.schedule import Schedule
from simdist.network.fabric import Fabric
from simdist.network.flows import run_schedule


@dataclass(frozen=True)
class Alone:
    """One schedule run alone on an idle copy of the fabric: how long, the bytes it put on each directed link,
    and per link it used the (start, end) arrays of its flow groups' lifetimes on it, from its start."""

    duration_s: float
    used: np.ndarray  # the directed links it put bytes on
    link_bytes: np.ndarray  # how many on each of `used`
    busy: dict[int, tuple[np.ndarray, np.ndarray]]


def run_alone(network, schedule: Schedule) -> Alone:
    """`schedule` on a fresh fabric with the network's capacities and routes (as FlowNetwork.schedule_time)."""
    env = simpy.Environment()
    fabric = Fabric(env, network.fabric.capacity_Bps, record_intervals=True)
    env.process(run_schedule(env, fabric, network.steps.get, schedule))
    env.run()
    per_link: dict[int, list[tuple[float, float]]] = {}
    for iv in fabric.intervals or ():
        for link in iv.links.tolist():
            per_link.setdefault(link, []).append((iv.start_s, iv.end_s))
    busy = {}
    for link in sorted(per_link):
        spans = np.array(per_link[link], dtype=float)
        busy[link] = (spans[:, 0], spans[:, 1])
    used = np.flatnonzero(fabric.link_bytes)
    return Alone(float(env.now), used, fabric.link_bytes[used], busy)


def overlaps(start: np.ndarray, end: np.ndarray, tolerance_s: float) -> bool:
    """Whether two of the spans [start[i], end[i]] overlap by more than `tolerance_s`."""
    if start.size < 2:
        return False
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)[:-1]
    return bool(np.any(s[1:] < reach - tolerance_s))


@dataclass(frozen=True)
class Replay:
    """Calls that each ran alone: per distinct schedule its run alone and its calls' start times."""

    alone: tuple[Alone, ...]
    starts: tuple[np.ndarray, ...]

    def onto(self, network) -> None:
        """Add the calls to the flow network's records: their bytes per link, and their busy spans for traces."""
        for a, s in zip(self.alone, self.starts):
            network.fabric.link_bytes[a.used] += a.link_bytes * s.size
        network.replayed.append(self)

    def busy_spans(self, links: list[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Per link in `links` that some call used: every (start, end) of a flow group on it."""
        out: dict[int, list] = {}
        for a, s in zip(self.alone, self.starts):
            for link in links:
                if link in a.busy:
                    b, e = a.busy[link]
                    out.setdefault(link, []).append(((s[:, None] + b).ravel(), (s[:, None] + e).ravel()))
        return {k: (np.concatenate([x for x, _ in v]), np.concatenate([y for _, y in v])) for k, v in out.items()}


def plan_replay(network, calls: list[tuple[Schedule, float, float]], tolerance_s: float) -> Replay | None:
    """The replay of `calls` ((schedule, start, end) each), or None when a call's span is not its schedule's time
    alone or two calls sharing a link overlap in time (by more than `tolerance_s`)."""
    index: dict[tuple, int] = {}
    alone: list[Alone] = []
    by_object: dict[int, tuple[Schedule, int]] = {}  # calls share memoised Schedule objects: keyed once each
    keys = np.empty(len(calls), dtype=np.int64)
    for i, (schedule, _, _) in enumerate(calls):
        hit = by_object.get(id(schedule))
        if hit is None:
            key = network.steps.schedule_key(schedule)
            if key not in index:
                index[key] = len(alone)
                alone.append(run_alone(network, schedule))
            hit = by_object[id(schedule)] = (schedule, index[key])  # keeps `schedule` alive: its id stays its own
        keys[i] = hit[1]
    start = np.fromiter((c[1] for c in calls), dtype=float, count=len(calls))
    end = np.fromiter((c[2] for c in calls), dtype=float, count=len(calls))
    duration = np.array([a.duration_s for a in alone], dtype=float)
    if np.any(np.abs(end - start - duration[keys]) > tolerance_s):
        return None
    members = [np.flatnonzero(keys == k) for k in range(len(alone))]
    users: dict[int, list[int]] = {}
    for k, a in enumerate(alone):
        for link in a.busy:
            users.setdefault(link, []).append(k)
    pairs = {(a, b) for ks in {tuple(v) for v in users.values()} for i, a in enumerate(ks) for b in ks[i:]}
    for a, b in sorted(pairs):  # (k, k): one schedule's own calls; then each pair that shares a link
        both = members[a] if a == b else np.concatenate([members[a], members[b]])
        if overlaps(start[both], end[both], tolerance_s):
            return None
    return Replay(tuple(alone), tuple(start[m] for m in members))
