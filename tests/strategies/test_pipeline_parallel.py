"""Pipeline and tensor parallelism on the execution-graph engine: the bubble emerging from the event
simulation against its closed form and the list-scheduler oracle, tp's compute split and all_reduce volume,
tp across nodes, estimate = simulate without contention, determinism and refusals."""
from __future__ import annotations

import copy

import pytest
import simpy

from simdist.collectives.schedule import CollectiveOp, Group
from simdist.engine.closed_form import fold
from simdist.engine.executor import Executor
from simdist.errors import InfeasibleError, ScenarioError
from simdist.graph.tasks import Collective, ProcessGroup, RankClass
from simdist.layout import build_layout
from simdist.results.writers import result_json
from simdist.scenario import PipelineSchedule
from simdist.strategies.mp_plan import ChunkWork, MpPlan, Segment, StagePlan
from simdist.strategies.pipeline_graph import boundary_pairs, pipeline_graphs, pp_group
from simdist.strategies.pipeline_schedule import bubble_closed_form, schedule_order, time_orders
from tests.engine.fakes import FixedNetwork, task_as_schedule
from tests.strategies.scenario_runner import run_with

NIC = {"bandwidth": "200 Gb/s", "latency": "2 us", "transport": "rdma"}
GPT = {
    "name": "mp",
    "cluster": {"nodes": [{"count": 2, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                           "nic": {**NIC, "count": 8}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": {"gpt": {"layers": 8, "hidden": 2048, "heads": 16, "vocab": 32000}}, "seq_len": 1024,
                 "global_batch": 16, "precision": "fp16"},
    "training": {"parallelism": {"tp": 8, "pp": 2}, "micro_batch": 1},
    "run": {"iterations": 3, "warmup": 1, "fidelity": "estimate"},
}


def uniform_plan(p: int, m: int, v: int, schedule: PipelineSchedule, fwd_s: float, bwd_s: float,
                 p2p_bytes: float) -> MpPlan:
    """p stages of v chunks, each chunk fwd_s / v forward and bwd_s / v backward per micro-batch; dp = tp = 1."""
    layout = build_layout(list(range(p)), 1, 1, p)
    stages = []
    for s in range(p):
        chunks = tuple(ChunkWork(c * p + s, (c * p + s, c * p + s + 1), (Segment(fwd_s / v, "forward"),),
                                 (Segment(bwd_s / v, "backward", kind="backward"),), 0.0) for c in range(v))
        stages.append(StagePlan(RankClass(s, (s,), 0, "x", 1), chunks, 0.0, 0.0, ()))
    return MpPlan(layout, schedule, v, 1, m, schedule_order(schedule, p, m, v), tuple(stages), p2p_bytes, 0.0,
                  False, m, None, 1.0, 1.0)


def pp_groups(plan: MpPlan) -> dict:
    return {pp_group(a, b): ProcessGroup(pp_group(a, b), "pp", tuple(sorted({a, b})), Group((a, b), ((a,), (b,))))
            for a, b in boundary_pairs(plan)}


def simulated(plan: MpPlan, k: float = 1e-9) -> float:
    env = simpy.Environment()
    ex = Executor(env, FixedNetwork(k), task_as_schedule, pp_groups(plan), record=False)
    return ex.run(pipeline_graphs(plan, 1.0), 1).times[0]


CASES = [(PipelineSchedule.GPIPE, 4, 8, 1), (PipelineSchedule.ONE_F_ONE_B, 4, 8, 1),
         (PipelineSchedule.ONE_F_ONE_B, 8, 3, 1), (PipelineSchedule.INTERLEAVED, 4, 8, 2),
         (PipelineSchedule.INTERLEAVED, 4, 12, 3)]


@pytest.mark.parametrize("schedule,p,m,v", CASES)
def test_bubble_matches_closed_form_on_uniform_stages(schedule, p, m, v):
    plan = uniform_plan(p, m, v, schedule, 1.0, 2.0, 0.0)
    t = simulated(plan)
    bubble = 1.0 - m * 3.0 / t
    assert bubble == pytest.approx(bubble_closed_form(p, m, v), rel=1e-12)
    if schedule is not PipelineSchedule.INTERLEAVED:
        assert bubble == pytest.approx((p - 1) / (m + p - 1), rel=1e-12)


@pytest.mark.parametrize("schedule,p,m,v", CASES)
def test_event_simulation_equals_list_scheduler_with_transfer_time(schedule, p, m, v):
    plan = uniform_plan(p, m, v, schedule, 1.0, 2.0, 1e8)  # 0.1 s per transfer on the fixed network
    oracle = time_orders(plan.orders, 1.0 / v, 2.0 / v, p2p_s=0.1, virtual_stages=v)
    assert simulated(plan) == pytest.approx(oracle.makespan_s, rel=1e-12)
    graphs = pipeline_graphs(plan, 1.0)
    folded = fold(graphs, lambda t, g: 1e-9 * t.size_bytes, pp_groups(plan))
    assert folded.end_s == pytest.approx(oracle.makespan_s, rel=1e-12)


def _tp_tasks(result_plan_scenario):
    from simdist.strategies.mp_plan import build_mp_plan

    return build_mp_plan(result_plan_scenario)


def _scenario(changes: dict):
    from simdist.io.load import load_data
    from simdist.io.overrides import set_path

    data = copy.deepcopy(GPT)
    for dotted, value in changes.items():
        set_path(data, dotted.split("."), value)
    return load_data(data)


def test_tp2_halves_gemm_flops_and_adds_two_all_reduces_per_block_each_way():
    from simdist.strategies.mp_plan import build_mp_plan
    from simdist.strategies.pipeline_graph import pipeline_graphs as graphs_of
    from simdist.strategies.tensor_parallel import tensor_parallel_plan

    base = {"cluster.nodes.0.count": 1, "cluster.nodes.0.gpus_per_node": 2,
            "cluster.nodes.0.intra_node": {"link": "nvlink3"},
            "workload.global_batch": 4}
    one = _scenario({**base, "training.parallelism": {"tp": 1, "pp": 2}})
    two = _scenario({**base, "training.parallelism": {"tp": 2}})
    model = two.workload.model
    gpu = two.cluster.node_groups[0].gpu
    full = tensor_parallel_plan(model, gpu, 1, "fp16", 1)
    half = tensor_parallel_plan(model, gpu, 1, "fp16", 2)
    gemm = [i for i, x in enumerate(model.layers) if x.name.startswith("blocks.") and x.kind == "linear"]
    assert sum(half.layers[i].shard.fwd_flops for i in gemm) == pytest.approx(
        sum(full.layers[i].shard.fwd_flops for i in gemm) / 2)
    # the graph's tp all_reduces of one micro-batch: 2 forward and 2 backward per block of b x s x h fp16 elements
    plan = build_mp_plan(two)
    g = graphs_of(plan, two.communication.bucket_size_bytes)[0]
    blocks, bsh = 8, 1 * 1024 * 2048 * 2
    ars = [t for t in g.tasks if isinstance(t, Collective) and t.group == "tp.s0" and t.name.startswith("F0.")
           and t.op == CollectiveOp.ALL_REDUCE and "blocks." in t.name]
    assert len(ars) == 2 * blocks and all(t.size_bytes == bsh for t in ars)
    ars = [t for t in g.tasks if isinstance(t, Collective) and t.group == "tp.s0" and t.name.startswith("B0.")
           and t.op == CollectiveOp.ALL_REDUCE and "blocks." in t.name]
    assert len(ars) == 2 * blocks and all(t.size_bytes == bsh for t in ars)
    assert build_mp_plan(one).p2p_gather_bytes == 0.0  # tp = 1: no scatter/gather


def test_tp_across_a_node_boundary_is_much_slower_than_inside_an_nvswitch_node():
    inside = run_with(GPT, {"training.parallelism": {"tp": 8, "dp": 2}})
    across = run_with(GPT, {"training.parallelism": {"tp": 8, "dp": 2}, "training.placement_order": "dp,tp,pp"})
    assert across.parallelism.warnings
    a, b = inside.breakdown_s.tp_communication, across.breakdown_s.tp_communication
    assert b > 2.5 * a  # NIC rails (8 x 25 GB/s) against NVSwitch; the 4 MB all_reduces are partly latency-bound
    assert across.iteration_time_s > 1.15 * inside.iteration_time_s  # (1.17: blocks now pay their memory-bound kernels)


def test_estimate_equals_simulate_without_contention():
    one_gpu_nodes = {"cluster.nodes.0.count": 4, "cluster.nodes.0.gpus_per_node": 1,
                     "cluster.nodes.0.intra_node": None, "cluster.nodes.0.nic": {**NIC, "count": 1},
                     "training.parallelism": {"tp": 1, "pp": 4}, "workload.global_batch": 8}
    for extra in ({}, {"training.schedule": "gpipe"},
                  {"training.schedule": "interleaved", "training.virtual_stages": 2}):
        e = run_with(GPT, {**one_gpu_nodes, **extra}, "estimate")
        s = run_with(GPT, {**one_gpu_nodes, **extra}, "simulate")
        assert s.iteration_time_s == pytest.approx(e.iteration_time_s, rel=1e-6)
        assert s.breakdown_s.pipeline_bubble == pytest.approx(e.breakdown_s.pipeline_bubble, rel=1e-6)


def test_breakdown_names_bubble_tp_and_dp_and_mfu():
    r = run_with(GPT, {"training.parallelism": {"tp": 4, "pp": 2, "dp": 2}})
    d = r.to_dict()
    for key in ("pipeline_bubble", "tp_communication", "dp_communication"):
        assert d["breakdown_s"][key] > 0
    assert 0 < d["mfu"] < 1 and d["throughput"]["tokens_per_s"] > 0
    assert len(d["parallelism"]["stages"]) == 2


def test_same_seed_same_json():
    a = run_with(GPT, {"run.fidelity": "simulate", "run.seed": 3})
    b = run_with(GPT, {"run.fidelity": "simulate", "run.seed": 3})
    assert result_json(a) == result_json(b)
    tracks = {rec.track for rec in a.records}
    assert {"gpu:0", "gpu:8", "tp:0", "pp:0"} <= tracks  # every stage and group in the trace


def test_memory_that_does_not_fit_is_infeasible_with_the_numbers():
    big = {"workload.model": {"gpt": {"layers": 8, "hidden": 16384, "heads": 16, "vocab": 32000}},
           "workload.seq_len": 4096, "workload.global_batch": 64, "training.micro_batch": 8}
    with pytest.raises(InfeasibleError, match="pipeline stage"):
        run_with(GPT, big)


def test_zero_with_tp_and_no_dp_is_refused_by_name():
    """tp 8 x pp 2 on 16 GPUs leaves dp = 1: nothing to shard over (ZeRO with dp >= 2: test_mp_zero.py)."""
    with pytest.raises(ScenarioError, match="training.parallelism.zero"):
        run_with(GPT, {"training.parallelism": {"tp": 8, "pp": 2, "zero": 1}})


def test_a_reused_context_gives_the_same_estimate():
    from simdist.engine.context import build_context
    from simdist.engine.composite import run_training
    from simdist.scenario import Fidelity

    a = _scenario({"training.parallelism": {"tp": 4, "pp": 2, "dp": 2}})
    b = _scenario({"training.parallelism": {"tp": 4, "pp": 2, "dp": 2}, "training.schedule": "gpipe"})
    ctx = build_context(a, Fidelity.ESTIMATE)
    for s in (a, b, a):
        fresh = run_training(s, Fidelity.ESTIMATE)
        reused = run_training(s, Fidelity.ESTIMATE, context=ctx)
        assert reused.iteration_time_s == fresh.iteration_time_s
