"""Compute-communication interference: compute slows by 1 / (1 + s) while its class's collectives run,
the same in the executor (events) and the closed-form fold, against hand calculations."""
from __future__ import annotations

from pathlib import Path

import pytest
import simpy

from simdist import api
from simdist.collectives.schedule import CollectiveOp, Group
from simdist.compute import comm_slowdown
from simdist.engine.closed_form import fold
from tests.engine.hand_stretch import stretched_end
from simdist.engine.executor import Executor
from simdist.errors import ScenarioError
from simdist.graph.builder import GraphBuilder
from simdist.graph.tasks import Collective, Compute, ProcessGroup, RankClass, Stream
from simdist.io.catalog import gpus


class _TimedNetwork:
    """A network whose 'schedule' is its duration in seconds."""

    def run(self, env, schedule):
        yield env.timeout(schedule)


def _graph(rank_class, comm_s, bwd_s=(0.004, 0.010)):
    """Backward in two segments; the first one's bucket is all-reduced (comm_s) while the second runs."""
    b = GraphBuilder()
    s1 = b.add(Compute, "backward 1", (), Stream.COMPUTE, duration_s=bwd_s[0], kind="backward")
    s2 = b.add(Compute, "backward 2", (s1,), Stream.COMPUTE, duration_s=bwd_s[1], kind="backward")
    ar = b.add(Collective, "bucket0 all_reduce", (s1,), Stream.COMM, group="dp", op=CollectiveOp.ALL_REDUCE,
               size_bytes=1.0, key="b0")
    b.add(Compute, "optimizer", (s2, ar), Stream.COMPUTE, duration_s=0.001, kind="optimizer")
    return b.build(rank_class)


def _both(comm_s, slow):
    rcs = [RankClass(0, (0,), 0, "x", 1), RankClass(1, (1,), 0, "x", 1)]
    graphs = [_graph(rc, comm_s) for rc in rcs]
    groups = {"dp": ProcessGroup("dp", "dp", (0, 1), Group.flat((0, 1), 1))}
    slowdown = (lambda c, op: slow) if slow else None
    env = simpy.Environment()
    log = Executor(env, _TimedNetwork(), lambda t, g: comm_s, groups, slowdown=slowdown).run(graphs, 1,
                                                                                            steady_skip=False)
    folded = fold(graphs, lambda t, g: comm_s, groups, slowdown)
    return log.times[0], folded


@pytest.mark.parametrize("comm_s", [0.002, 0.006, 0.020])
def test_hand_calculation_and_fold_equal_executor(comm_s):
    s = 0.25
    # the all_reduce runs over [4 ms, 4 ms + comm]; backward 2 (10 ms of work) runs at 1/1.25 inside it
    overlap = min(comm_s, 0.010 * (1 + s))  # wall time the collective overlaps backward 2
    bwd2_end = 0.004 + overlap + (0.010 - overlap / (1 + s))
    expected = max(bwd2_end, 0.004 + comm_s) + 0.001
    t_sim, folded = _both(comm_s, s)
    assert t_sim == pytest.approx(expected, rel=1e-9)
    assert folded.end_s == pytest.approx(expected, rel=1e-9)
    t0, f0 = _both(comm_s, 0.0)
    assert t0 == pytest.approx(max(0.014, 0.004 + comm_s) + 0.001, rel=1e-12) == f0.end_s
    if 0.004 + comm_s < 0.014:  # compute-bound: the stretch shows; comm-bound: the collective hides it
        assert t_sim > t0
    else:
        assert t_sim == pytest.approx(t0, rel=1e-12)


def test_stretched_end_overlapping_intervals_take_the_largest():
    # [1, 3) at s = 1 and [2, 4) at s = 0.5: from 0, 3 s of work: 1 s full, 1 s at 1/2 (0.5),
    # 1 s at 1/2 ([2, 3): max is 1), then [3, 4) at 1/1.5 -> 0.6667 of work in 1 s... 0.5 left after 3 s + ...
    end = stretched_end(0.0, 3.0, [(1.0, 3.0, 1.0), (2.0, 4.0, 0.5)])
    # work done: [0,1) 1.0, [1,3) 1.0, [3,4) 0.6667 -> 2.6667 by t = 4; 0.3333 left at full rate
    assert end == pytest.approx(4.0 + (3.0 - 1.0 - 1.0 - 1 / 1.5), rel=1e-12)


def test_catalog_default_and_source():
    v100 = gpus()["v100-sxm2-16gb"]
    assert v100.interference("all_reduce") == pytest.approx(0.189)
    assert "18.9%" in v100.source and "2507.03114" in v100.source
    # every GPU carries the measured default; the TPU entries carry none (docs/catalog.md: not measured on TPUs)
    assert all(bool(g.comm_interference) == (g.vendor != "google") for g in gpus().values())


def test_off_when_no_gpu_has_it():
    from dataclasses import replace
    g = replace(gpus()["a100-sxm4-80gb"], comm_interference={})
    assert comm_slowdown([g], [RankClass(0, (0,), 0, g.key, 1)]) is None
    s = comm_slowdown([gpus()["a100-sxm4-80gb"]], [RankClass(0, (0,), 0, "a100-sxm4-80gb", 1)])
    assert s(0, "all_gather") == pytest.approx(0.189)


