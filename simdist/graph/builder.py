"""Appends tasks with ids in order, so a builder never has to count."""
from __future__ import annotations

from simdist.graph.tasks import Graph, RankClass, Task


class GraphBuilder:
    """Collects the tasks of one graph; `add` returns the new task's id for later dependencies."""

    def __init__(self) -> None:
        self.tasks: list[Task] = []

    def add(self, task_type: type, name: str, deps=(), stream=None, **fields) -> int:
        """Append a task of class `task_type` (Compute, Collective, ...) depending on `deps` (ids)."""
        tid = len(self.tasks)
        self.tasks.append(task_type(id=tid, name=name, deps=tuple(sorted(set(deps))), stream=stream, **fields))
        return tid

    def build(self, rank_class: RankClass) -> Graph:
        return Graph(rank_class, tuple(self.tasks))
