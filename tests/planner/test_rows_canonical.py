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


@dataclasses.dataclass(frozen=True)
class Top:
    a: "Spec"
    name: str = "x"


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


def test_point_key_hashes_the_defined_text(tmp_path):
    """point_key assembles its text section by section from a memo: the text and so the key must be
    exactly those of the definition, on the first sight of a section and on a memo hit."""
    import hashlib
    import json

    from simdist.planner.rows import _key_text_fast, key_text

    for path in ["scenarios/default.yaml", "scenarios/examples/fattree-64node-oversub.yaml"]:
        s = load_scenario(ROOT / path)
        for _ in range(2):
            assert _key_text_fast(s, "estimate") == key_text(s, "estimate")
            want = json.dumps({"scenario": reference(s), "fidelity": "estimate"}, sort_keys=True,
                              separators=(",", ":"))
            assert point_key(s, "estimate") == hashlib.sha256(want.encode()).hexdigest()[:16]


def test_point_key_memo_keeps_equal_but_differently_typed_sections_apart():
    """1 == 1.0 and 0.0 == -0.0, but their canonical texts differ, so their keys must too."""
    from simdist.planner.rows import _key_text_fast, key_text

    import pickle

    pickle.dumps(Top(Spec(1, (), {})))  # the memo is in use (a local class would not pickle)
    for first, second in [(1, 1.0), (0.0, -0.0), (True, 1)]:
        x, y = Top(Spec(first, (), {})), Top(Spec(second, (), {}))
        assert x == y
        assert _key_text_fast(x, "estimate") == key_text(x, "estimate")
        assert _key_text_fast(y, "estimate") == key_text(y, "estimate")
        assert point_key(x, "estimate") != point_key(y, "estimate")
