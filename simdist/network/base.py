"""The interface every network model offers to collectives runners and the training loop."""
from __future__ import annotations

from typing import Generator, Protocol

from simdist.collectives.schedule import Schedule


class NetworkModel(Protocol):
    """Times collective schedules on a topology.

    `schedule_time` answers for a schedule alone on an idle fabric; `run` is a simpy process body
    that executes the schedule on the shared fabric, concurrently with whatever else is running,
    and returns when its last chain ends.
    """

    def schedule_time(self, schedule: Schedule) -> float: ...

    def run(self, env: object, schedule: Schedule) -> Generator: ...

    def link_utilization(self, elapsed_s: float) -> dict[str, float]: ...

    def set_link_capacity(self, link: "int | str", capacity_Bps: float) -> None:
        """Change one directed link (id or 'u->v' name) now; 0 kills its cable, which routing then avoids
        (flows in flight on it are rerouted, or the run ends with InfeasibleError naming it and the time)."""
        ...

    def fail_link(self, link: "int | str") -> None:
        """Both directions of the link's cable drop to 0 now."""
        ...

    def restore_link(self, link: "int | str") -> None:
        """Both directions of the link's cable return to the topology's capacity now."""
        ...

    def set_router(self, router: object) -> None:
        """Route steps that start from now on with `router` (dead links still taken out of it)."""
        ...
