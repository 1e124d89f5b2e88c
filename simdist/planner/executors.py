"""Where a sweep's points run: this process, local worker processes (the default), or Ray (ray_executor).

An executor takes the job, the points still to run and the keys already done, and yields each chunk's
outcomes as it finishes, in whatever order chunks finish (the store sorts rows at the end). Points are
chunked in order, and sweeps and plans order them by `context_order` so that points on the same
cluster (and strategy) share chunks: a worker process lives for the whole sweep (for a plan, for all
its search rounds) and keeps each cluster it built in its estimate context cache
(engine/context_cache.py), so it builds each cluster's topology and routes once. The job and the done
keys reach each worker once, when it starts; a chunk travels as its points, its outcomes as rows.
"""
from __future__ import annotations

import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
import json
from typing import Iterator, Sequence

from simdist.planner.axes import Point
from simdist.planner.evaluate import Job, evaluate_chunk
from simdist.planner.rows import canonical

Outcomes = list[tuple[int, str, dict | None]]  # (point index, kind, row) per point


def chunks(points: Sequence[Point], jobs: int, most: int = 64) -> list[list[Point]]:
    """Consecutive runs of points, small enough to keep every worker busy and the progress bar moving
    (at least 4 per worker), and at most `most` points: a chunk is one task, one pickled reply and one
    write to the result file, and at ~5-10 ms an estimate point, 64 points are well under a second."""
    size = max(1, min(most, len(points) // max(1, 4 * jobs)))
    return [list(points[i:i + size]) for i in range(0, len(points), size)]


# axis keys whose values pick the built context a point runs on (engine/context.py context_key)
_CONTEXT_PREFIXES = ("cluster.", "communication.strategy", "communication.backend", "communication.hierarchical",
                     "communication.ps", "training.parallelism", "training.placement_order")


def context_order(points: Sequence[Point]) -> list[Point]:
    """Points grouped (stably) by the values of their cluster axes, then their strategy/backend/PS axes,
    so that consecutive chunks run on the same built cluster and context."""
    if not points:
        return []
    keys = [k for k, _ in points[0].values if k.startswith(_CONTEXT_PREFIXES)]
    keys.sort(key=lambda k: not k.startswith("cluster."))
    if not keys:
        return list(points)

    return sorted(points, key=lambda p: json.dumps([canonical(p.as_dict()[k]) for k in keys]))


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def run_inline(job: Job, points: Sequence[Point], done: frozenset[str]) -> Iterator[Outcomes]:
    """Every chunk in this process, one after another (jobs = 1)."""
    for chunk in chunks(points, 1):
        yield evaluate_chunk(job, chunk, done)


_JOB: Job | None = None
_DONE: frozenset[str] = frozenset()


def _init_worker(job: Job, done: frozenset[str]) -> None:
    global _JOB, _DONE  # one copy per worker process, sent once instead of with every chunk
    _JOB, _DONE = job, done


def _run_chunk(chunk: list[Point]) -> Outcomes:
    assert _JOB is not None
    return evaluate_chunk(_JOB, chunk, _DONE)


class LocalRunner:
    """`jobs` worker processes for one job, kept across several `run` calls (a plan's search rounds), so
    their built clusters stay warm; jobs <= 1 runs in this process. Use as a context manager."""

    def __init__(self, job: Job, done: frozenset[str], jobs: int) -> None:
        self.job, self.done, self.jobs = job, done, jobs
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> "LocalRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def run(self, points: Sequence[Point]) -> Iterator[Outcomes]:
        """Chunks of `points` on the workers, yielded as they finish; at most 2 x jobs chunks in flight, so
        an interrupted sweep has little work queued and nothing half-written."""
        if self.jobs <= 1:
            yield from run_inline(self.job, points, self.done)
            return
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.jobs, initializer=_init_worker,
                                             initargs=(self.job, self.done))
        pending = chunks(points, self.jobs)
        pending.reverse()
        running: set = set()
        try:
            while pending or running:
                while pending and len(running) < 2 * self.jobs:
                    running.add(self._pool.submit(_run_chunk, pending.pop()))
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    yield fut.result()
        except BaseException:
            for fut in running:
                fut.cancel()
            raise


def run_local(job: Job, points: Sequence[Point], done: frozenset[str], jobs: int) -> Iterator[Outcomes]:
    """Chunks on `jobs` worker processes (LocalRunner), yielded as they finish."""
    with LocalRunner(job, done, jobs) as runner:
        yield from runner.run(points)
