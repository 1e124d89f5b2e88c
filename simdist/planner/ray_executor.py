"""The Ray executor: the same chunks as the local executor, as Ray tasks on a local or existing cluster.

`address` joins a running cluster (`ray start --head` elsewhere, or "auto"); without it a local Ray
instance is started with `jobs` CPUs and stopped at the end. Ray is an optional extra
(`pip install 'simdist[ray]'`).
"""
from __future__ import annotations

from typing import Iterator, Sequence

from simdist.errors import SimdistError
from simdist.planner.axes import Point
from simdist.planner.evaluate import Job, evaluate_chunk
from simdist.planner.executors import Outcomes, chunks


def run_ray(job: Job, points: Sequence[Point], done: frozenset[str], jobs: int,
            address: str | None = None) -> Iterator[Outcomes]:
    """Chunks as Ray tasks, yielded as they finish; job and done keys go to the object store once."""
    try:
        import ray
    except ImportError:
        raise SimdistError("--executor ray needs Ray: pip install 'simdist[ray]'") from None
    started = not ray.is_initialized()
    if started:
        kwargs = {"address": address} if address else {"num_cpus": max(1, jobs), "include_dashboard": False}
        ray.init(log_to_driver=False, configure_logging=False, **kwargs)
    try:
        remote = ray.remote(evaluate_chunk)
        job_ref, done_ref = ray.put(job), ray.put(done)
        pending = [remote.remote(job_ref, chunk, done_ref) for chunk in chunks(points, max(1, jobs))]
        while pending:
            finished, pending = ray.wait(pending, num_returns=1)
            for ref in finished:
                yield ray.get(ref)
    finally:
        if started:
            ray.shutdown()
