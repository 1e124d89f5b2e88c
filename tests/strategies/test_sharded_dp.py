"""ZeRO / FSDP iterations on the execution-graph engine: wire volume on the flow network (stage 3 = 1.5 x
DDP, stages 1-2 = DDP), the one-ahead prefetch hiding gathers behind compute (and the gather-bound case by
the hand-computed amount), estimate = simulate without contention, gradient accumulation per stage, and
the refusals."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from simdist.collectives.schedule import CollectiveOp
from simdist.engine.executor import Executor
from simdist.engine.state import Simulation
from simdist.errors import ScenarioError
from simdist.graph.tasks import Collective
from simdist.io.load import load_data
from simdist.io.overrides import set_path
from simdist.scenario import Fidelity
from simdist.strategies.data_parallel import bsp_graphs
from simdist.strategies.plan import build_plan
from simdist.strategies.sharded_dp import build_sharded_plan, sharded_graphs
from tests.strategies.scenario_runner import run_with

N = 4  # one GPU per node, so every byte crosses a NIC
P = 4_000_000  # parameters per layer
LAYERS = [{"name": f"fc{i}", "kind": "linear", "params": P, "fwd_flops": 2.0e11, "input_elems": 2000,
           "output_elems": 2000, "saved_elems": 2000, "grad_shapes": [[2000, 2000]]} for i in range(4)]


def _base(nic: str = "100 Gb/s") -> dict:
    return {
        "name": "zero",
        "cluster": {"nodes": [{"count": N, "gpus_per_node": 1,
                               # no compute-communication interference: the hand-computed overlaps below
                               "gpu": {"base": "a100-sxm4-80gb", "comm_interference": 0}, "intra_node": "pcie-gen4",
                               "nic": {"bandwidth": nic, "latency": "1 ns", "transport": "rdma", "efficiency": 1.0}}],
                    "fabric": {"topology": "single_switch"}},
        "workload": {"model": {"layers": copy.deepcopy(LAYERS), "name": "mlp4"}, "batch_per_gpu": 8,
                     "precision": "fp16", "grad_dtype": "fp16"},
        "training": {"optimizer": "adam"},
        "communication": {"strategy": "ring"},
        "run": {"iterations": 3, "warmup": 1, "fidelity": "simulate"},
    }


def _scenario(zero: int, changes: dict | None = None, nic: str = "100 Gb/s"):
    data = _base(nic)
    data["training"]["parallelism"] = {"zero": zero}
    for dotted, value in (changes or {}).items():
        set_path(data, dotted.split("."), value)
    return load_data(data)


def _graphs(scenario):
    plan = build_plan(scenario)
    if scenario.training.parallelism.zero == 0:
        return plan, bsp_graphs(plan)
    sp = build_sharded_plan(scenario, plan)
    return sp.plan, sharded_graphs(sp)


def _link_bytes(scenario) -> float:
    """Bytes every link of the flow network carries in one iteration."""
    sim = Simulation(scenario, Fidelity.SIMULATE)
    _, graphs = _graphs(scenario)
    Executor(sim.env, sim.context.network, lambda t, g: sim.context.cached_schedule(t.op, t.size_bytes, t.server_delay_s), sim.context.process_groups()).run(
        graphs, 1)
    return float(np.sum(sim.context.network.link_bytes()))


def test_stage3_moves_one_and_a_half_times_ddps_bytes_on_the_flow_network() -> None:
    ddp = _link_bytes(_scenario(0))
    assert ddp > 0
    assert _link_bytes(_scenario(3)) / ddp == pytest.approx(1.5, rel=1e-9)


@pytest.mark.parametrize("zero", [1, 2])
def test_stages_1_and_2_move_ddps_bytes(zero: int) -> None:
    assert _link_bytes(_scenario(zero)) == pytest.approx(_link_bytes(_scenario(0)), rel=1e-9)


def _iteration(scenario, fidelity: str = "simulate"):
    from simdist.engine.simulation import simulate

    return simulate(scenario, fidelity).to_dict()


def test_prefetch_hides_the_gathers_on_a_fast_network() -> None:
    fast = "100 Gb/s"  # a gather (0.5 ms) is short beside a layer's forward (6.5 ms)
    z3, ddp = (_iteration(_scenario(z, nic=fast)) for z in (3, 0))
    plan, _ = _graphs(_scenario(3, nic=fast))
    cc = plan.classes[0]
    compute = cc.fwd_s + cc.bwd_s + cc.optimizer_s
    # hidden: every gather but the first and every reduce_scatter but the last (after the last backward);
    # each is a ring of N - 1 steps of 2P / N bytes at 100 Gb/s plus each step's hop latencies
    ctx = Simulation(_scenario(3, nic=fast), Fidelity.ESTIMATE).context
    ag, rs = (ctx.collective_time(op, 2 * P) for op in (CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER))
    assert ag == pytest.approx((N - 1) * 2 * P / N / (100e9 / 8), rel=0.03)
    assert z3["iteration_time_s"] == pytest.approx(compute + ag + rs, rel=1e-9)
    assert z3["breakdown_s"]["communication"] == pytest.approx(8 * ag + 4 * rs, rel=1e-9)
    # DDP here packs every gradient into one 25 MB bucket, ready only after the whole backward: its all_reduce
    # (2 x (N - 1) steps of 4 x 2P / N bytes) is exposed, so ZeRO-3 with prefetch is a little faster
    assert z3["iteration_time_s"] < ddp["iteration_time_s"] < 1.05 * z3["iteration_time_s"]
    assert z3["breakdown_s"]["dp_communication"] > 0 and "dp_communication" not in ddp["breakdown_s"]


def test_gather_bound_on_a_slow_network_by_the_hand_computed_amount() -> None:
    slow = "100 Mb/s"
    scenario = _scenario(3, nic=slow)
    plan, graphs = _graphs(scenario)
    cc = plan.classes[0]
    # every collective is longer than any layer's compute, so the comm stream never idles: the iteration is
    # 4 forward + 4 backward gathers and 4 reduce_scatters of 2P bytes, each a ring of N - 1 steps of 2P / N
    # bytes at 100 Mb/s, then the shard's optimizer step; the hops' latencies (a few us per step) are the rest
    step = 2 * P / N / (1e8 / 8)
    ring = (N - 1) * step
    assert ring > 10 * max(cc.fwd_s, cc.bwd_s)
    expected = 12 * ring + cc.optimizer_s
    got = _iteration(scenario)
    assert got["iteration_time_s"] == pytest.approx(expected, rel=1e-4)
    assert got["iteration_time_s"] > expected
    assert got["breakdown_s"]["dp_communication"] == pytest.approx(12 * ring, rel=1e-4)
    assert sum(isinstance(t, Collective) for t in graphs[0].tasks) == 12
    # and ZeRO-3 here costs 1.5 x DDP's communication (which is all exposed too)
    ddp = _iteration(_scenario(0, nic=slow))
    assert got["breakdown_s"]["communication"] / ddp["breakdown_s"]["communication"] == pytest.approx(1.5, rel=1e-3)


def test_without_overlap_every_gather_waits_and_compute_waits_for_it() -> None:
    fast = "100 Gb/s"
    on, off = (_iteration(_scenario(3, {"communication.overlap": o}, nic=fast)) for o in (True, False))
    plan, _ = _graphs(_scenario(3, nic=fast))
    cc = plan.classes[0]
    assert off["iteration_time_s"] == pytest.approx(cc.fwd_s + cc.bwd_s + cc.optimizer_s
                                                    + off["breakdown_s"]["communication"], rel=1e-6)
    assert on["iteration_time_s"] < off["iteration_time_s"]


GPT = {"workload.model": {"gpt": {"layers": 4, "hidden": 512, "heads": 8, "vocab": 8000}}, "workload.seq_len": 256}


@pytest.mark.parametrize("zero", [1, 2, 3])
@pytest.mark.parametrize("extra", [{}, {"training.grad_accumulation": 2, "training.recompute": "full"},
                                   {"communication.overlap": False}])
def test_estimate_equals_simulate_without_contention(zero: int, extra: dict) -> None:
    s = _scenario(zero, {**GPT, **extra})
    est, sim = _iteration(s, "estimate"), _iteration(s, "simulate")
    assert est["iteration_time_s"] == pytest.approx(sim["iteration_time_s"], rel=1e-6)
    assert est["breakdown_s"] == pytest.approx(sim["breakdown_s"], rel=1e-6)


def test_accumulation_reduces_once_at_stage_1_and_every_micro_batch_at_stages_2_and_3() -> None:
    wire = {z: _iteration(_scenario(z, {"training.grad_accumulation": 3}), "estimate")["sync"]["wire_bytes_per_iteration"]
            for z in (1, 2, 3)}
    grads, params = 4 * P * 2, 4 * P * 2  # reduce_scatter payload: the full gradient; all_gather: the shard
    assert wire[1] == pytest.approx(grads + params / N)
    assert wire[2] == pytest.approx(3 * grads + params / N)
    assert wire[3] == pytest.approx(3 * (grads + 2 * params / N))


def test_recompute_full_adds_a_forward_to_each_blocks_backward() -> None:
    plain, rc = (_graphs(_scenario(3, {**GPT, "training.recompute": r}))[0].classes[0] for r in ("none", "full"))
    from simdist.compute import layer_times
    from simdist.workload import get_model  # noqa: F401

    s = _scenario(3, GPT)
    times = layer_times(s.workload.model, s.cluster.node_groups[0].gpu, 8, "fp16")
    blocks = sum(t.fwd_s for t, x in zip(times, s.workload.model.layers) if x.name.startswith("blocks."))
    assert rc.bwd_s - plain.bwd_s == pytest.approx(blocks, rel=1e-12)
    assert rc.fwd_s == plain.fwd_s


def test_mixed_gpus_run_under_zero3() -> None:
    nodes = _base()["cluster"]["nodes"][0]
    mixed = [{**nodes, "count": 2}, {**nodes, "count": 2, "gpu": "h100-sxm5-80gb"}]
    s = _scenario(3, {"cluster.nodes": mixed})
    assert len(build_plan(s).classes) == 2
    assert _iteration(s, "estimate")["iteration_time_s"] == pytest.approx(_iteration(s)["iteration_time_s"], rel=1e-6)


@pytest.mark.parametrize("changes,key", [
    ({"communication.strategy": "ps"}, "communication.strategy"),
    ({"communication.strategy": "tree"}, "communication.strategy"),
    ({"communication.compression": {"method": "fp16"}}, "communication.compression.method"),
    ({"training.sync": "local_sgd"}, "training.sync"),
    ({"communication.fusion_cycle": "5 ms"}, "communication.fusion_cycle"),
    ({"communication.bucket_size": "4 MB"}, "communication.bucket_size"),
    ({"training.recompute": "full"}, "training.recompute"),  # the MLP has no transformer blocks
])
def test_refused_with_the_key(changes: dict, key: str) -> None:
    with pytest.raises(ScenarioError) as info:
        _iteration(_scenario(3, changes), "estimate")
    assert key in str(info.value)


def test_single_gpu_is_refused() -> None:
    with pytest.raises(ScenarioError, match="training.parallelism.zero"):
        run_with(_base(), {"cluster.nodes.0.count": 1, "training.parallelism": {"zero": 2}}, "estimate")


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_the_graphs_run_the_building_blocks_collectives(zero: int) -> None:
    from collections import Counter

    from simdist.strategies.sharding import fsdp_units, zero_collectives

    s = _scenario(zero, GPT)
    plan, graphs = _graphs(s)
    ran = Counter((t.op, t.size_bytes) for t in graphs[0].tasks if isinstance(t, Collective))
    block = zero_collectives(zero, fsdp_units(s.workload.model), N, 2, 2)
    if zero == 3:  # unit by unit, exactly the building block's list
        assert ran == Counter((c.op, c.size_bytes) for c in block)
    else:  # by bucket rather than by unit: the same ops and bytes in total
        for op in (CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_GATHER):
            assert sum(n * size for (o, size), n in ran.items() if o == op) == pytest.approx(
                sum(c.size_bytes for c in block if c.op == op))
