"""`canonical` (what a sweep point's key hashes) is dispatched by type for speed: it must give exactly
what the plain recursive definition gives, so keys in existing result files stay valid."""
from __future__ import annotations

import dataclasses
import enum
import math
from pathlib import Path

import numpy as np
import pytest

from simdist.io.load import load_scenario
from simdist.planner.rows import canonical, point_key

ROOT = Path(__file__).resolve().parents[2]


def reference(obj):
    """The definition: dataclasses, enums, mappings, sequences, sets, floats, scalars, else repr."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: reference(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return reference(obj.value)
    if isinstance(obj, dict):
        return {str(k): reference(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [reference(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((reference(v) for v in obj), key=repr)
    if isinstance(obj, float):
        return repr(obj)
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    return repr(obj)


class Colour(enum.StrEnum):
    RED = "red"


@dataclasses.dataclass(frozen=True)
class Spec:
    a: float
    b: tuple
    c: dict


@pytest.mark.parametrize("path", ["scenarios/default.yaml", "scenarios/examples/fattree-64node-oversub.yaml", "scenarios/examples/nvswitch-8gpu-allreduce.yaml"])
def test_canonical_equals_the_definition_on_scenarios(path):
    s = load_scenario(ROOT / path)
    assert canonical(s) == reference(s)


def test_canonical_equals_the_definition_on_odd_values():
    values = [Spec(1.5, (Colour.RED, None, True, 3), {2: {1, 3}, "x": frozenset({"a"})}), math.nan, -math.inf,
              np.float64(0.1), np.int64(3), [Spec, int], {"k": [1.0, (2, 3.25)]}, b"raw"]
    for v in values:
        assert canonical(v) == reference(v)


def test_point_key_is_stable():
    s = load_scenario(ROOT / "scenarios/default.yaml")
    assert point_key(s, "estimate") == point_key(load_scenario(ROOT / "scenarios/default.yaml"), "estimate")
    assert point_key(s, "estimate") != point_key(s, "simulate")
