"""Execution graphs: well-formed by construction, and the builders' structure (segments, buckets, classes)."""
from __future__ import annotations

import copy

import pytest

from simdist.graph.builder import GraphBuilder
from simdist.graph.tasks import Collective, Compute, Graph, RankClass, Stream
from simdist.io.load import load_data
from simdist.strategies.data_parallel import bsp_graph
from simdist.strategies.plan import build_plan

RC = RankClass(0, (0, 1), 0, "gpu", 8)
BASE = {
    "name": "g",
    "cluster": {"nodes": [{"count": 4, "gpu": "v100-sxm2-32gb", "gpus_per_node": 2, "intra_node": "pcie-gen3",
                           "nic": {"bandwidth": "25 Gb/s", "latency": "10 us", "transport": "tcp"}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": "resnet50", "batch_per_gpu": 32, "precision": "fp16"},
    "communication": {"strategy": "ring", "bucket_size": "25 MB"},
    "run": {"iterations": 4, "warmup": 1},
}


def _scenario(**changes):
    from simdist.io.overrides import set_path

    data = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        set_path(data, dotted.split("__"), value)
    return load_data(data)


def test_ids_must_be_indices_and_dependencies_point_backwards():
    with pytest.raises(ValueError, match="index"):
        Graph(RC, (Compute(id=1, name="a"),))
    with pytest.raises(ValueError, match="later"):
        Graph(RC, (Compute(id=0, name="a", deps=(1,)), Compute(id=1, name="b")))
    b = GraphBuilder()
    a = b.add(Compute, "a", (), Stream.COMPUTE, duration_s=1.0)
    c = b.add(Collective, "c", (a, a), Stream.COMM, size_bytes=8.0, key="c")
    g = b.build(RC)
    assert [t.id for t in g.tasks] == [a, c] == [0, 1] and g.tasks[1].deps == (0,)


def test_bsp_graph_cuts_backward_where_buckets_get_ready():
    plan = build_plan(_scenario())
    cc = plan.classes[0]
    g = bsp_graph(plan, cc)
    backward = [t for t in g.tasks if isinstance(t, Compute) and t.kind == "backward"]
    assert sum(t.duration_s for t in backward) == pytest.approx(cc.bwd_s, rel=1e-12)
    colls = [t for t in g.tasks if isinstance(t, Collective)]
    assert len(colls) == sum(len(bc.collectives) for bc in plan.buckets) == len(plan.buckets)
    assert all(t.stream == Stream.COMM and t.group == "dp" for t in colls)
    opt = g.tasks[-1]
    assert opt.kind == "optimizer" and colls[-1].id in opt.deps
    # every bucket's collective depends on the segment that ends when the bucket is ready
    ends, acc = {}, 0.0
    for t in backward:
        acc += t.duration_s
        ends[t.id] = acc
    for j, c in enumerate(colls):
        assert ends[c.deps[0]] == pytest.approx(cc.ready_s[j], rel=1e-12)


def test_no_overlap_launches_every_bucket_after_the_whole_backward():
    plan = build_plan(_scenario(communication__overlap=False))
    g = bsp_graph(plan, plan.classes[0])
    backward = [t for t in g.tasks if isinstance(t, Compute) and t.kind == "backward"]
    assert len(backward) == 1
    assert all(t.deps == (backward[0].id,) for t in g.tasks if isinstance(t, Collective) and t.key.endswith("/0")
               and t.key.startswith("bucket0"))


def test_fusion_cycle_is_a_wait_task_to_the_next_tick():
    plan = build_plan(_scenario(communication__fusion_cycle="5 ms"))
    cc = plan.classes[0]
    g = bsp_graph(plan, cc)
    waits = [t for t in g.tasks if isinstance(t, Compute) and t.kind == "wait"]
    assert waits and all(t.stream is None for t in waits)
    for w in waits:
        j = int(w.name.split()[0].removeprefix("bucket"))
        assert (cc.ready_s[j] + w.duration_s) / 5e-3 == pytest.approx(round((cc.ready_s[j] + w.duration_s) / 5e-3))


def test_identical_ranks_are_one_class_and_a_straggler_splits_only_itself():
    assert len(build_plan(_scenario()).classes) == 1
    plan = build_plan(_scenario(failures={"events": [{"at": "0 s", "kind": "straggler", "target": "gpu:5",
                                                       "slowdown": 2.0}]}))
    assert [c.rank_class.ranks for c in plan.classes] == [(0, 1, 2, 3, 4, 6, 7), (5,)]
    slow = plan.classes[1]
    assert slow.rank_class.slowdown == 2.0 and slow.bwd_s == pytest.approx(2 * plan.classes[0].bwd_s)
    assert plan.class_of()[5] == 1 and plan.slowest is slow


def test_a_mixed_cluster_has_one_class_per_gpu_kind():
    data = copy.deepcopy(BASE)
    other = copy.deepcopy(data["cluster"]["nodes"][0])
    other.update(gpu="a100-sxm4-80gb", count=2)
    data["cluster"]["nodes"].append(other)
    plan = build_plan(load_data(data))
    assert [(c.rank_class.gpu, len(c.rank_class.ranks)) for c in plan.classes] == [("v100-sxm2-32gb", 8),
                                                                                   ("a100-sxm4-80gb", 4)]
    assert plan.classes[1].bwd_s < plan.classes[0].bwd_s
