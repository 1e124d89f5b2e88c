"""estimate's fold with compute-communication interference (the executor on closed-form times: compute
re-timed when a collective of its class begins or ends) against hand calculations, and the executor on a
network whose schedules are durations, on graphs whose collectives take fixed times (no contention),
including an interleaved pipeline with tp collectives and overlapped dp buckets, where an iterated fold
stopped at 100 passes off the executor's figure."""
from __future__ import annotations

import pytest
import simpy

from simdist.collectives.schedule import CollectiveOp, Group
from simdist.engine.closed_form import fold
from tests.engine.hand_stretch import stretched_end
from simdist.engine.executor import Executor
from simdist.graph.builder import GraphBuilder
from simdist.graph.tasks import Collective, Compute, ProcessGroup, RankClass, Stream

S = 0.25  # slowdown of every collective in the hand cases: compute runs at 1 / 1.25 = 0.8 beside one


class _TimedNetwork:
    """A network whose 'schedule' is its duration in seconds."""

    def run(self, env, schedule):
        yield env.timeout(schedule)


def _executor_time(graphs, time_of, groups, slowdown) -> float:
    env = simpy.Environment()
    log = Executor(env, _TimedNetwork(), time_of, groups, slowdown=slowdown).run(graphs, 1, steady_skip=False)
    return log.times[0]


def _two_classes():
    """Class 0 computes A (1 s) then B (2 s); class 1 computes D (1.5 s). Their collective C (0.5 s) needs
    A and D, so it begins at 1.5 s, half a second into B: when B starts, nothing says C will run beside it."""
    graphs = []
    for rc in (RankClass(0, (0,), 0, "x", 1), RankClass(1, (1,), 0, "x", 1)):
        b = GraphBuilder()
        first = b.add(Compute, "A" if rc.index == 0 else "D", (), Stream.COMPUTE,
                      duration_s=1.0 if rc.index == 0 else 1.5, kind="backward")
        c = b.add(Collective, "C", (first,), Stream.COMM, group="dp", op=CollectiveOp.ALL_REDUCE, size_bytes=1.0,
                  key="c")
        if rc.index == 0:
            b.add(Compute, "B", (first,), Stream.COMPUTE, duration_s=2.0, kind="backward")
        else:
            b.add(Compute, "E", (c,), Stream.COMPUTE, duration_s=1.0, kind="optimizer")
        graphs.append(b.build(rc))
    groups = {"dp": ProcessGroup("dp", "dp", (0, 1), Group.flat((0, 1), 1))}
    return graphs, groups


def test_a_collective_that_begins_during_a_compute_stretches_it_from_then():
    graphs, groups = _two_classes()
    folded = fold(graphs, lambda t, g: 0.5, groups, lambda c, op: S)
    b_end = 1.5 + 0.5 + (2.0 - 0.5 - 0.5 / (1 + S))  # B: 0.5 s at full rate, 0.5 s at 0.8 (0.4 of work), 1.1 left
    assert folded.spans[0][2] == pytest.approx((1.0, b_end), rel=1e-12)
    assert folded.spans[1][1] == pytest.approx((1.5, 2.0), rel=1e-12)  # C, on both classes
    assert folded.spans[1][2] == pytest.approx((2.0, 3.0), rel=1e-12)  # E follows C: not stretched
    assert folded.end_s == pytest.approx(b_end, rel=1e-12)
    assert _executor_time(graphs, lambda t, g: 0.5, groups, lambda c, op: S) == pytest.approx(b_end, rel=1e-12)
    assert stretched_end(1.0, 2.0, [(1.5, 2.0, S)]) == pytest.approx(b_end, rel=1e-12)


