"""A plan's space of model-parallel layouts as arrays: one entry per candidate, and which are valid.

When every axis of a plan is a layout key (LAYOUT_KEYS: tp, pp, dp, cp, ZeRO, virtual stages and schedule,
micro-batch, recomputation, sequence parallelism, precision), a candidate is a handful of integers, and the
rules the loader applies to them (io/resolve.py, io/rules_training.py, io/rules_parallel.py) are arithmetic
that numpy evaluates over the whole space at once, without building a Scenario per candidate. `invalid_reasons`
re-implements exactly those rules; tests/planner/test_layout_exact.py checks, on every candidate of a small
space, that it refuses the candidates the loader refuses and no others. Every candidate that is ever estimated is
loaded for real, so a rule this module missed shows up there as that candidate's `invalid` row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from simdist.errors import ScenarioError
from simdist.planner.axes import Factor, space_size
from simdist.scenario import PipelineSchedule, Recompute

LAYOUT_KEYS = {  # scenario key -> field of the grid
    "training.parallelism.tp": "tp", "training.parallelism.pp": "pp", "training.parallelism.dp": "dp",
    "training.parallelism.cp": "cp", "training.parallelism.zero": "zero", "training.virtual_stages": "v",
    "training.schedule": "schedule", "training.micro_batch": "mb", "training.recompute": "recompute",
    "training.sequence_parallel": "sp", "workload.precision": "precision", "training.parallelism.ep": "ep",
}
RECOMPUTES = tuple(r.value for r in Recompute)
SCHEDULES = tuple(s.value for s in PipelineSchedule)
MAX_LAYOUTS = 2_000_000  # a larger space is planned point by point (plan.py)


@dataclass
class LayoutGrid:
    """Every candidate's layout as integer arrays (recompute and schedule as indices into RECOMPUTES and
    SCHEDULES, precision as an index into `precisions`), with the reference scenario they vary."""

    n: int
    fields: dict[str, np.ndarray]
    precisions: tuple[str, ...]
    reference: Any  # a Scenario that loads: the values of the keys no axis sets
    dp_given: np.ndarray  # per candidate: training.parallelism.dp is set (by an axis or the base), else derived
    gpus: int
    etp_given: bool = False  # training.parallelism.etp is set, else it follows tp (io/resolve.py)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.fields[name]

    def layout(self, i: int) -> dict[str, Any]:
        """Candidate i's layout as plain values (recompute, schedule and precision as their names)."""
        f = self.fields
        out = {k: int(f[k][i]) for k in ("tp", "pp", "dp", "cp", "ep", "zero", "v", "mb")}
        out.update(sp=bool(f["sp"][i]), recompute=RECOMPUTES[f["recompute"][i]],
                   schedule=SCHEDULES[f["schedule"][i]], precision=self.precisions[f["precision"][i]])
        return out


def is_layout_space(spec) -> bool:
    """Every axis is a layout key (zipped groups of them included)."""
    return bool(spec.axes) and all(a.key in LAYOUT_KEYS for a in spec.axes)


def step_indices(fs: Sequence[Factor], n: int) -> list[np.ndarray]:
    """Per factor, each candidate's step (the last factor varying fastest, as axes.expand orders points)."""
    flat = np.arange(n, dtype=np.int64)
    out = []
    for f in reversed(fs):
        flat, step = np.divmod(flat, len(f.steps))
        out.append(step)
    return out[::-1]


def reference_scenario(base: dict, overrides: Sequence[str], fs: Sequence[Factor], loader, base_dir: str,
                       name: str, tries: int = 64) -> Any:
    """A scenario that loads: the base alone, else the first of the first `tries` candidates that loads."""
    try:
        return loader(base, tuple(overrides), {}, base_dir, name)
    except ScenarioError:
        pass
    n = space_size(fs)
    steps = step_indices(fs, min(n, tries))
    for i in range(min(n, tries)):
        values = {k: v for f, s in zip(fs, steps) for k, v in f.items(int(s[i]))}
        try:
            return loader(base, tuple(overrides), values, base_dir, name)
        except ScenarioError:
            continue
    return None


