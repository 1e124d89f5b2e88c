"""Copies of a model-parallel call merged where they move in lockstep (network/lockstep.py): the simulated run is
the same, field by field, as with every copy on its own, on symmetric clusters (where copies merge) and on ones
that are not (where the partition keeps them apart); and a symmetric layout's calls do merge."""
from __future__ import annotations

import copy

import pytest

from simdist.engine import mp_groups
from simdist.engine.plans import build
from simdist.engine.simulation import simulate
from simdist.graph.tasks import Collective
from simdist.io.load import load_data
from simdist.io.overrides import set_path
from simdist.scenario import Fidelity
from tests.engine.test_every_key import MOE, TRAIN
from tests.engine.test_replayed_simulate import _same

NIC = {"bandwidth": "200 Gb/s", "latency": "2 us", "transport": "rdma", "count": 8}
NODE = {"count": 4, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100", "nic": NIC}
BASE = {
    "name": "lockstep",
    "cluster": {"nodes": [NODE], "fabric": {"topology": "single_switch"}},
    "workload": {"model": {"gpt": {"layers": 8, "hidden": 2048, "heads": 16, "vocab": 32000}}, "seq_len": 4096,
                 "global_batch": 16, "precision": "bf16", "flash_attention": True},
    "training": {"parallelism": {"tp": 4, "pp": 2, "dp": 2, "cp": 2}, "micro_batch": 1},
    "communication": {"overlap": True},
    "run": {"iterations": 2, "warmup": 0, "fidelity": "simulate"},
}
SLOW_NIC = dict(NIC, bandwidth="50 Gb/s")
CASES = {
    "symmetric, cp ring beside dp and pp": {},
    "ZeRO-1, tp overlap": {"training.parallelism.zero": 1, "training.tp_comm_overlap": True,
                           "training.sequence_parallel": True},
    "two node kinds": {"cluster.nodes": [dict(NODE, count=1, nic=nic) for nic in (NIC, SLOW_NIC, NIC, SLOW_NIC)]},
    "oversubscribed fat tree": {"cluster.nodes.0.count": 8, "training.parallelism.dp": 4,
                                "cluster.fabric": {"topology": "fat_tree", "nodes_per_leaf": 2, "oversubscription": 4,
                                                   "link": {"bandwidth": "200 Gb/s", "latency": "1 us"}}},
    "tp across two nodes, fat tree": {"cluster.nodes.0.count": 8, "training.parallelism": {"tp": 16, "pp": 2, "dp": 2},
                                      "cluster.fabric": {"topology": "fat_tree", "nodes_per_leaf": 2,
                                                         "oversubscription": 2,
                                                         "link": {"bandwidth": "100 Gb/s", "latency": "1 us"}}},
    "dp innermost, interleaved": {"cluster.nodes.0.count": 8,
                                  "training.parallelism": {"tp": 2, "pp": 2, "dp": 8, "cp": 2},
                                  "training.placement_order": "dp,tp,cp,pp", "training.schedule": "interleaved",
                                  "training.virtual_stages": 2},
}


EXPERTS = {**MOE, "cluster.nodes.0.count": 2, "workload.global_batch": 32, "run.fidelity": "simulate",
           "training.parallelism": {"pp": 2, "ep": 4, "zero": 1}}  # Qwen3-30B-A3B: 2 ep groups a stage


def _scenario(changes: dict, base: dict = BASE):
    data = copy.deepcopy(base)
    for dotted, value in changes.items():
        set_path(data, dotted.split("."), copy.deepcopy(value))
    return load_data(data)


@pytest.mark.parametrize("case", list(CASES) + ["expert parallel", "expert parallel, a hot expert"])
def test_merged_copies_give_the_same_run(case, monkeypatch):
    """Every field of the result, trace and links included (1e-9); the expert all-to-alls' independent flows
    are coloured one by one, their copies merged where every flow finds its like."""
    hot = {"training.moe_load_imbalance": 3.0} if "hot" in case else {}
    scenario = _scenario(CASES[case]) if case in CASES else _scenario({**EXPERTS, **hot}, TRAIN)
    merged = simulate(scenario).to_dict()
    monkeypatch.setattr(mp_groups.LayoutGroups, "merge_lockstep", lambda self, calls: None)
    alone = simulate(scenario).to_dict()
    assert merged["iteration_by"] in ("executor", "partly_alone", "fold_replayed")
    assert not _same(merged, alone)


def _unions(scenario):
    """The plan's LayoutGroups and {group name: (chains of its first call's union, copies)} after the merge."""
    plan, sim = build(scenario, Fidelity.SIMULATE)
    groups = sim.context.layout_groups(plan.layout.layout, plan.layout)
    out = {}
    for g in plan.graphs:
        for t in g.tasks:
            if isinstance(t, Collective) and t.group not in out:
                out[t.group] = (len(groups.schedule_of(t, g).chains), len(groups.axis_groups[t.group]))
    return out


def test_a_symmetric_layout_runs_one_copy_per_orbit():
    """On one switch of identical machines the copies of a stage's tp, pipeline and cp calls fall in at most two
    kinds (GPU positions whose routes to their NICs differ): each union runs as at most two chains, where it had
    one per copy (8 tp groups, 32 pipeline pairs a boundary)."""
    unions = _unions(_scenario({"cluster.nodes.0.count": 8, "training.parallelism.dp": 4}))
    single = {name: chains for name, (chains, copies) in unions.items() if copies > 1}
    assert single and all(chains <= 2 for chains in single.values()), single


def test_copies_on_different_machines_stay_apart():
    """With every other node on slower NICs, a pipeline pair between two fast nodes and one between two slow
    nodes are not interchangeable: each boundary keeps twice the chains it runs when all nodes are alike."""
    alike = _unions(_scenario({}))
    mixed = _unions(_scenario(CASES["two node kinds"]))
    pp = [name for name in alike if name.startswith("pp")]
    assert pp and all(mixed[name][0] == 2 * alike[name][0] for name in pp), (alike, mixed)
