"""Congruent process groups share one closed-form time (network/congruence.py): on every layout below, each
collective of the layout's stage graphs takes bit for bit the time that group alone gets without the classes,
and the classes are used only where the fabric is symmetric (one switch, identical machines, no hashed route)."""
from __future__ import annotations

import pytest

from simdist.engine.mp_groups import LayoutGroups
from simdist.engine.state import Simulation
from simdist.graph.tasks import Collective
from simdist.io.load import load_data
from simdist.network.congruence import GroupClasses
from simdist.scenario import Fidelity
from simdist.strategies.mp_plan import build_mp_plan
from simdist.strategies.pipeline_graph import pipeline_graphs

A100 = {"gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
        "nic": {"bandwidth": "200 Gb/s", "latency": "2 us", "transport": "rdma", "count": 8}}
GPT = {"hidden": 2048, "heads": 16, "vocab": 32000}
SWITCH = {"topology": "single_switch"}
FAT_TREE = {"topology": "fat_tree", "nodes_per_leaf": 2, "link": {"bandwidth": "200 Gb/s", "latency": "1 us"}}
OVERSUBSCRIBED = dict(FAT_TREE, oversubscription=2.0)
ONE_NIC = dict(A100, nic={"bandwidth": "200 Gb/s", "latency": "2 us", "transport": "rdma", "count": 1})
NVL72 = {"gpu": "gb200-186gb", "gpus_per_node": 72, "intra_node": "nvl72-gb200",
         "nic": {"bandwidth": "400 Gb/s", "latency": "2 us", "count": 72, "transport": "rdma"}}

# (nodes, fabric, parallelism, schedule, whether the classes apply (one switch, identical machines, railed GPUs),
#  whether stages share times: not where each stage sits at other GPU positions in its machines)
LAYOUTS = {
    "switch-tp4-pp4-dp2": ([dict(A100, count=4)], SWITCH, {"tp": 4, "pp": 4, "dp": 2}, "1f1b", True, True),
    "switch-tp2-pp4-dp4": ([dict(A100, count=4)], SWITCH, {"tp": 2, "pp": 4, "dp": 4}, "interleaved", True, True),
    "switch-tp8-pp2-dp2-cp2": ([dict(A100, count=8)], SWITCH, {"tp": 8, "pp": 2, "dp": 2, "cp": 2}, "1f1b", True,
                               True),
    "switch-uneven-stages": ([dict(A100, count=3)], SWITCH, {"tp": 2, "pp": 4, "dp": 3}, "1f1b", True, False),
    "switch-one-nic": ([dict(ONE_NIC, count=4)], SWITCH, {"tp": 4, "pp": 4, "dp": 2}, "1f1b", False, False),
    "fat-tree": ([dict(A100, count=8)], FAT_TREE, {"tp": 4, "pp": 4, "dp": 4}, "1f1b", False, False),
    "fat-tree-oversubscribed": ([dict(A100, count=8)], OVERSUBSCRIBED, {"tp": 4, "pp": 4, "dp": 4}, "1f1b", False,
                                False),
    "heterogeneous": ([dict(A100, count=2), dict(A100, count=2, nic=dict(A100["nic"], bandwidth="100 Gb/s"))], SWITCH,
                      {"tp": 4, "pp": 4, "dp": 2}, "1f1b", False, False),
    "nvl72": ([dict(NVL72, count=2)], SWITCH, {"tp": 4, "pp": 9, "dp": 2, "cp": 2}, "1f1b", True, False),
}


def _scenario(nodes, fabric, parallelism, schedule):
    training = {"parallelism": parallelism, "micro_batch": 1, "schedule": schedule}
    if schedule == "interleaved":
        training["virtual_stages"] = 2
    gpt = dict(GPT, layers=36 if parallelism["pp"] == 9 else 8)
    return load_data({
        "name": "congruence", "cluster": {"nodes": nodes, "fabric": fabric},
        "workload": {"model": {"gpt": gpt}, "seq_len": 1024, "global_batch": 16 * parallelism["dp"],
                     "precision": "fp16", "flash_attention": True},
        "training": training, "communication": {"overlap": True, "bucket_size": "64 MB"},
        "run": {"iterations": 1, "warmup": 0, "fidelity": "estimate"},
    })