def _chain(rank_class, n: int):
    """n compute steps, each followed by a blocking tp collective (the next step waits for it), while the
    first step's dp collective runs beside the later steps: every compute is re-timed, the tp collectives
    then start later, and one timing error would compound down the chain."""
    b = GraphBuilder()
    prev = b.add(Compute, "c0", (), Stream.COMPUTE, duration_s=1.0, kind="forward")
    b.add(Collective, "dp0", (prev,), Stream.COMM, group="dp", op=CollectiveOp.ALL_REDUCE, size_bytes=1.0,
          key="dp0")
    for i in range(1, n):
        tp = b.add(Collective, f"tp{i}", (prev,), Stream.TP, group="tp", op=CollectiveOp.ALL_GATHER,
                   size_bytes=1.0, key=f"tp{i}")
        prev = b.add(Compute, f"c{i}", (tp,), Stream.COMPUTE, duration_s=1.0, kind="forward")
    return b.build(rank_class)


def test_a_chain_of_blocking_collectives_beside_a_long_one_equals_the_executor():
    rc = RankClass(0, (0,), 0, "x", 1)
    graphs = [_chain(rc, 40)]
    groups = {"dp": ProcessGroup("dp", "dp", (0,), Group.flat((0,), 1)),
              "tp": ProcessGroup("tp", "tp", (0,), Group.flat((0,), 1))}
    times = {"dp": 20.0, "tp": 0.1}
    slow = {"all_reduce": 0.4, "all_gather": 0.1}
    time_of = lambda t, g: times[t.group]  # noqa: E731
    folded = fold(graphs, time_of, groups, lambda c, op: slow[op])
    # by hand: the dp call runs over [1, 21), and inside it compute runs at 1 / 1.4 (its 0.4 is the largest):
    # step i (tp call 0.1 s, then 1.4 s) ends at 1 + 1.5 i, for i <= 13; step 14 starts at 20.6, does 0.4 / 1.4
    # of its work by 21 and the rest at full rate; steps 15 to 39 take 0.1 + 1.0 each
    t = 21.0 + (1.0 - 0.4 / 1.4) + 25 * 1.1
    assert folded.end_s == pytest.approx(t, rel=1e-12)
    assert folded.end_s == pytest.approx(_executor_time(graphs, time_of, groups, lambda c, op: slow[op]), rel=1e-12)


def test_an_interleaved_pipeline_with_overlapped_buckets_equals_the_executor_in_one_pass():
    from simdist.strategies.interference import model_parallel_interference
    from simdist.engine.state import Simulation
    from simdist.io.load import load_data
    from simdist.scenario import Fidelity
    from simdist.strategies.mp_plan import build_mp_plan
    from simdist.strategies.pipeline_graph import pipeline_graphs

    scenario = load_data({
        "name": "interleaved-overlap",
        "cluster": {"nodes": [{"count": 4, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                               "nic": {"bandwidth": "200 Gb/s", "latency": "2 us", "transport": "rdma", "count": 8}}],
                    "fabric": {"topology": "single_switch"}},
        "workload": {"model": {"gpt": {"layers": 8, "hidden": 2048, "heads": 16, "vocab": 32000}}, "seq_len": 1024,
                     "global_batch": 128, "precision": "fp16"},
        "training": {"parallelism": {"tp": 8, "pp": 2, "dp": 2}, "micro_batch": 1, "schedule": "interleaved",
                     "virtual_stages": 2},
        "communication": {"overlap": True, "bucket_size": "64 MB"},
        "run": {"iterations": 1, "warmup": 0, "fidelity": "estimate"},
    })
    plan = build_mp_plan(scenario)
    slowdown = model_parallel_interference(scenario, plan)
    assert slowdown is not None
    fabric = Simulation(scenario, Fidelity.ESTIMATE).context.layout_groups(plan.layout, plan)
    graphs = pipeline_graphs(plan, scenario.communication.bucket_size_bytes)
    folded = fold(graphs, fabric.time_of, fabric.groups, slowdown)
    quiet = fold(graphs, fabric.time_of, fabric.groups, None)
    assert folded.end_s > quiet.end_s  # the buckets beside the other chunk's backward slow it
    assert folded.end_s == pytest.approx(_executor_time(graphs, fabric.time_of, fabric.groups, slowdown), rel=1e-12)
