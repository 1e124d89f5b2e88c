"""Flow-level network model: schedules run as flow groups on a shared max-min fair fabric (simpy).

Each step of a chain is a latency phase (repeat x the largest path latency), then a bandwidth phase
in which its groups move repeat x size bytes per member on the shared Fabric, then its delay. All
schedules run through one FlowNetwork share its Fabric, so concurrent buckets, PS incast and
oversubscribed uplinks slow each other down as max-min fairness dictates.
"""
from __future__ import annotations

import math
from typing import Callable, Generator

import numpy as np
import simpy

from simdist.collectives.schedule import Schedule, Step
from simdist.errors import InfeasibleError
from simdist.network.control import LinkControl
from simdist.network.fabric import Fabric, Flight
from simdist.network.paths import PathTable
from simdist.network.steps import CompiledStep, StepCache, shared_steps
from simdist.network.utilization import busy_spans, merged, utilization_from_bytes
from simdist.topology.graph import Topology
from simdist.topology.routing import Router

_MEMO_ENTRIES = 1024
_WATCH_PRIORITY = 3  # after the fabric's solves (2) at the same instant


def run_chain(env: simpy.Environment, fabric: Fabric, compiled: Callable[[Step], CompiledStep],
              chain: tuple[Step, ...]) -> Generator:
    """simpy process body: the steps of one chain, in order. Each step is compiled (routed) by
    `compiled` when it starts, so a step after a route change takes the new routes; its groups are
    tagged (step, index) so that the network can route them again while they are in flight."""
    for step in chain:
        cs = compiled(step)
        if cs.latency_s > 0:
            yield env.timeout(cs.latency_s)
            cs = compiled(step)
        if cs.groups:
            events = [fabric.start(g, (step, i)) for i, g in enumerate(cs.groups)]
            yield events[0] if len(events) == 1 else env.all_of(events)
        if cs.delay_s > 0:
            yield env.timeout(cs.delay_s)


def run_schedule(env: simpy.Environment, fabric: Fabric, compiled: Callable[[Step], CompiledStep],
                 schedule: Schedule) -> Generator:
    """simpy process body: all chains of `schedule` concurrently; returns when the last ends."""
    chains = schedule.chains
    if len(chains) == 1:
        yield from run_chain(env, fabric, compiled, chains[0])
    elif chains:
        yield env.all_of([env.process(run_chain(env, fabric, compiled, c)) for c in chains])


