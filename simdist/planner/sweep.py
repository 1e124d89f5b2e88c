"""A sweep end to end: expand the axes, skip finished points, run the rest on an executor, append rows.

The output table has one row per point: `point`, `key`, the axis values, then RESULT_COLUMNS. A rerun
with the same sweep and file only runs what is missing (points are keyed by their resolved scenario;
a point whose inputs are unchanged is skipped without resolving it, by its input key: resume.py),
and a sweep with other axes, constraints, base scenario or fidelity into the same file is refused.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from simdist.planner.axes import Axis, Point, expand
from simdist.planner.evaluate import INPUT_DONE, PRUNED, SKIPPED, Job
from simdist.planner.executors import context_order, default_jobs, run_local
from simdist.planner.ray_executor import run_ray
from simdist.planner.rows import HEAD_COLUMNS, RESULT_COLUMNS, canonical
from simdist.planner.resume import ResumeIndex, fingerprint, index_path
from simdist.planner.store import SweepStore, write_parquet


@dataclass(frozen=True)
class SweepSpec:
    """What to sweep: axes (in order), groups of axes that advance together, and constraints."""

    axes: tuple[Axis, ...]
    zipped: tuple[tuple[str, ...], ...] = ()
    constraints: tuple[str, ...] = ()


@dataclass
class SweepOutcome:
    """What a sweep did: the table (rows as text, in point order) and its counts."""

    columns: tuple[str, ...]
    rows: list[dict[str, str]]
    points: int
    ran: int = 0
    resumed: int = 0
    pruned: int = 0
    by_status: dict[str, int] = field(default_factory=dict)


def columns_for(spec: SweepSpec) -> tuple[str, ...]:
    return HEAD_COLUMNS + tuple(a.key for a in spec.axes) + RESULT_COLUMNS


def signature(spec: SweepSpec, base: dict, overrides: Sequence[str], fidelity: str) -> dict[str, Any]:
    """What identifies a sweep in its result file (compared on resume)."""
    digest = hashlib.sha256(json.dumps(canonical(base), sort_keys=True).encode()).hexdigest()[:16]
    return {"axes": [[a.key, [canonical(v) for v in a.values]] for a in spec.axes],
            "zip": [list(z) for z in spec.zipped], "constraints": list(spec.constraints),
            "base": digest, "overrides": list(overrides), "fidelity": fidelity}


def journal_path(out: str, fmt: str) -> str:
    """The CSV the sweep appends to: the output itself, or beside a Parquet output."""
    return out if fmt == "csv" else out + ".journal.csv"


def run_sweep(spec: SweepSpec, base: dict, loader: Callable, out: str, *, base_dir: str = ".",
              name: str = "scenario", overrides: Sequence[str] = (), fidelity: str = "", jobs: int = 0,
              executor: str = "local", address: str | None = None, fmt: str = "csv",
              progress: Callable[[int, int], Any] | None = None) -> SweepOutcome:
    """Run every point of `spec` not yet in `out` and return the whole table.

    `loader(base, overrides, values, base_dir, name)` resolves one point's scenario (io.sweep_load).
    `progress(total, done_now)` is called with the number of points to run, then once per finished chunk
    with the number of points in it.
    """
    points = expand(spec.axes, spec.zipped)  # axes, zipped groups and constraints: checked by io.sweep_load
    prefix = fingerprint(base, overrides, fidelity, loader, base_dir, [v for a in spec.axes for v in a.values])
    job = Job(base=base, loader=loader, base_dir=base_dir, name=name, overrides=tuple(overrides),
              fidelity=fidelity, constraints=tuple(spec.constraints), input_prefix=prefix or "")
    columns = columns_for(spec)
    journal = journal_path(out, fmt)  # io.sweep_load.check_out_file has refused a file of another sweep
    store = SweepStore(journal, columns, signature(spec, base, overrides, fidelity)).open()
    index = ResumeIndex(index_path(Path(journal)), prefix).open(fresh=not store.done) if prefix else None
    done = frozenset(store.done) | ({INPUT_DONE + k for k in index.done_inputs(store.done)} if index else set())
    outcome = SweepOutcome(columns, [], len(points), resumed=store.resumed)
    jobs = jobs or default_jobs()
    if executor == "ray":
        batches = run_ray(job, context_order(points), done, jobs, address)
    else:
        batches = run_local(job, context_order(points), done, jobs)
    if progress:
        progress(len(points), 0)
    try:
        for batch in batches:  # one chunk's outcomes: its rows go to the file in one write
            finished, known = [], []
            for _, kind, row in batch:
                if kind == PRUNED:
                    outcome.pruned += 1
                elif kind == SKIPPED:
                    if row is not None:  # done, found by its resolved key: index it for the next resume
                        known.append(row)
                elif row is not None:
                    finished.append(row)
            store.append_many(finished)
            if index is not None:  # after the rows: an index line never names a row the file lacks
                index.append((r.get("input_key", ""), str(r["key"])) for r in finished + known)
            outcome.ran += len(finished)
            if progress:
                progress(len(points), len(batch))
    finally:
        store.close()
        if index is not None:
            index.close()
    outcome.rows = store.finish()
    for r in outcome.rows:
        outcome.by_status[r["status"]] = outcome.by_status.get(r["status"], 0) + 1
    if fmt == "parquet":
        write_parquet(outcome.rows, columns, out)
    return outcome
