"""An iteration's calls timed alone on the fabric, and what of them the flow network must still run.

A fold times every collective and transfer as if it ran alone on the fabric, and max-min fairness couples only
flow groups that share a directed link. `contended` runs each distinct schedule alone once and finds the
schedules whose calls could meet another call on one of their links in flight (with every schedule that shares
links with those). Where there are none, the flow network would give every call its time alone, so the fold's
spans are the executor's and `Replay` carries what the flow network would have recorded: the bytes per link
and, for a trace, when each link was busy (every call's run alone, shifted to its start). Otherwise the executor
runs on `PartlyAlone`: the contended schedules' calls on the flow network, the others as fixed delays, which
`PartlyAlone.confirmed` checks against the run's own spans before replaying them.
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


class Schedules:
    """The distinct schedules of an iteration's calls, each run alone once, and which of them share a link."""

    def __init__(self, network) -> None:
        self.network = network
        self.alone: list[Alone] = []
        self._index: dict[tuple, int] = {}
        self._by_object: dict[int, tuple[Schedule, int]] = {}  # calls share memoised Schedule objects

    def of(self, schedule: Schedule) -> int:
        """The index of `schedule`'s distinct schedule (run alone the first time it is met)."""
        hit = self._by_object.get(id(schedule))
        if hit is None:
            key = self.network.steps.schedule_key(schedule)
            if key not in self._index:
                self._index[key] = len(self.alone)
                self.alone.append(run_alone(self.network, schedule))
            hit = self._by_object[id(schedule)] = (schedule, self._index[key])  # keeps `schedule`: its id stays
        return hit[1]

    def sharing(self) -> set[tuple[int, int]]:
        """Pairs (a <= b) of distinct schedules with a directed link in common ((k, k): each that uses one)."""
        users: dict[int, list[int]] = {}
        for k, a in enumerate(self.alone):
            for link in a.busy:
                users.setdefault(link, []).append(k)
        return {(a, b) for ks in {tuple(v) for v in users.values()} for i, a in enumerate(ks) for b in ks[i:]}


@dataclass(frozen=True)
class Calls:
    """Calls as (schedule index, start, end) arrays."""

    keys: np.ndarray
    start: np.ndarray
    end: np.ndarray

    @classmethod
    def of(cls, schedules: Schedules, calls: list[tuple]) -> "Calls":
        """`calls`: (schedule, start, end), the start and end of one call or arrays of every call of it."""
        starts = [np.atleast_1d(np.asarray(c[1], dtype=float)) for c in calls]
        keys = [np.full(x.size, schedules.of(c[0]), dtype=np.int64) for c, x in zip(calls, starts)]
        ends = [np.atleast_1d(np.asarray(c[2], dtype=float)) for c in calls]
        join = lambda parts, kind: np.concatenate(parts) if parts else np.zeros(0, dtype=kind)  # noqa: E731
        return cls(join(keys, np.int64), join(starts, float), join(ends, float))

    def contending(self, schedules: Schedules, pairs, tolerance_s: float) -> set[int]:
        """The schedules of `pairs` (sharing a link) whose calls overlap in time by more than `tolerance_s`."""
        members = [np.flatnonzero(self.keys == k) for k in range(len(schedules.alone))]
        out: set[int] = set()
        for a, b in sorted(pairs):
            both = members[a] if a == b else np.concatenate([members[a], members[b]])
            if overlaps(self.start[both], self.end[both], tolerance_s):
                out |= {a, b}
        return out

    def replay(self, schedules: Schedules, which: set[int], offsets_s=(0.0,)) -> Replay:
        """The replay of the calls of the `which` schedules, in each iteration starting `offsets_s` later."""
        ks = sorted(which)
        return Replay(tuple(schedules.alone[k] for k in ks),
                      tuple(np.concatenate([self.start[self.keys == k] + o for o in offsets_s]) for k in ks))


def contended(network, calls: list[tuple], tolerance_s: float) -> tuple[Schedules, Calls, set[int]]:
    """The schedules of a fold's `calls` ((schedule, starts, ends): Calls.of) that must run on the flow network: every
    schedule linked by shared links to one whose call's span is not its time alone (by more than `tolerance_s`)
    or to two calls that share a link in flight (every schedule on a network whose links were failed, degraded or
    rerouted). The empty set: every call ran alone (a full replay)."""
    schedules = Schedules(network)
    got = Calls.of(schedules, calls)
    duration = np.array([a.duration_s for a in schedules.alone], dtype=float)
    seeds = set(np.unique(got.keys[np.abs(got.end - got.start - duration[got.keys]) > tolerance_s]).tolist())
    pairs = schedules.sharing()
    seeds |= got.contending(schedules, pairs, tolerance_s)
    linked: dict[int, set[int]] = {}
    for a, b in pairs:
        linked.setdefault(a, set()).add(b)
        linked.setdefault(b, set()).add(a)
    out, todo = set(), list(seeds)
    while todo:  # the link-sharing component of each seed
        k = todo.pop()
        if k not in out:
            out.add(k)
            todo += linked.get(k, ())
    if out and not network.pristine:  # a run with some calls alone could not be redone on a freshly built cluster
        out = set(range(len(schedules.alone)))
    return schedules, got, out


class PartlyAlone:
    """The executor's network model for a plan whose `flows` schedules contend: their calls on the flow network,
    every other call in its time alone (replayed onto the network's records once `confirmed`)."""

    def __init__(self, network, schedules: Schedules, flows: set[int]) -> None:
        self.network, self.schedules, self.flows = network, schedules, flows

    def run(self, env, schedule: Schedule):
        k = self.schedules.of(schedule)
        if k in self.flows:
            yield from self.network.run(env, schedule)
        else:
            yield env.timeout(self.schedules.alone[k].duration_s)

    def confirmed(self, calls: list[tuple], offsets_s, tolerance_s: float) -> Replay | None:
        """The replay of the calls that ran alone (`calls`: one iteration as it ran, Calls.of; every simulated
        iteration's are these shifted by one of `offsets_s`), or None where one of them overlapped a call sharing
        one of its links in flight: the run is then not the flow network's."""
        got = Calls.of(self.schedules, calls)
        alone = set(range(len(self.schedules.alone))) - self.flows
        pairs = {(a, b) for a, b in self.schedules.sharing() if a in alone or b in alone}
        if got.contending(self.schedules, pairs, tolerance_s):
            return None
        return got.replay(self.schedules, alone, offsets_s)

