"""Local executor: worker processes live across runs (their built clusters stay warm), points are
grouped by the cluster they run on."""
from __future__ import annotations

import os

from simdist.errors import Issue, ScenarioError
from simdist.planner.axes import Point
from simdist.planner.evaluate import Job
from simdist.planner.executors import LocalRunner, context_order


def pid_loader(base, overrides, values, base_dir, name):
    """A loader whose every point is 'invalid' with this process's id as the reason."""
    raise ScenarioError(Issue("", f"pid {os.getpid()}"))


def _pids(batches) -> set[str]:
    return {row["reason"] for batch in batches for _, kind, row in batch}


def test_a_runner_keeps_its_worker_processes_across_runs():
    job = Job(base={}, loader=pid_loader)
    points = [Point(i, (("communication.bucket_size", i),)) for i in range(24)]
    with LocalRunner(job, frozenset(), 2) as runner:
        first = _pids(runner.run(points))
        second = _pids(runner.run(points))
    assert 1 <= len(first | second) <= 2  # the same (at most two) workers served both runs
    assert f"pid {os.getpid()}" not in first | second
    with LocalRunner(job, frozenset(), 1) as inline:
        assert _pids(inline.run(points[:3])) == {f"pid {os.getpid()}"}


def test_points_are_grouped_by_cluster_then_strategy():
    pts = [Point(i, (("communication.strategy", s), ("communication.bucket_size", b), ("cluster.nodes.0.count", n)))
           for i, (s, b, n) in enumerate((s, b, n) for s in ("tree", "ring") for b in (1, 2) for n in (4, 2))]
    ordered = context_order(pts)
    counts = [p.as_dict()["cluster.nodes.0.count"] for p in ordered]
    assert counts == sorted(counts)  # one run of points per cluster
    firsts = [p.as_dict()["communication.strategy"] for p in ordered if p.as_dict()["cluster.nodes.0.count"] == 2]
    assert firsts == sorted(firsts)  # within a cluster, one run per strategy
    assert sorted(p.index for p in ordered) == list(range(len(pts)))
    no_context = [Point(i, (("communication.bucket_size", i),)) for i in range(3)]
    assert context_order(no_context) == no_context
