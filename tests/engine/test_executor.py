"""The executor on hand-made graphs with hand-set collective times: dependencies, streams, group
collectives across classes, interrupts, the closed-form fold, steady-state inference."""
from __future__ import annotations

import pytest
import simpy

from simdist.collectives.schedule import Group
from simdist.engine.closed_form import fold
from simdist.engine.executor import Executor
from simdist.graph.builder import GraphBuilder
from simdist.graph.tasks import Collective, Compute, ProcessGroup, RankClass, Stream
from tests.engine.fakes import FixedNetwork, task_as_schedule

DP = {"dp": ProcessGroup("dp", "dp", (0, 1, 2), Group((0, 1, 2), ((0, 1, 2),)))}


def _iteration(rc: RankClass, fwd: float, bwd: float, opt: float, sizes=(1e9, 2e9)):
    """forward; backward in two halves, a bucket after each half; optimizer after the last bucket."""
    b = GraphBuilder()
    f = b.add(Compute, "forward", (), Stream.COMPUTE, duration_s=fwd)
    h1 = b.add(Compute, "backward 1", (f,), Stream.COMPUTE, duration_s=bwd / 2, kind="backward")
    c1 = b.add(Collective, "bucket0", (h1,), Stream.COMM, size_bytes=sizes[0], key="b0")
    h2 = b.add(Compute, "backward 2", (h1,), Stream.COMPUTE, duration_s=bwd / 2, kind="backward")
    c2 = b.add(Collective, "bucket1", (h2,), Stream.COMM, size_bytes=sizes[1], key="b1")
    b.add(Compute, "optimizer", (h2, c2, c1), Stream.COMPUTE, duration_s=opt, kind="optimizer")
    return b.build(rc)


def _run(graphs, iterations=1, **kw):
    env = simpy.Environment()
    ex = Executor(env, FixedNetwork(), task_as_schedule, DP, **kw)
    return ex, ex.run(graphs, iterations)


def test_one_class_hand_computed():
    # fwd 1; bucket0 at 1.5 for 1 s (to 2.5); backward ends at 2; bucket1 waits for the stream: 2.5 .. 4.5; opt 0.25
    _, log = _run([_iteration(RankClass(0, (0, 1, 2), 0, "g", 1), 1.0, 1.0, 0.25)])
    assert log.times == [pytest.approx(4.75)]
    assert log.class_comm_busy_s[0] == [pytest.approx(3.0)]
    assert log.class_compute_busy_s[0] == [pytest.approx(2.25)]


def test_a_group_collective_waits_for_the_slowest_class():
    fast = _iteration(RankClass(0, (0, 1), 0, "g", 1), 1.0, 1.0, 0.25)
    slow = _iteration(RankClass(1, (2,), 0, "g", 1, 2.0), 2.0, 2.0, 0.5)
    ex, log = _run([fast, slow])
    # slow: bucket0 ready at 3 -> 4; bucket1 ready at 4 -> 6; its optimizer 6 .. 6.5
    assert log.times == [pytest.approx(6.5)]
    assert log.class_end_s[0] == [pytest.approx(6.25)] and log.class_end_s[1] == [pytest.approx(6.5)]
    assert [name for _, name in ex.network.runs] == ["bucket0", "bucket1"]  # once per group, not per class
    folded = fold([fast, slow], lambda t, g: FixedNetwork().schedule_time(t), DP)
    assert folded.end_s == pytest.approx(6.5) and folded.class_end_s[0] == pytest.approx(6.25)


def test_fold_equals_the_executor_without_contention():
    graphs = [_iteration(RankClass(0, (0,), 0, "g", 1), 0.7, 1.3, 0.1, sizes=(3e8, 5e8)),
              _iteration(RankClass(1, (1, 2), 0, "g", 1), 0.9, 0.8, 0.2, sizes=(3e8, 5e8))]
    _, log = _run(graphs)
    folded = fold(graphs, lambda t, g: FixedNetwork().schedule_time(t), DP)
    assert folded.end_s == pytest.approx(log.times[0], rel=1e-12)
    for c in (0, 1):
        assert folded.class_comm_busy_s[c] == pytest.approx(log.class_comm_busy_s[c][0], rel=1e-12)


def test_identical_iterations_are_inferred_not_simulated():
    g = _iteration(RankClass(0, (0, 1, 2), 0, "g", 1), 1.0, 1.0, 0.25)
    ex, log = _run([g], iterations=10)
    assert log.simulated == 2 and log.inferred == 8 and len(log.times) == 10
    assert len(ex.network.runs) == 4  # two buckets x two simulated iterations
    env = simpy.Environment()
    log = Executor(env, FixedNetwork(), task_as_schedule, DP).run([g], None, duration_s=20.0)
    assert log.simulated + log.inferred == 5 and sum(log.times) == pytest.approx(23.75)  # 5 x 4.75 >= 20


def test_records_name_tasks_and_track_each_class_representative():
    fast = _iteration(RankClass(0, tuple(range(100)), 0, "g", 1), 1.0, 1.0, 0.25)
    slow = _iteration(RankClass(1, (100,), 0, "g", 1, 2.0), 2.0, 2.0, 0.5)
    dp = {"dp": ProcessGroup("dp", "dp", tuple(range(101)), Group(tuple(range(101)), (tuple(range(101)),)))}
    env = simpy.Environment()
    log = Executor(env, FixedNetwork(), task_as_schedule, dp).run([fast, slow], 1)
    tracks = {r.track for r in log.records}
    assert {f"gpu:{i}" for i in range(64)} | {"gpu:100", "comm:100"} <= tracks
    assert "gpu:64" not in tracks
    assert {r.name for r in log.records if r.track == "comm:100"} == {"bucket0", "bucket1"}
