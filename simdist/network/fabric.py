"""Flow groups in flight on one simpy Environment, sharing directed links max-min fairly.

One event per group start and end: starts are queued and solved together once per simulated instant
(a solve event at a priority below simpy's NORMAL runs after everything else at that instant), then
a single timer is set for the next group completion. Any change (start, end, capacity) bumps a
version number, which turns the pending timer stale instead of cancelling it.

A group of independent members (FlowGroup.members: a PS push, a gloo gather) is one flow while its
members share one max-min rate: after each solve, a group that a saturated link froze although only some
of its members cross it is split there (those members, the others; same bytes left, same completion
event) and the rates are solved again, so every member gets the rate it would get as a flow of its own.
Its completion event fires when its last part is done.

Interruptible: a group in flight can be cancelled (its event never fires) or moved onto other links
(it keeps its remaining bytes), and capacities change at any instant. A group left with rate 0 (a link
on its path has no capacity) is reported to `on_stall`, which may move it; the network model uses this
to reroute around dead links or end the run with InfeasibleError instead of leaving it waiting forever.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import partial
from typing import Callable, Hashable

import numpy as np
import simpy

from simdist.network.maxmin import maxmin_rates_flat
from simdist.network.steps import FlowGroup

_SOLVE_PRIORITY = 2  # simpy: URGENT = 0, NORMAL = 1; larger runs later within an instant
_DONE_REL_TOL = 1e-9  # a group within this fraction of its bytes from the end is done


@dataclass(eq=False)
class _Flow:
    group: FlowGroup
    done: simpy.Event
    start_s: float
    tag: Hashable = None  # what the group is (the network model's recipe to route it again)
    share: float = 1.0  # fraction of `group`'s bytes still to move when it was put on these links
    parts: list | None = None  # independent members: the live parts sharing `done` (this one among them)


@dataclass(frozen=True, eq=False)
class Flight:
    """A group in flight as its owner sees it: its completion event, links, tag and bytes left."""

    done: simpy.Event
    group: FlowGroup
    tag: Hashable
    left_bytes: float


@dataclass(frozen=True)
class BusyInterval:
    """A group's lifetime on its links (for traces): it used `links` from start_s to end_s."""

    start_s: float
    end_s: float
    links: np.ndarray


_SOLVED_ENTRIES = 256  # memoised solves (rates by the groups in flight)
_PRUNE_ENTRIES = 4096  # solves with fewer (group, link) entries are cheap enough as they are
_PRUNE_MARGIN = 1e-9  # a link is left out only when its bound is below capacity by this relative margin


def _may_saturate(capacity: np.ndarray, entry_group: np.ndarray, entry_link: np.ndarray, entry_count: np.ndarray,
                  lengths: np.ndarray, caps: np.ndarray, capped: np.ndarray) -> np.ndarray | None:
    """The entries whose link can saturate: a group's max-min rate is at most u_g = min over its links of
    capacity / count (its own load alone fills that link), so a link whose load at those bounds,
    sum_g count x u_g, stays below its capacity never saturates, and leaving it out of the solve changes
    no level, no saturation and no rate (the same floats: the fill's minimum share is never on it).
    None when every entry stays. The first sum(lengths) entries are the groups' own, group after group."""
    n_main = int(lengths.sum())
    u = np.full(lengths.size, np.inf)
    routed = np.flatnonzero(lengths > 0)
    if routed.size:
        with np.errstate(divide="ignore"):
            ratio = capacity[entry_link[:n_main]] / entry_count[:n_main]
        starts = (np.cumsum(lengths) - lengths)[routed]
        u[routed] = np.minimum.reduceat(ratio, starts)
    if capped.size:
        u[capped] = np.minimum(u[capped], caps[capped])
    bound = np.bincount(entry_link, weights=entry_count * u[entry_group], minlength=capacity.size)
    cap = capacity[entry_link]
    keep = ~(bound[entry_link] < cap * (1.0 - _PRUNE_MARGIN))
    return None if keep.all() else keep


