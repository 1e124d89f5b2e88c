"""Every shipped scenario runs, and its result equals the golden one (regenerate with `make goldens`)."""
from __future__ import annotations

import json
import math

import pytest

from tests.golden.regenerate import compute, golden_path, shipped_scenarios

SCENARIOS = shipped_scenarios()


def _close(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}: keys differ {sorted(set(a) ^ set(b))}"] if set(a) != set(b) else []
        for k in sorted(set(a) & set(b)):
            out += _close(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items vs {len(b)}"]
        return [m for i, (x, y) in enumerate(zip(a, b)) for m in _close(x, y, f"{path}[{i}]")]
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15):
            return [f"{path}: {a!r} vs golden {b!r}"]
        return []
    return [] if a == b else [f"{path}: {a!r} vs golden {b!r}"]


def test_there_are_shipped_scenarios():
    assert len(SCENARIOS) >= 11


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_golden(scenario):
    golden = golden_path(scenario)
    assert golden.exists(), f"no golden result for {scenario.name}: run `make goldens`"
    diffs = _close(compute(scenario), json.loads(golden.read_text()))
    assert not diffs, "result differs from the golden one (if intended, `make goldens`):\n" + "\n".join(diffs[:20])
