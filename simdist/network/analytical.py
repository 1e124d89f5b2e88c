"""Alpha-beta timing of schedules with static congestion: the fast 'estimate' network model.

Step i of every chain is assumed to run at the same time: on each link, the members of all groups
of those steps split its capacity equally. A group's rate is the smallest such share over its links;
step time = latency phase (repeat x max path latency; mean for pipelined ring steps) + bandwidth phase (repeat x size / rate, the
slowest group, each held to its per-flow cap) + delay. A chain's time is the sum of its steps; a schedule's, the slowest chain.
On an idle uniform fabric this is exactly the closed forms of collectives/cost.py.
"""
from __future__ import annotations

from typing import Generator

import numpy as np

from simdist.collectives.schedule import Schedule
from simdist.errors import InfeasibleError
from simdist.network.control import LinkControl
from simdist.network.paths import PathTable
from simdist.network.steps import CompiledStep, StepCache, shared_steps
from simdist.network.utilization import utilization_from_bytes
from simdist.topology.graph import Topology
from simdist.topology.routing import Router


class AnalyticalNetwork(LinkControl):
    """NetworkModel with static congestion; no events beyond one timeout per schedule.

    Link control (set_link_capacity, fail_link, restore_link, set_router) is LinkControl's: a changed
    capacity or route applies to schedules timed from then on."""

    def __init__(self, topology: Topology, router: Router | None = None) -> None:
        self.topology = topology
        self.steps = shared_steps(topology) if router is None else StepCache(PathTable(topology, router))
        self.paths = self.steps.paths
        self._capacity_Bps = topology.links.capacity_Bps.copy()
        self.link_bytes = np.zeros_like(self._capacity_Bps)
        self._times: dict[tuple, float] = {}  # answers at the current capacities
        self.now_s = 0.0  # simulated time of the latest run() (named in InfeasibleError)
        self._init_control()

    @property
    def capacity_Bps(self) -> np.ndarray:
        return self._capacity_Bps

    def _write_capacity(self, link_id: int, capacity_Bps: float) -> None:
        self._capacity_Bps[link_id] = capacity_Bps

    def _now_s(self) -> float:
        return self.now_s

    def _routes_changed(self) -> None:
        self._times.clear()

    def _stage_time(self, stage: list[CompiledStep]) -> list[float]:
        """Times of steps that run concurrently (step i of each chain), sharing links statically
        (vectorised over every group of the stage). A group of independent members (a PS push) gets the least
        share over its members' links, which is its slowest member's rate: the step's time, as per transfer."""
        groups = [g for cs in stage for g in cs.groups]
        if not groups:
            return [cs.latency_s + cs.delay_s for cs in stage]
        links = np.concatenate([g.links for g in groups])
        counts = np.concatenate([g.counts for g in groups])
        load = np.bincount(links, weights=counts, minlength=self._capacity_Bps.size)
        starts = np.cumsum([0] + [g.links.size for g in groups[:-1]])
        with np.errstate(divide="ignore", invalid="ignore"):
            share = self._capacity_Bps[links] / load[links]
        rates = np.minimum.reduceat(share, starts) if links.size else np.full(len(groups), np.inf)
        rates[np.array([g.links.size == 0 for g in groups])] = np.inf
        rates = np.minimum(rates, [g.cap_Bps for g in groups])  # a connection's per-flow cap (FlowGroup.cap_Bps)
        if (rates <= 0).any():
            bad = groups[int(np.flatnonzero(rates <= 0)[0])]
            raise self._infeasible("a schedule's transfer cannot finish", bad.links)
        need = np.array([g.size_bytes for g in groups]) / rates
        times, k = [], 0
        for cs in stage:
            n = len(cs.groups)
            times.append(cs.latency_s + (float(need[k:k + n].max()) if n else 0.0) + cs.delay_s)
            k += n
        return times

    def schedule_time(self, schedule: Schedule) -> float:
        """Seconds the schedule takes under static congestion (it alone on the fabric); memoised."""
        memo = self.steps.schedule_key(schedule)
        hit = self._times.get(memo)
        if hit is not None:
            return hit
        try:
            compiled = [[self.steps.get(s) for s in chain] for chain in schedule.chains]
        except InfeasibleError as e:
            if not self._down:
                raise
            raise self._infeasible(f"{schedule.algorithm} {schedule.op}: {e}") from None
        totals = [0.0] * len(compiled)
        depth = max((len(c) for c in compiled), default=0)
        for i in range(depth):
            idx = [k for k, c in enumerate(compiled) if i < len(c)]
            for k, t in zip(idx, self._stage_time([compiled[k][i] for k in idx])):
                totals[k] += t
        if len(self._times) >= 1024:
            self._times.clear()
        self._times[memo] = out = max(totals, default=0.0)
        return out

    def _account(self, schedule: Schedule) -> None:
        for chain in schedule.chains:
            for step in chain:
                for g in self.steps.get(step).groups:
                    self.link_bytes[g.links] += g.link_bytes

    def run(self, env, schedule: Schedule) -> Generator:
        """simpy process body: wait schedule_time (no interaction with concurrent schedules)."""
        self.now_s = float(env.now)
        t = self.schedule_time(schedule)
        self._account(schedule)
        yield env.timeout(t)

    def link_utilization(self, elapsed_s: float) -> dict[str, float]:
        """Fraction of each used directed link's capacity carried over `elapsed_s` seconds."""
        return utilization_from_bytes(self.topology, self.link_bytes, elapsed_s)