def _same_times(scenario, symmetric: bool, shares: bool) -> None:
    """Every collective of the layout's stage graphs: the classes' time equals the group's own, bit for bit."""
    plan = build_mp_plan(scenario)
    ctx = Simulation(scenario, Fidelity.ESTIMATE).context
    shared = LayoutGroups(ctx, plan.layout, plan)
    alone = LayoutGroups(ctx, plan.layout, plan)
    alone._classes = GroupClasses(scenario, ctx.topology, ctx.network)
    alone._classes.symmetric = False  # every name its own class: the per-group timing
    assert GroupClasses(scenario, ctx.topology, ctx.network).symmetric is symmetric
    calls = {(t.group, t.op, t.size_bytes) for g in pipeline_graphs(plan, scenario.communication.bucket_size_bytes)
             for t in g.tasks if isinstance(t, Collective)}
    assert calls
    for group, op, size in sorted(calls, key=str):
        task = Collective(id=0, name="", group=group, op=op, size_bytes=size)
        assert shared.time_of(task, None) == alone.time_of(task, None), (group, op, size)
    built = {k for k in shared._cache if k[0] not in ("t", "n")}  # schedules built (not times): per class or call
    assert (len(built) < len(calls)) is shares


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_congruent_groups_take_the_time_each_takes_alone(name):
    nodes, fabric, parallelism, schedule, symmetric, shares = LAYOUTS[name]
    _same_times(_scenario(nodes, fabric, parallelism, schedule), symmetric, shares)


@pytest.mark.parametrize("imbalance", [1.0, 3.0])
def test_expert_all_to_alls_of_congruent_stages_take_the_same_time(imbalance):
    """Qwen3-30B-A3B on 4 H200 machines, pp 4 x dp 8 with ep 8: each stage's dispatcher all-to-alls (uneven
    with an imbalanced load) are translates of the other stages'."""
    nodes = [{"count": 4, "gpu": "h200-sxm-141gb", "gpus_per_node": 8, "intra_node": "nvswitch-h100",
              "nic": {"bandwidth": "400 Gb/s", "latency": "2 us", "count": 8, "transport": "rdma"}}]
    scenario = load_data({
        "name": "congruence-ep", "cluster": {"nodes": nodes, "fabric": SWITCH},
        "workload": {"model": "qwen3-30b-a3b", "seq_len": 512, "global_batch": 64, "precision": "bf16"},
        "training": {"parallelism": {"pp": 4, "dp": 8, "ep": 8, "zero": 1}, "micro_batch": 1, "optimizer": "adam",
                     "moe_load_imbalance": imbalance},
        "communication": {"backend": "nccl", "overlap": True},
        "run": {"iterations": 1, "warmup": 0, "fidelity": "estimate"},
    })
    _same_times(scenario, True, True)


def test_a_degraded_or_failed_link_makes_every_group_its_own_class():
    from simdist.network.analytical import AnalyticalNetwork

    nodes, fabric, parallelism, schedule, _, _ = LAYOUTS["switch-tp4-pp4-dp2"]
    scenario = _scenario(nodes, fabric, parallelism, schedule)
    ctx = Simulation(scenario, Fidelity.ESTIMATE).context
    degraded = AnalyticalNetwork(ctx.topology)
    assert GroupClasses(scenario, ctx.topology, degraded).symmetric
    degraded.set_link_capacity(0, 0.5 * float(degraded.capacity_Bps[0]))
    assert not GroupClasses(scenario, ctx.topology, degraded).symmetric
    failed = AnalyticalNetwork(ctx.topology)
    failed.fail_link(0)
    assert not GroupClasses(scenario, ctx.topology, failed).symmetric
