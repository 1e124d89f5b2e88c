"""Property tests: random scenario data built from the real schema's shape never escapes as anything
but ScenarioError; overrides and counts behave as closed forms say."""
from __future__ import annotations

import copy
import types
import typing
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from simdist.errors import ScenarioError
from simdist.io.load import check_data, load_data
from simdist.io.overrides import apply_overrides
from simdist.io.schema import ScenarioModel
from simdist.scenario import Scenario

from tests.io.conftest import DESIGN_EXAMPLE, MINIMAL

SETTINGS = settings(max_examples=int(__import__("os").environ.get("SIMDIST_FUZZ_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.too_slow])

UNITS = ["Gb/s", "GB/s", "Gbps", "gbps", "b/s", "MB", "MiB", "mb", "B", "us", "ms", "s", "min", "h", "sec", "",
         "TFLOP/s", "x", "Gb", "KiB/s"]
NUMBERS = st.one_of(st.integers(-3, 10**4), st.floats(allow_nan=True, allow_infinity=True, width=32))
UNIT_STRINGS = st.builds(lambda n, sp, u: f"{n}{sp}{u}", NUMBERS, st.sampled_from(["", " ", "  "]), st.sampled_from(UNITS))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=6), UNIT_STRINGS,
                    st.sampled_from(["ring", "ps", "rdma", "tcp", "resnet50", "a100-sxm4-80gb", "ib-hdr", "node:1",
                                     "gpu:99", "link:x", "nvswitch-a100", "fp16", "all_reduce", "custom"]))
JUNK = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                    max_leaves=6)


def _strip(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def shaped(tp: Any, depth: int = 0) -> st.SearchStrategy:
    """Values shaped like schema type `tp`, with junk mixed in at every level."""
    tp = _strip(tp)
    origin = typing.get_origin(tp)
    if depth > 6:
        return JUNK
    if origin in (typing.Union, types.UnionType):
        return st.one_of([shaped(a, depth + 1) for a in typing.get_args(tp)] + [JUNK])
    if origin is list:
        return st.one_of(st.lists(shaped(typing.get_args(tp)[0], depth + 1), max_size=3), JUNK)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        fields = {name: shaped(f.annotation, depth + 1) for name, f in tp.model_fields.items()}
        names = list(fields)

        @st.composite
        def mapping(draw):
            keep = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names))) if names else []
            out = {k: draw(fields[k]) for k in keep}
            if draw(st.integers(0, 9)) == 0:  # an unknown key, often a near-miss of a real one
                out[draw(st.sampled_from(names)) + draw(st.sampled_from(["", "s", "_"]))] = draw(JUNK)
            return out

        return st.one_of(mapping(), JUNK) if depth else mapping()
    return st.one_of(SCALARS, JUNK)


def _outcome(data: Any) -> None:
    try:
        s = load_data(data)
    except ScenarioError as err:
        assert err.issues and all(isinstance(i.path, str) and i.message for i in err.issues)
        return
    assert isinstance(s, Scenario)


@SETTINGS
@given(shaped(ScenarioModel))
def test_schema_shaped_random_data_only_raises_scenario_error(data):
    _outcome(data)
    assert isinstance(check_data(data), list)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


EXAMPLE = yaml.safe_load(DESIGN_EXAMPLE)
EXAMPLE.pop("calibration")
EXAMPLE_PATHS = _paths(EXAMPLE)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(EXAMPLE_PATHS), st.sampled_from(["replace", "delete", "junk-key"]), JUNK),
                min_size=1, max_size=4))
def test_mutated_design_example_only_raises_scenario_error(mutations):
    data = copy.deepcopy(EXAMPLE)
    for path, how, value in mutations:
        parent = data
        try:
            for p in path[:-1]:
                parent = parent[p]
            if how == "replace":
                parent[path[-1]] = value
            elif how == "delete" and isinstance(parent, dict):
                parent.pop(path[-1], None)
            elif isinstance(parent, dict):
                parent[str(path[-1]) + "x"] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation changed the shape
    _outcome(data)


@SETTINGS
@given(st.text(max_size=30))
def test_any_override_text_only_raises_scenario_error(text):
    try:
        out = apply_overrides(MINIMAL, [text])
    except ScenarioError:
        return
    assert isinstance(out, dict)
    _outcome(out)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 64), st.integers(1, 8))
def test_count_overrides_give_the_gpu_count(nodes, per_node):
    s = load_data(MINIMAL, [f"cluster.nodes.0.count={nodes}", f"cluster.nodes.0.gpus_per_node={per_node}"])
    assert s.cluster.num_nodes == nodes and s.cluster.num_gpus == nodes * per_node
    assert s.training.parallelism.dp == nodes * per_node


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3), st.integers()),
                min_size=1, max_size=5))
def test_last_override_of_a_key_wins(sets):
    texts = [f"{'.'.join(k)}={v}" for k, v in sets]
    try:
        out = apply_overrides({}, texts)
    except ScenarioError:
        return  # a later key went inside an earlier scalar
    keys, value = sets[-1]
    node = out
    for k in keys:
        node = node[k]
    assert node == value
