"""`simdist check` on a file with a `sweep:` or `plan:` block: every refusal `simdist sweep` or `simdist plan`
would make before a point runs, and the base scenario's own issues except where an axis sets the key.

A sweep or plan refuses, up front, a block it cannot read (unknown keys, axes, zipped groups,
constraints, the plan's objective, budget and search options; io/sweep_load.py) and the goodput
objective without failures. A point that does not load is not a refusal: it becomes that point's
invalid row. So the base scenario's issues count only at keys no axis sets (an axis may supply a
value the base lacks or replace one it refuses).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from simdist.errors import Issue, ScenarioError
from simdist.io.load import check_data
from simdist.io.sweep_load import check_goodput, plan_spec, read_sweep_file, sweep_spec
from simdist.io.yaml_source import read_file

BLOCKS = ("sweep", "plan")


def sweep_file_issues(path: str | Path, overrides: Sequence[str] = ()) -> list[Issue] | None:
    """None when the file has neither block (check it as a scenario); else every issue, [] when none."""
    source = read_file(Path(path).expanduser())
    if source.issues or not isinstance(source.data, dict) or not any(k in source.data for k in BLOCKS):
        return None
    issues: list[Issue] = []
    axis_keys: set[str] = set()
    base = base_dir = name = None
    for key in (k for k in BLOCKS if k in source.data):
        try:
            base, block, base_dir, name = read_sweep_file(path, key)
            axis_keys |= {str(k) for k in (block.get("axes") or {})}
            if key == "sweep":
                sweep_spec(block)
            else:
                check_goodput(plan_spec(block), base, overrides, str(base_dir), name)
        except ScenarioError as err:
            issues += err.issues
    if base is not None:
        issues += [i for i in check_data(base, overrides, base_dir, name) if not _set_by_axis(i.path, axis_keys)]
    return issues


def _set_by_axis(path: str, axis_keys: set[str]) -> bool:
    """Whether an issue at `path` is about a key an axis sets (the key itself, below it or above it)."""
    return any(path == k or path.startswith(k + ".") or k.startswith(path + ".") for k in axis_keys if path)