class FlowNetwork(LinkControl):
    """NetworkModel whose schedules share links max-min fairly with everything else in flight.

    Link control is LinkControl's (set_link_capacity, fail_link, restore_link, set_router); here a
    change acts at once on the groups in flight: they re-share, and a group left on a dead link moves
    onto the new routes (keeping its bytes left), or, where there is none, waits; if nothing that is
    still scheduled could restore it, the run ends with InfeasibleError naming the link and the time.
    """

    def __init__(self, env: simpy.Environment, topology: Topology, router: Router | None = None,
                 record_intervals: bool = False) -> None:
        self.env = env
        self.topology = topology
        self.steps = shared_steps(topology) if router is None else StepCache(PathTable(topology, router))
        self.paths = self.steps.paths
        self.fabric = Fabric(env, topology.links.capacity_Bps, record_intervals)
        self.fabric.on_stall = self._on_stall
        self._idle_times: dict[tuple, float] = {}  # schedule_time answers at the current capacities
        self.replayed: list = []  # calls run on their own and added to the records (network/replay.py)
        self._watching = False
        self._init_control()

    @property
    def capacity_Bps(self) -> np.ndarray:
        return self.fabric.capacity_Bps

    def run(self, env: simpy.Environment, schedule: Schedule) -> Generator:
        """simpy process body: run `schedule` on the shared fabric (env must be this network's)."""
        assert env is self.env, "FlowNetwork.run called with another simpy Environment"
        try:
            yield from run_schedule(env, self.fabric, self._compiled, schedule)
        except InfeasibleError as e:
            if not self._down:
                raise
            raise self._infeasible(f"{schedule.algorithm} {schedule.op}: {e}") from None

    def schedule_time(self, schedule: Schedule) -> float:
        """Seconds `schedule` takes alone on an idle copy of the fabric (current capacities and routes); memoised."""
        memo = self.steps.schedule_key(schedule)
        hit = self._idle_times.get(memo)
        if hit is not None:
            return hit
        env = simpy.Environment()
        fabric = Fabric(env, self.fabric.capacity_Bps)
        proc = env.process(run_schedule(env, fabric, self._compiled, schedule))
        try:
            env.run()
        except InfeasibleError as e:
            raise self._infeasible(f"{schedule.algorithm} {schedule.op} cannot finish ({e})") from None
        if not proc.triggered:
            stuck = fabric.in_flight()
            raise self._infeasible(f"{schedule.algorithm} {schedule.op} cannot finish",
                                   stuck[0].group.links if stuck else None)
        if len(self._idle_times) >= _MEMO_ENTRIES:
            self._idle_times.clear()
        self._idle_times[memo] = float(env.now)
        return float(env.now)

    def _compiled(self, step: Step) -> CompiledStep:
        """`step` on the current routes (self.steps is replaced when routes change)."""
        return self.steps.get(step)

    # -- LinkControl hooks -----------------------------------------------------------------------
    def _write_capacity(self, link_id: int, capacity_Bps: float) -> None:
        self.fabric.set_link_capacity(link_id, capacity_Bps)

    def _now_s(self) -> float:
        return float(self.env.now)

    def _routes_changed(self) -> None:
        self._idle_times.clear()
        self._reroute([f for f in self.fabric.in_flight() if (self.fabric.capacity_Bps[f.group.links] <= 0).any()])

    # -- groups on dead links ----------------------------------------------------------------------
    def _reroute(self, flights: "list[Flight]") -> None:
        """Move each group crossing a dead link onto its step's current routes, where they avoid it."""
        cap = self.fabric.capacity_Bps
        for f in flights:
            if not isinstance(f.tag, tuple):
                continue
            step, index = f.tag
            try:
                group = self.steps.get(step).groups[index]
            except InfeasibleError:
                continue  # no route now: it waits (see _watch)
            if group.links.size and (cap[group.links] > 0).all() and group is not f.group:
                self.fabric.move(f.done, group)

    def _on_stall(self, flights: "list[Flight]") -> None:
        self._reroute(flights)
        self._watch()

    def _watch(self) -> None:
        """Check, after everything else at each later instant, whether some group is still stuck with
        nothing left in the event queue that could revive it: then the run cannot finish."""
        if self._watching:
            return
        self._watching = True
        self._arm(0.0)

    def _arm(self, delay_s: float) -> None:
        ev = simpy.Event(self.env)
        ev._ok = True  # triggered by hand so it can carry the lowest priority
        ev._value = None
        ev.callbacks.append(self._check)
        self.env.schedule(ev, priority=_WATCH_PRIORITY, delay=delay_s)

    def _check(self, _event: simpy.Event) -> None:
        cap = self.fabric.capacity_Bps
        stuck = [f for f in self.fabric.in_flight() if (cap[f.group.links] <= 0).any()]
        if not stuck:
            self._watching = False
            return
        nxt = self.env.peek()
        if nxt == math.inf:
            raise self._infeasible("a flow group cannot finish", stuck[0].group.links)
        self._arm(nxt - self.env.now)

    # -- records ---------------------------------------------------------------------------------
    def link_bytes(self) -> np.ndarray:
        """Bytes carried so far per directed link (in-flight groups pro rata)."""
        return self.fabric.carried_bytes()

    def busy_spans(self, link_names: "list[str]") -> dict[str, list[tuple[float, float]]]:
        """When each named directed link was busy (needs record_intervals=True), for traces."""
        links = self.topology.links
        by_name = None  # built only for a name that is not "u->v" with a plain u (custom vertex names)
        wanted = {}
        for n in link_names:
            i = links.index.get(tuple(n.split("->", 1)))
            if i is None or links.name(i) != n:
                if by_name is None:
                    by_name = {links.name(j): j for j in range(len(links.ends))}
                i = by_name.get(n)
            if i is not None:
                wanted[i] = n
        out = busy_spans(self.fabric.intervals or [], wanted)
        for replay in self.replayed:
            for link, (start, end) in replay.busy_spans(list(wanted)).items():
                got = np.array(out.get(wanted[link], []), dtype=float).reshape(-1, 2)
                out[wanted[link]] = merged(np.concatenate([got[:, 0], start]), np.concatenate([got[:, 1], end]))
        return out

    def link_utilization(self, elapsed_s: float) -> dict[str, float]:
        """Fraction of each used directed link's capacity carried over `elapsed_s` seconds."""
        return utilization_from_bytes(self.topology, self.fabric.carried_bytes(), elapsed_s)
