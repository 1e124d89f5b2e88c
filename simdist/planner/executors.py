"""Where a sweep's points run: this process, local worker processes (the default), or Ray (ray_executor).

An executor takes the job, the points still to run and the keys already done, and yields each chunk's
outcomes as it finishes, in whatever order chunks finish (the store sorts rows at the end). Points are
chunked in order, and the sweep orders them so that points on the same cluster share a chunk: a
worker then builds each cluster's topology once and reuses it.
"""
from __future__ import annotations

import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Iterator, Sequence

from simdist.planner.axes import Point
from simdist.planner.evaluate import Job, evaluate_chunk

Outcomes = list[tuple[int, str, dict | None]]  # (point index, kind, row) per point


def chunks(points: Sequence[Point], jobs: int, most: int = 16) -> list[list[Point]]:
    """Consecutive runs of points, small enough to keep every worker busy and the progress bar moving."""
    size = max(1, min(most, len(points) // max(1, 4 * jobs)))
    return [list(points[i:i + size]) for i in range(0, len(points), size)]


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


def run_local(job: Job, points: Sequence[Point], done: frozenset[str], jobs: int) -> Iterator[Outcomes]:
    """Chunks on `jobs` worker processes, yielded as they finish; at most 2 x jobs chunks in flight, so
    an interrupted sweep has little work queued and nothing half-written."""
    if jobs <= 1:
        yield from run_inline(job, points, done)
        return
    pending = chunks(points, jobs)
    pending.reverse()
    with ProcessPoolExecutor(max_workers=jobs, initializer=_init_worker, initargs=(job, done)) as pool:
        running = set()
        try:
            while pending or running:
                while pending and len(running) < 2 * jobs:
                    running.add(pool.submit(_run_chunk, pending.pop()))
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    yield fut.result()
        except BaseException:
            for fut in running:
                fut.cancel()
            raise
