"""A network model with hand-set collective times, so executor tests can be computed by hand."""
from __future__ import annotations

from simdist.graph.tasks import Collective, SendRecv


class FixedNetwork:
    """Every collective or send/recv takes `seconds_per_byte x size_bytes` (+ server delay), alone or not."""

    def __init__(self, seconds_per_byte: float = 1e-9) -> None:
        self.k = seconds_per_byte
        self.runs: list[tuple[float, str]] = []

    def schedule_time(self, task) -> float:
        if isinstance(task, (Collective, SendRecv)):
            return self.k * task.size_bytes + getattr(task, "server_delay_s", 0.0)
        raise TypeError(task)

    def run(self, env, task):
        self.runs.append((env.now, task.name))
        yield env.timeout(self.schedule_time(task))

    def link_utilization(self, elapsed_s: float) -> dict[str, float]:
        return {}


def task_as_schedule(task, graph):
    return task