def build_grid(fs: Sequence[Factor], reference: Any, base: dict, overrides: Sequence[str]) -> LayoutGrid:
    """The candidates' layouts: each axis's values where it is set, the reference scenario's elsewhere."""
    n = space_size(fs)
    t, w = reference.training, reference.workload
    given_dp = _given(base, overrides, "dp")
    par = t.parallelism
    const = {"tp": par.tp, "pp": par.pp, "dp": given_dp or 0, "cp": par.cp, "ep": par.ep, "zero": par.zero,
             "v": t.virtual_stages, "mb": t.micro_batch, "sp": bool(t.sequence_parallel),
             "recompute": Recompute(t.recompute).value, "schedule": PipelineSchedule(t.schedule).value,
             "precision": w.precision.value}
    steps = step_indices(fs, n)
    raw: dict[str, np.ndarray] = {}
    for f, step in zip(fs, steps):
        for j, key in enumerate(f.keys):
            field = LAYOUT_KEYS[key]
            values = [s[j] for s in f.steps]
            raw[field] = np.asarray([_coded(field, v) for v in values], dtype=object)[step]
    precisions = sorted({const["precision"], *(str(p) for p in raw.get("precision", ()))})
    fields: dict[str, np.ndarray] = {}
    for field, c in const.items():
        col = raw.get(field)
        if col is None:
            col = np.full(n, _coded(field, c), dtype=object)
        if field == "recompute":
            fields[field] = np.asarray([RECOMPUTES.index(str(x)) for x in col], dtype=np.int64)
        elif field == "schedule":
            fields[field] = np.asarray([SCHEDULES.index(str(x)) for x in col], dtype=np.int64)
        elif field == "precision":
            fields[field] = np.asarray([precisions.index(str(x)) for x in col], dtype=np.int64)
        elif field == "dp":
            fields[field] = np.asarray([0 if x is None else x for x in col], dtype=np.int64)
        else:
            fields[field] = col.astype(np.int64)
    gpus = reference.cluster.num_gpus
    given = fields["dp"] > 0
    # dp not given (no value, or a null axis value) is derived as io/resolve.py derives it (0 where tp x pp x cp
    # does not divide the GPUs)
    ranks = fields["tp"] * fields["pp"] * fields["cp"]
    derived = np.where(gpus % ranks == 0, gpus // np.maximum(ranks, 1), 0)
    fields["dp"] = np.where(given, fields["dp"], derived)
    return LayoutGrid(n, fields, tuple(precisions), reference, given, gpus, _given(base, overrides, "etp") is not None)


def _given(base: dict, overrides: Sequence[str], name: str) -> int | None:
    """training.parallelism.<name> as the base and its --set overrides give it (None: not given)."""
    value = ((base.get("training") or {}).get("parallelism") or {}).get(name)
    for text in overrides:
        key, _, given = str(text).partition("=")
        if key.strip() == f"training.parallelism.{name}":
            given = given.strip()
            value = int(given) if given.isdigit() else None
    return value


def replica_batch(g: LayoutGrid) -> np.ndarray:
    """Samples per data-parallel replica per step (strategies.plan.resolve_batch x grad_accumulation); 0 where
    the global batch does not split over dp."""
    w, k = g.reference.workload, g.reference.training.grad_accumulation
    dp = np.maximum(g["dp"], 1)
    if w.batch_per_gpu is not None:
        return np.full(g.n, w.batch_per_gpu * k, dtype=np.int64)
    per = dp * k
    return np.where(w.global_batch % per == 0, w.global_batch // per * k, 0)


def _coded(field: str, value: Any) -> Any:
    """An axis value as the grid holds it (what the schema would read it as; a value it refuses stays as is)."""
    if field in ("recompute", "schedule", "precision"):
        return str(getattr(value, "value", value))
    if field == "sp":
        return bool(value) if isinstance(value, bool) else value
    if field == "zero" and value == "fsdp":
        return 3
    return value


def typed_ok(fs: Sequence[Factor]) -> str | None:
    """Why the layout grid cannot hold these axes' values (a value of the wrong type), or None."""
    for f in fs:
        for j, key in enumerate(f.keys):
            field = LAYOUT_KEYS[key]
            for s in f.steps:
                v = _coded(field, s[j])
                if field in ("recompute", "schedule"):
                    if v not in (RECOMPUTES if field == "recompute" else SCHEDULES):
                        return f"{key}: {v!r}"
                elif field == "precision":
                    if not isinstance(v, str):
                        return f"{key}: {v!r}"
                elif field == "sp":
                    if not isinstance(v, bool):
                        return f"{key}: {v!r}"
                elif field == "dp" and v is None:
                    continue
                elif isinstance(v, bool) or not isinstance(v, int) or v < (0 if field == "zero" else 1) \
                        or (field == "zero" and v > 3):
                    return f"{key}: {v!r}"
    return None

