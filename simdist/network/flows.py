"""Flow-level network model: schedules run as flow groups on a shared max-min fair fabric (simpy).

Each step of a chain is a latency phase (repeat x the largest path latency), then a bandwidth phase
in which its groups move repeat x size bytes per member on the shared Fabric, then its delay. All
schedules run through one FlowNetwork share its Fabric, so concurrent buckets, PS incast and
oversubscribed uplinks slow each other down as max-min fairness dictates.
"""
from __future__ import annotations

from typing import Generator

import numpy as np
import simpy

from simdist.collectives.schedule import Schedule
from simdist.errors import InfeasibleError
from simdist.network.fabric import Fabric
from simdist.network.paths import PathTable
from simdist.network.steps import CompiledStep, StepCache
from simdist.network.utilization import busy_spans, utilization_from_bytes
from simdist.topology.graph import Topology
from simdist.topology.routing import Router

_MEMO_ENTRIES = 1024


def run_chain(env: simpy.Environment, fabric: Fabric, chain: list[CompiledStep]) -> Generator:
    """simpy process body: the steps of one chain, in order."""
    for cs in chain:
        if cs.latency_s > 0:
            yield env.timeout(cs.latency_s)
        if cs.groups:
            events = [fabric.start(g) for g in cs.groups]
            yield events[0] if len(events) == 1 else env.all_of(events)
        if cs.delay_s > 0:
            yield env.timeout(cs.delay_s)


def run_schedule(env: simpy.Environment, fabric: Fabric, steps: StepCache, schedule: Schedule) -> Generator:
    """simpy process body: all chains of `schedule` concurrently; returns when the last ends."""
    chains = [[steps.get(s) for s in chain] for chain in schedule.chains]
    if len(chains) == 1:
        yield from run_chain(env, fabric, chains[0])
    elif chains:
        yield env.all_of([env.process(run_chain(env, fabric, c)) for c in chains])


class FlowNetwork:
    """NetworkModel whose schedules share links max-min fairly with everything else in flight."""

    def __init__(self, env: simpy.Environment, topology: Topology, router: Router | None = None,
                 record_intervals: bool = False) -> None:
        self.env = env
        self.topology = topology
        self.paths = PathTable(topology, router)
        self.steps = StepCache(self.paths)
        self.fabric = Fabric(env, topology.links.capacity_Bps, record_intervals)
        self._idle_times: dict[Schedule, float] = {}  # schedule_time answers at the current capacities

    def run(self, env: simpy.Environment, schedule: Schedule) -> Generator:
        """simpy process body: run `schedule` on the shared fabric (env must be this network's)."""
        assert env is self.env, "FlowNetwork.run called with another simpy Environment"
        yield from run_schedule(env, self.fabric, self.steps, schedule)

    def schedule_time(self, schedule: Schedule) -> float:
        """Seconds `schedule` takes alone on an idle copy of the fabric (current capacities); memoised."""
        hit = self._idle_times.get(schedule)
        if hit is not None:
            return hit
        env = simpy.Environment()
        fabric = Fabric(env, self.fabric.capacity_Bps)
        proc = env.process(run_schedule(env, fabric, self.steps, schedule))
        env.run()
        if not proc.triggered:
            raise InfeasibleError(f"{schedule.algorithm} {schedule.op} cannot finish: "
                                  "a link on its paths has no capacity")
        if len(self._idle_times) >= _MEMO_ENTRIES:
            self._idle_times.clear()
        self._idle_times[schedule] = float(env.now)
        return float(env.now)

    def set_link_capacity(self, link_id: int, capacity_Bps: float) -> None:
        """Degrade, restore or (with 0) stop one directed link; groups in flight re-share at once."""
        self.fabric.set_link_capacity(link_id, capacity_Bps)
        self._idle_times.clear()

    def set_router(self, router: Router) -> None:
        """Route steps started from now on with `router` (e.g. one that avoids dead links)."""
        self.paths.router = router
        self.paths.clear()
        self.steps.clear()
        self._idle_times.clear()

    def link_bytes(self) -> np.ndarray:
        """Bytes carried so far per directed link (in-flight groups pro rata)."""
        return self.fabric.carried_bytes()

    def busy_spans(self, link_names: "list[str]") -> dict[str, list[tuple[float, float]]]:
        """When each named directed link was busy (needs record_intervals=True), for traces."""
        index = {self.topology.links.name(i): i for i in range(len(self.topology.links.ends))}
        wanted = {index[n]: n for n in link_names if n in index}
        return busy_spans(self.fabric.intervals or [], wanted)

    def link_utilization(self, elapsed_s: float) -> dict[str, float]:
        """Fraction of each used directed link's capacity carried over `elapsed_s` seconds."""
        return utilization_from_bytes(self.topology, self.fabric.carried_bytes(), elapsed_s)