class Fabric:
    """The shared state of a flow-level network: active groups, their rates and carried bytes."""

    def __init__(self, env: simpy.Environment, capacity_Bps: np.ndarray, record_intervals: bool = False) -> None:
        self.env = env
        self.capacity_Bps = np.array(capacity_Bps, dtype=float)
        self.link_bytes = np.zeros_like(self.capacity_Bps)  # bytes of completed groups, per directed link
        self.intervals: list[BusyInterval] | None = [] if record_intervals else None
        self.solves = 0
        self._flows: list[_Flow] = []
        self._remaining = np.zeros(0)
        self._rate = np.zeros(0)
        self._pending: list[_Flow] = []
        self._t = env.now
        self._version = 0
        self._solve_requested = False
        self._capacity_version = 0
        self._solved: OrderedDict[tuple, tuple] = OrderedDict()  # rates by the groups in flight (see _solve)
        # called with the stalled flights (rate 0, bytes left) after a solve; may move or cancel them
        self.on_stall: Callable[[list["Flight"]], None] | None = None

    @property
    def active(self) -> int:
        """Groups in flight (started and not finished)."""
        return len(self._flows) + len(self._pending)

    def start(self, group: FlowGroup, tag: Hashable = None) -> simpy.Event:
        """Start moving `group`; the returned event fires when its last byte arrives. `tag` is kept
        with the group (in_flight reports it) so that its owner can route it again."""
        flow = _Flow(group, self.env.event(), self.env.now, tag)
        if group.members is not None:
            flow.parts = [flow]
        self._pending.append(flow)
        self._request_solve()
        return flow.done

    def in_flight(self) -> list["Flight"]:
        """Every group started and not finished, with its bytes left (at this instant)."""
        self._advance()
        out = [Flight(f.done, f.group, f.tag, float(rem)) for f, rem in zip(self._flows, self._remaining)]
        return out + [Flight(f.done, f.group, f.tag, f.group.size_bytes * f.share) for f in self._pending]

    def _find(self, done: simpy.Event) -> tuple[list[_Flow], int]:
        for where in (self._flows, self._pending):
            for i, f in enumerate(where):
                if f.done is done:
                    return where, i
        raise KeyError("no such flow group in flight")

    def _detach_one(self, flow: _Flow) -> float:
        """Take one flow (a group, or one part of an independent group) off the fabric; credit the bytes
        it carried so far; its bytes left."""
        self._advance()
        where = self._flows if any(f is flow for f in self._flows) else self._pending
        i = next(j for j, f in enumerate(where) if f is flow)
        where.pop(i)
        g = flow.group
        if where is self._flows:
            left = float(self._remaining[i])
            self._remaining = np.delete(self._remaining, i)
            self._rate = np.delete(self._rate, i)
        else:
            left = g.size_bytes * flow.share
        self.link_bytes[g.links] += g.link_bytes * (flow.share - left / g.size_bytes)
        if self.intervals is not None and self.env.now > flow.start_s:
            self.intervals.append(BusyInterval(flow.start_s, self.env.now, g.links))
        self._version += 1
        self._request_solve()
        return left

    def _parts(self, done: simpy.Event) -> list[_Flow]:
        where, i = self._find(done)
        flow = where[i]
        return list(flow.parts) if flow.parts is not None else [flow]

    def cancel(self, done: simpy.Event) -> float:
        """Stop the group whose completion event is `done` (it never fires); returns its bytes left (per
        member, the most any member has left)."""
        return max(self._detach_one(f) for f in self._parts(done))

    def move(self, done: simpy.Event, group: FlowGroup) -> None:
        """Carry on moving the group of `done` over `group`'s links (same size_bytes): a reroute. It keeps
        its bytes left and its completion event; rates are re-solved at this instant. A group of independent
        members moves only the members whose links include one without capacity (as a flow of its own each
        would be moved), onto their paths in `group`; the others keep theirs."""
        parts = self._parts(done)
        if not np.isclose(group.size_bytes, parts[0].group.size_bytes, rtol=1e-12):
            raise ValueError("a moved flow group must keep its size")
        if group.members is None or parts[0].group.members is None:
            if len(parts) != 1:
                return  # parts of independent members onto one plain group: no member map; they wait (see on_stall)
            (flow,) = parts
            left = self._detach_one(flow)
            self._pending.append(_Flow(group, done, self.env.now, flow.tag, left / group.size_bytes))
            return
        dead = self.capacity_Bps <= 0
        new = group.members
        for flow in parts:
            m = flow.group.members
            stuck = m.crossing(dead)
            moving = m.index[stuck & np.isin(m.index, new.index)]
            if not moving.size:
                continue
            left = self._detach_one(flow)
            flow.parts.remove(flow)
            pieces = [new.subset(moving).group(group.size_bytes, flow.group.cap_Bps)]
            stay = m.index[~np.isin(m.index, moving)]
            if stay.size:
                pieces.append(m.subset(stay).group(flow.group.size_bytes, flow.group.cap_Bps))
            for g in pieces:
                part = _Flow(g, done, self.env.now, flow.tag, left / g.size_bytes, flow.parts)
                flow.parts.append(part)
                self._pending.append(part)

    def set_link_capacity(self, link_id: int, capacity_Bps: float) -> None:
        """Change one directed link's capacity now; rates of groups in flight are re-solved."""
        self._advance()
        self.capacity_Bps[link_id] = capacity_Bps
        self._capacity_version += 1
        self._request_solve()

    def carried_bytes(self) -> np.ndarray:
        """Bytes carried so far per directed link, including the done part of groups in flight."""
        self._advance()
        out = self.link_bytes.copy()
        for flow, rem in zip(self._flows, self._remaining):
            g = flow.group
            out[g.links] += g.link_bytes * (flow.share - rem / g.size_bytes)
        return out

    def _request_solve(self) -> None:
        if self._solve_requested:
            return
        self._solve_requested = True
        ev = simpy.Event(self.env)
        ev._ok = True  # triggered by hand so it can carry the low priority
        ev._value = None
        ev.callbacks.append(self._solve)
        self.env.schedule(ev, priority=_SOLVE_PRIORITY)

    def _advance(self) -> None:
        dt = self.env.now - self._t
        if dt > 0 and self._remaining.size:
            np.maximum(self._remaining - self._rate * dt, 0.0, out=self._remaining)
        self._t = self.env.now

    def _solve(self, _event: simpy.Event) -> None:
        self._solve_requested = False
        self._advance()
        if self._pending:
            self._flows.extend(self._pending)
            self._remaining = np.concatenate([self._remaining, [f.group.size_bytes * f.share for f in self._pending]])
            self._pending = []
        self._version += 1
        if not self._flows:
            self._rate = np.zeros(0)
            return
        self.solves += 1
        # max-min rates depend only on the groups' links, counts and caps and on the capacities: the same
        # groups in flight as at an earlier solve (every bucket's push and pull: their groups' arrays are
        # shared) get that solve's rates (the same floats) without solving again
        while True:
            key = self._key()
            hit = self._solved.get(key)
            if hit is None:
                self._rate, froze, entry_group, entry_link = self._rates()
                splits = self._splits(froze, entry_group, entry_link) if froze is not None else []
                # the groups are kept with the outcome, so the ids in the key stay theirs
                hit = self._solved[key] = (self._rate.copy(), splits, [f.group for f in self._flows])
                if len(self._solved) > _SOLVED_ENTRIES:
                    self._solved.popitem(last=False)
            else:
                self._solved.move_to_end(key)
                self._rate = hit[0].copy()
            if not hit[1]:
                break
            for i, parts in hit[1]:
                self._split_flow(i, parts)
        moving = self._rate > 0
        if moving.any():
            dt = float((self._remaining[moving] / self._rate[moving]).min())
            timer = self.env.timeout(max(dt, 0.0))
            timer.callbacks.append(partial(self._on_timer, self._version))
        if self.on_stall is not None and not moving.all():
            self.on_stall([Flight(f.done, f.group, f.tag, float(r))
                           for f, r, m in zip(self._flows, self._remaining, moving) if not m])

    def _rates(self):
        """Max-min rates of the flows in flight; with independent groups among them, also which entries
        froze their group (maxmin_rates_flat's `froze`) and the entries' groups and links."""
        flows = self._flows
        lengths = np.array([f.group.links.size for f in flows], dtype=np.int64)
        entry_group = np.repeat(np.arange(len(flows), dtype=np.int64), lengths)
        entry_link = np.concatenate([f.group.links for f in flows])
        entry_count = np.concatenate([f.group.counts for f in flows])
        capacity = self.capacity_Bps
        caps = np.array([f.group.cap_Bps for f in flows])
        capped = np.flatnonzero(np.isfinite(caps))
        if capped.size:  # a per-flow cap is a private link of that group's own (its members all have that cap)
            virtual = np.arange(capacity.size, capacity.size + capped.size, dtype=np.int64)
            capacity = np.concatenate([capacity, caps[capped]])
            entry_group = np.concatenate([entry_group, capped])
            entry_link = np.concatenate([entry_link, virtual])
            entry_count = np.concatenate([entry_count, np.ones(capped.size)])
        if entry_link.size > _PRUNE_ENTRIES:
            keep = _may_saturate(capacity, entry_group, entry_link, entry_count, lengths, caps, capped)
            if keep is not None:
                entry_group, entry_link, entry_count = entry_group[keep], entry_link[keep], entry_count[keep]
        split = any(f.parts is not None and len(f.group.members) > 1 for f in flows)
        froze = np.zeros(entry_link.size, dtype=bool) if split else None
        rates = maxmin_rates_flat(capacity, entry_group, entry_link, entry_count, len(flows), froze)
        return rates, froze, entry_group, entry_link

    def _key(self) -> tuple:
        """What the max-min rates of the groups in flight depend on: their links, counts and caps (the arrays
        are shared by every bucket's push and pull, so by identity) and the capacities."""
        return (self._capacity_version,
                *[(id(f.group.links), id(f.group.counts), f.group.cap_Bps) for f in self._flows])

    def _splits(self, froze: np.ndarray, entry_group: np.ndarray, entry_link: np.ndarray) -> list:
        """(flow position, (crossing members, the others)) of every independent group that a saturated link
        froze although only some of its members cross one; empty when the rates stand as solved."""
        n_links = self.capacity_Bps.size
        hit = np.flatnonzero(froze)
        order = np.argsort(entry_group[hit], kind="stable")
        groups, links = entry_group[hit][order], entry_link[hit][order]
        bounds = np.searchsorted(groups, np.arange(len(self._flows) + 1))
        out = []
        for i, flow in enumerate(self._flows):
            if flow.parts is None or len(flow.group.members) < 2:
                continue
            sat = links[bounds[i]:bounds[i + 1]]
            if not sat.size or (sat >= n_links).any():  # unlimited, or its members' own cap: all alike
                continue
            parts = flow.group.members.split(np.unique(sat))
            if parts is not None:
                out.append((i, parts))
        return out

    def _split_flow(self, i: int, parts: tuple) -> None:
        """Replace flow i by its two parts (same bytes left, same completion event, same start)."""
        flow = self._flows[i]
        g = flow.group
        flow.group = parts[0].group(g.size_bytes, g.cap_Bps)
        rest = _Flow(parts[1].group(g.size_bytes, g.cap_Bps), flow.done, flow.start_s, flow.tag, flow.share,
                     flow.parts)
        flow.parts.append(rest)
        self._flows.append(rest)
        self._remaining = np.append(self._remaining, self._remaining[i])
        self._rate = np.append(self._rate, self._rate[i])

    def _on_timer(self, version: int, _event: simpy.Event) -> None:
        if version != self._version:
            return
        self._advance()
        sizes = np.array([f.group.size_bytes for f in self._flows])
        done = self._remaining <= _DONE_REL_TOL * sizes
        moving = self._rate > 0
        ttf = np.full(self._remaining.size, np.inf)
        ttf[moving] = self._remaining[moving] / self._rate[moving]
        done[int(np.argmin(ttf))] = True  # the group this timer was set for, whatever rounding did
        keep: list[_Flow] = []
        for flow, is_done in zip(self._flows, done):
            if not is_done:
                keep.append(flow)
                continue
            g = flow.group
            self.link_bytes[g.links] += g.link_bytes * flow.share
            if self.intervals is not None:
                self.intervals.append(BusyInterval(flow.start_s, self.env.now, g.links))
            if flow.parts is not None:
                flow.parts.remove(flow)
                if flow.parts:
                    continue  # other parts of its group still move
            flow.done.succeed()
        self._flows = keep
        self._remaining = self._remaining[~done]
        self._rate = self._rate[~done]
        self._version += 1
        self._request_solve()
