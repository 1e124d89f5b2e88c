"""--set overrides: YAML-typed values, nested keys, list indices, created mappings, errors naming the key."""
from __future__ import annotations

import copy

import pytest

from simdist.errors import ScenarioError
from simdist.io.load import load_data, load_scenario
from simdist.io.overrides import apply_overrides, parse_override

from tests.io.conftest import MINIMAL

BASE = {"communication": {"overlap": True, "strategy": "ring"}, "cluster": {"nodes": [{"count": 8}, {"count": 2}]},
        "name": "x"}


def test_bool_int_and_string_values():
    out = apply_overrides(BASE, ["communication.overlap=false", "cluster.nodes.0.count=16",
                                 "communication.strategy=ps", "communication.bucket_size=25 MB"])
    assert out["communication"] == {"overlap": False, "strategy": "ps", "bucket_size": "25 MB"}
    assert out["cluster"]["nodes"][0]["count"] == 16 and out["cluster"]["nodes"][1]["count"] == 2
    assert BASE["communication"]["overlap"] is True  # input untouched


def test_list_and_mapping_values():
    out = apply_overrides({}, ['workload.benchmark.sizes=["1 MB","1 GB"]', "workload.benchmark.op=all_reduce",
                               "communication.compression={method: topk, ratio: 0.01}"])
    assert out["workload"]["benchmark"] == {"sizes": ["1 MB", "1 GB"], "op": "all_reduce"}
    assert out["communication"]["compression"] == {"method": "topk", "ratio": 0.01}


def test_missing_intermediate_mappings_are_created():
    out = apply_overrides({"a": None}, ["a.b.c=1", "x.y=2"])
    assert out == {"a": {"b": {"c": 1}}, "x": {"y": 2}}


def test_later_overrides_win_and_equals_in_value():
    out = apply_overrides({}, ["name=a", "name=b=c"])
    assert out["name"] == "b=c"


@pytest.mark.parametrize("override, path, words", [
    ("cluster.nodes.2.count=1", "cluster.nodes.2", "out of range"),
    ("cluster.nodes.-1.count=1", "cluster.nodes.-1", "out of range"),
    ("cluster.nodes.first.count=1", "cluster.nodes.first", "not a list index"),
    ("name.first=1", "name.first", "not a mapping"),
    ("communication.overlap.x.y=1", "communication.overlap.x", "not a mapping"),
    ("communication.overlap", "--set", "dotted.key=value"),
    ("=3", "--set", "dotted names"),
    ("a..b=3", "--set", "dotted names"),
    ("name=[1, 2", "name", "not valid YAML"),
])
def test_bad_overrides_name_the_key(override, path, words):
    with pytest.raises(ScenarioError) as e:
        apply_overrides(BASE, [override])
    assert e.value.issues[0].path == path and words in str(e.value)


def test_all_bad_overrides_reported_together():
    with pytest.raises(ScenarioError) as e:
        apply_overrides(BASE, ["cluster.nodes.5.count=1", "name.x=1", "ok.key=1"])
    assert [i.path for i in e.value.issues] == ["cluster.nodes.5", "name.x"]


def test_parse_override_types():
    assert parse_override("a.b=3") == (["a", "b"], 3)
    assert parse_override("a=1.5") == (["a"], 1.5)
    assert parse_override("a=") == (["a"], None)
    assert parse_override("a='007'") == (["a"], "007")


def test_overrides_through_the_loader(write):
    p = write(MINIMAL)
    s = load_scenario(p, ["cluster.nodes.0.count=4", "communication.overlap=false", "run.iterations=7"])
    assert s.cluster.num_nodes == 4 and s.communication.overlap is False and s.run.iterations == 7


def test_override_type_errors_are_scenario_errors():
    d = copy.deepcopy(MINIMAL)
    with pytest.raises(ScenarioError) as e:
        load_data(d, ["cluster.nodes.0.count=0", "communication.overlap=maybe"])
    assert [i.path for i in e.value.issues] == ["cluster.nodes.0.count", "communication.overlap"]