def _ddp(overrides=None):
    return api.load(str(Path(__file__).resolve().parents[2] / "scenarios" / "presets" / "pytorch-ddp.yaml"), overrides)


def test_ddp_preset_estimate_equals_simulate_and_interference_slows_it():
    base = {"cluster.nodes.0.gpu": {"base": "a100-sxm4-80gb", "comm_interference": 0.0}}
    loud = {"cluster.nodes.0.gpu": {"base": "a100-sxm4-80gb", "comm_interference": {"all_reduce": 0.4}}}
    quiet = [api.simulate(_ddp(base), fidelity=f).iteration_time_s for f in ("estimate", "simulate")]
    slow = [api.simulate(_ddp(loud), fidelity=f).iteration_time_s for f in ("estimate", "simulate")]
    assert quiet[0] == pytest.approx(quiet[1], rel=1e-6)
    assert slow[0] == pytest.approx(slow[1], rel=1e-6)
    assert slow[1] > quiet[1]


def test_bad_value_names_the_key():
    with pytest.raises(ScenarioError, match="comm_interference"):
        _ddp({"cluster.nodes.0.gpu": {"base": "a100-sxm4-80gb", "comm_interference": -1}})
    with pytest.raises(ScenarioError, match="comm_interference"):
        _ddp({"cluster.nodes.0.gpu": {"base": "a100-sxm4-80gb", "comm_interference": {"allreduce": 0.1}}})


def test_calibration_profile_replaces_the_catalog_figure(tmp_path):
    import json
    from simdist.io.calibration import apply_profile, load_profile

    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "simdist-calibration/1", "interference": [
        {"gpu": "a100-sxm4-80gb", "op": "all_reduce", "slowdown": 0.05, "fit": {"method": "probe"}},
        {"gpu": "a100-sxm4-80gb", "op": "all_reduce", "slowdown": 0.9}]}))
    profile = load_profile(path)
    sc = apply_profile(_ddp(), profile)
    gpu = sc.cluster.node_groups[0].gpu
    assert gpu.interference("all_reduce") == pytest.approx(0.05)  # first entry wins
    assert gpu.interference("all_gather") == pytest.approx(0.189)  # catalog default for the other ops
    assert profile.to_dict()["interference"][0]["slowdown"] == 0.05
    path.write_text(json.dumps({"interference": [{"gpu": "a100-sxm4-80gb", "op": "allreduce", "slowdown": 0.1}]}))
    with pytest.raises(ScenarioError, match=r"interference\[0\]\.op"):
        load_profile(path)


def _chain_graph(rank_class, fused: bool):
    """2 ms of compute, a 3 ms blocking tp call, 5 ms of compute (as estimate fuses it: one task whose wait is the
    call), beside a dp all_reduce from time 0; `fused=False`: the three tasks."""
    b = GraphBuilder()
    if fused:
        b.add(Compute, "fused", (), Stream.COMPUTE, duration_s=0.010, kind="forward", waits=((0.002, 0.005),))
    else:
        c1 = b.add(Compute, "c1", (), Stream.COMPUTE, duration_s=0.002, kind="forward")
        tp = b.add(Collective, "tp call", (c1,), Stream.TP, group="tp", op=CollectiveOp.ALL_GATHER, size_bytes=1.0,
                   key="t0")
        b.add(Compute, "c2", (tp,), Stream.COMPUTE, duration_s=0.005, kind="forward")
    b.add(Collective, "bucket0 all_reduce", (), Stream.COMM, group="dp", op=CollectiveOp.ALL_REDUCE, size_bytes=1.0,
          key="b0")
    return b.build(rank_class)


@pytest.mark.parametrize("fused", [True, False])
def test_a_fused_chain_slows_only_its_compute(fused):
    """s = 0.25, the all_reduce over [0, 6 ms]: the first 2 ms of compute end at 2.5 ms, the call's 3 ms at 5.5 ms
    whatever the all_reduce does, then 0.5 ms at 1 / 1.25 (0.4 ms of work) and 4.6 ms at the full rate: 10.6 ms,
    fused or not; the fused task records where its call ran."""
    rc = RankClass(0, (0,), 0, "x", 1)
    groups = {"dp": ProcessGroup("dp", "dp", (0,), Group.flat((0,), 1)),
              "tp": ProcessGroup("tp", "tp", (0,), Group.flat((0,), 1))}
    ex = Executor(simpy.Environment(), _TimedNetwork(), lambda t, g: 0.006 if t.group == "dp" else 0.003, groups,
                  slowdown=lambda c, op: 0.25)
    log = ex.run([_chain_graph(rc, fused)], 1, steady_skip=False)
    assert log.times[0] == pytest.approx(0.0106, rel=1e-9)
    if fused:
        ((got,),) = ex.waits_ran[0].values()
        assert got == pytest.approx((0.0025, 0.0055), rel=1e-9)
    else:
        assert ex.last_spans[0][1] == pytest.approx((0.0025, 0.0055), rel=1e-9)
