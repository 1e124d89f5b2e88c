"""The layout search's arrays equal the run's own functions on every candidate of a small space: validity (the
loader), memory per GPU and whether it fits (rank_memory.check_memory), the pipeline bound with its blocking tp calls
(bound.pipeline_bound_s on build_mp_plan and bound.tp_floor) and that it never exceeds the estimate; and the pruned
plan's top 10 is the exhaustive one's."""
from __future__ import annotations

import math

import numpy as np
import pytest

from simdist.engine.simulation import simulate
from simdist.errors import InfeasibleError, ScenarioError
from simdist.io.sweep_load import load_point
from simdist.planner import plan as planner_plan
from simdist.planner.axes import Axis, factors
from simdist.planner.bound import layout_tp_floors, pipeline_bound_s, tp_floor
from simdist.planner.layout_costs import layout_costs
from simdist.planner.layout_space import build_grid, reference_scenario, step_indices
from simdist.planner.objective import PlanSpec
from simdist.strategies.mp_plan import build_mp_plan
from simdist.strategies.rank_memory import check_memory

BASE = {
    "name": "gpt3-1.3b-layouts",
    "cluster": {"nodes": [{"count": 1, "gpu": "a100-sxm4-40gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                           "nic": {"bandwidth": "200 Gb/s", "latency": "2 us", "count": 8, "transport": "rdma"}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": "gpt3-1.3b", "seq_len": 2048, "global_batch": 32, "precision": "bf16"},
    "training": {"parallelism": {"tp": 2, "pp": 2}, "optimizer": "adam"},
    "communication": {"strategy": "ring"},
    "run": {"iterations": 2, "warmup": 0, "fidelity": "estimate"},
}
AXES = (Axis("training.parallelism.tp", (1, 2, 4, 8)), Axis("training.parallelism.pp", (1, 2, 4, 8)),
        Axis("training.parallelism.zero", (0, 1, 3)), Axis("training.micro_batch", (1, 2, 8)),
        Axis("training.recompute", ("none", "selective", "full")), Axis("training.sequence_parallel", (False, True)))
INTERLEAVED = (Axis("training.parallelism.tp", (2, 4)), Axis("training.parallelism.pp", (2, 4)),
               Axis("training.schedule", ("1f1b", "interleaved", "gpipe")), Axis("training.virtual_stages", (1, 2, 3)),
               Axis("training.micro_batch", (1, 4)), Axis("training.parallelism.zero", (0, 2)),
               Axis("workload.precision", ("bf16", "fp8")))

MOE = {**BASE, "name": "mixtral-layouts",
       "cluster": {"nodes": [{"count": 2, "gpu": "h100-sxm5-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-h100",
                              "nic": {"bandwidth": "400 Gb/s", "latency": "2 us", "count": 8, "transport": "rdma"}}],
                   "fabric": {"topology": "single_switch"}},
       "workload": {"model": "mixtral-8x7b", "seq_len": 4096, "global_batch": 32, "precision": "bf16",
                    "flash_attention": True},
       "training": {"parallelism": {"tp": 2, "pp": 2}, "sequence_parallel": True, "optimizer": "adam"}}
CP_EP = (Axis("training.parallelism.tp", (1, 2)), Axis("training.parallelism.pp", (1, 2)),
         Axis("training.parallelism.cp", (1, 2, 4)), Axis("training.parallelism.ep", (1, 2, 8)),
         Axis("training.parallelism.zero", (0, 2)), Axis("training.sequence_parallel", (False, True)),
         Axis("workload.precision", ("bf16", "fp8")))

FLASH = {**BASE, "workload": {**BASE["workload"], "flash_attention": True, "seq_len": 16384}}
CP = (Axis("training.parallelism.tp", (1, 2, 4)), Axis("training.parallelism.pp", (1, 2)),
      Axis("training.parallelism.cp", (1, 2, 4)), Axis("training.parallelism.zero", (0, 1, 3)),
      Axis("training.recompute", ("none", "selective", "full")), Axis("training.micro_batch", (1, 4)))

MODULES = {**BASE, "workload": {**BASE["workload"], "global_batch": 256},
           "training": {**BASE["training"], "recompute_modules": ["core_attn", "layernorm", "mlp"]}}
MODULE_AXES = (Axis("training.parallelism.tp", (1, 2, 4, 8)), Axis("training.parallelism.pp", (1, 2, 4, 8)),
               Axis("training.micro_batch", (1, 8, 32)), Axis("training.recompute", ("none", "selective")))


def _arrays(axes, base=BASE):
    fs = factors(axes)
    ref = reference_scenario(base, (), fs, load_point, ".", "t")
    grid = build_grid(fs, ref, base, ())
    reasons = load_point.invalid_layouts(grid)
    return fs, grid, reasons, layout_costs(grid, reasons == "", layout_tp_floors(ref))


@pytest.mark.parametrize("axes, base", [(AXES, BASE), (INTERLEAVED, BASE), (CP, FLASH), (CP_EP, MOE),
                                        (MODULE_AXES, MODULES)],
                         ids=["tp-pp-zero-mb-recompute-sp", "schedules-vp-fp8", "cp", "moe-cp-ep-fp8",
                              "recompute-modules"])
def test_layout_arrays_equal_the_scalar_functions(axes, base):
    """Validity on every candidate; memory, fit and bound on every candidate the arrays cover (a mixture of
    experts and ep are checked one by one by the plan, so only their validity comes from arrays)."""
    fs, grid, reasons, costs = _arrays(axes, base)
    steps = step_indices(fs, grid.n)
    checked = 0
    for i in range(grid.n):
        values = {k: v for f, s in zip(fs, steps) for k, v in f.items(int(s[i]))}
        try:
            scenario = load_point(base, (), values, ".", "t")
        except ScenarioError:
            assert reasons[i] != "", f"{values}: the loader refuses it, the arrays do not"
            continue
        assert reasons[i] == "", f"{values}: the arrays refuse it ({reasons[i]}), the loader does not"
        if not costs.covered[i]:
            continue
        try:
            usage = check_memory(scenario)
            fits = True
        except InfeasibleError:
            fits = False
        assert fits == bool(costs.fits[i]), values
        if fits:
            assert math.isclose(usage.per_gpu_bytes, costs.memory_bytes[i], rel_tol=1e-12), values
        mp = build_mp_plan(scenario)
        assert math.isclose(pipeline_bound_s(mp, tp_floor(scenario)), costs.bound_s[i], rel_tol=1e-12), values
        checked += 1
    if base is MOE:
        assert checked == 0 and 20 < (reasons == "").sum() < grid.n
    else:
        assert checked > 20 and (~costs.fits[costs.covered]).any() and costs.fits[costs.covered].any()


@pytest.mark.parametrize("axes, base, every", [(AXES, BASE, 3), (CP, FLASH, 5)], ids=["tp-pp", "cp"])
def test_pipeline_bound_never_exceeds_the_estimate(axes, base, every):
    fs, grid, reasons, costs = _arrays(axes, base)
    steps = step_indices(fs, grid.n)
    idx = np.flatnonzero(costs.covered & costs.fits)
    compute_only = layout_costs(grid, reasons == "").bound_s[idx]  # the blocking tp calls add to every tp > 1
    split = grid["tp"][idx] > 1
    assert (costs.bound_s[idx][split] > compute_only[split]).all() and split.any()
    assert (costs.bound_s[idx][~split] == compute_only[~split]).all()
    for i in idx[::every]:
        values = {k: v for f, s in zip(fs, steps) for k, v in f.items(int(s[i]))}
        result = simulate(load_point(base, (), values, ".", "t"), fidelity="estimate", baseline=False)
        assert result.iteration_time_s >= costs.bound_s[i] * (1 - 1e-12), values


def test_pruned_plan_top_10_equals_the_exhaustive_estimate():
    spec = PlanSpec(axes=AXES, top=10, confirm=0)
    pruned = planner_plan.search(spec, BASE, load_point, jobs=1)
    full = planner_plan.search(PlanSpec(axes=AXES, top=10, confirm=0, prune=False), BASE, load_point, jobs=1)
    assert "over layouts" in pruned.search and "over layouts" not in full.search
    assert [r["point"] for r in pruned.ranked] == [r["point"] for r in full.ranked]
    assert [r["iteration_time_s"] for r in pruned.ranked] == [r["iteration_time_s"] for r in full.ranked]
    assert pruned.evaluated < full.evaluated
    by_point = {c["point"]: c for c in full.candidates}
    for c in pruned.candidates:  # every candidate's status is the exhaustive plan's, or pruned by the bound
        other = by_point[c["point"]]
        if c["pruned_by"] == "compute bound":
            assert other["status"] in ("ranked", "pruned") and (other["rank"] or 0) > 10
        else:
            assert (c["status"], c["pruned_by"]) == (other["status"], other["pruned_by"]), c["point"]


def test_a_null_dp_on_an_axis_is_derived_from_the_gpus():
    axes = (Axis("training.parallelism.tp", (1, 2, 3, 4)), Axis("training.parallelism.pp", (1, 2)),
            Axis("training.parallelism.dp", (None, 2, 4)))
    fs, grid, reasons, _ = _arrays(axes)
    steps = step_indices(fs, grid.n)
    for i in range(grid.n):
        values = {k: v for f, s in zip(fs, steps) for k, v in f.items(int(s[i]))}
        try:
            load_point(BASE, (), values, ".", "t")
            loads = True
        except ScenarioError:
            loads = False
        assert loads == (reasons[i] == ""), (values, reasons[i])
    assert 0 < (reasons == "").sum() < grid.n


CROSSING = {**BASE, "name": "tp-across-nodes",
            "cluster": {"nodes": [{"count": 4, "gpu": "a100-sxm4-40gb", "gpus_per_node": 8,
                                   "intra_node": "nvswitch-a100", "nic": {"bandwidth": "100 Gb/s", "latency": "2 us",
                                                                          "count": 2, "transport": "rdma"}}],
                        "fabric": {"topology": "fat_tree", "nodes_per_leaf": 2, "oversubscription": 4.0}},
            "training": {**BASE["training"], "placement_order": "dp,tp,pp"}}
CROSSING_AXES = (Axis("training.parallelism.tp", (2, 4, 8)), Axis("training.parallelism.pp", (1, 2, 4)),
                 Axis("training.micro_batch", (1, 4)), Axis("training.sequence_parallel", (False, True)))


def test_the_tp_floor_holds_where_tp_groups_cross_nodes_on_an_oversubscribed_fat_tree():
    """dp innermost puts every tp group across machines, four GPUs to a NIC and the stage's groups sharing the
    leaves' thin uplinks: the floor (one group alone) stays under the estimate, which charges their union, and
    the arrays still equal pipeline_bound_s with it."""
    fs, grid, reasons, costs = _arrays(CROSSING_AXES, CROSSING)
    steps = step_indices(fs, grid.n)
    idx = np.flatnonzero(costs.covered & costs.fits)
    assert idx.size > 10
    for i in idx:
        values = {k: v for f, s in zip(fs, steps) for k, v in f.items(int(s[i]))}
        scenario = load_point(CROSSING, (), values, ".", "t")
        assert math.isclose(pipeline_bound_s(build_mp_plan(scenario), tp_floor(scenario)), costs.bound_s[i],
                            rel_tol=1e-12), values
        result = simulate(scenario, fidelity="estimate", baseline=False)
        assert result.iteration_time_s >= costs.bound_s[i] * (1 - 1e-12), values
