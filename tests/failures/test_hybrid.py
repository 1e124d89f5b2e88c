"""training.sync hybrid (asp, then bsp from training.hybrid_switch) and training.batch_split dynamic in a
steady run: the phases' own runs combined by their iteration counts."""
from __future__ import annotations

import copy

import pytest

from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.load import load_data
from simdist.io.overrides import set_path
from simdist.strategies.plan import rank_batches

BASE = {
    "name": "hybrid",
    "cluster": {"nodes": [{"count": 2, "gpu": "v100-sxm2-32gb", "gpus_per_node": 2, "intra_node": "pcie-gen3",
                           "nic": {"bandwidth": "25 Gb/s", "latency": "5 us", "transport": "rdma"}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": "resnet50", "batch_per_gpu": 32, "precision": "fp16"},
    # one server, every GPU pushing (hybrid runs gpu aggregation: asp workers are single GPUs), where the
    # straggler holds bsp back more than asp
    "communication": {"strategy": "ps", "ps": {"servers": 1, "aggregation": "gpu"}},
    "failures": {"events": [{"at": "0 s", "kind": "straggler", "target": "gpu:1", "slowdown": 2.0}]},
    "run": {"iterations": 40, "warmup": 2, "fidelity": "estimate"},
}


def _load(changes: dict):
    data = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        set_path(data, dotted.split("."), value)
    return load_data(data)


def _run(changes: dict, fidelity: str = ""):
    return simulate(_load(changes), fidelity)


@pytest.mark.parametrize("fidelity", ["estimate", "simulate"])
@pytest.mark.parametrize("switch, s", [(10, 10), ("25%", 10), ("30%", 12)])
def test_hybrid_switches_from_asp_to_bsp_at_the_given_iteration(fidelity, switch, s):
    asp = _run({"training.sync": "asp"}, fidelity)
    bsp = _run({"training.sync": "bsp"}, fidelity)
    r = _run({"training.sync": "hybrid", "training.hybrid_switch": switch}, fidelity)
    ta, tb, n = asp.iteration_time_s, bsp.iteration_time_s, 40
    assert ta < tb  # the straggler holds bsp back, not asp
    total = s * ta + (n - s) * tb
    assert r.iteration_time_s == pytest.approx(total / n, rel=1e-12)
    assert r.throughput.samples_per_s == pytest.approx(n * 4 * 32 / total, rel=1e-12)
    h = r.sync.hybrid
    assert r.sync.mode == "hybrid" and h.switch_iteration == s and r.phases == h
    assert [(p.sync, p.first_iteration, p.iterations) for p in h.phases] == [("asp", 0, s), ("bsp", s, n - s)]
    assert h.phases[0].iteration_time_s == pytest.approx(ta) and h.time_s == pytest.approx(total)
    assert r.iterations == (ta,) * s + (tb,) * (n - s)


def test_hybrid_keys_are_checked():
    with pytest.raises(ScenarioError, match="training.hybrid_switch"):
        _load({"training.sync": "hybrid"})
    with pytest.raises(ScenarioError, match="training.hybrid_switch"):
        _load({"training.hybrid_switch": 10})  # without sync hybrid
    with pytest.raises(ScenarioError, match="training.hybrid_switch"):
        _load({"training.sync": "hybrid", "training.hybrid_switch": 40})  # never synchronises
    with pytest.raises(ScenarioError, match="training.hybrid_switch"):
        _load({"training.sync": "hybrid", "training.hybrid_switch": "100%"})
    with pytest.raises(ScenarioError, match="training.sync"):
        _run({"training.sync": "hybrid", "training.hybrid_switch": 10, "communication.strategy": "ring"})
    with pytest.raises(ScenarioError, match="training.sync"):  # a failure run over run.duration
        _run({"training.sync": "hybrid", "training.hybrid_switch": 10, "run": {"duration": "1 d"},
              "failures.events": [{"at": "2 h", "kind": "node_down", "target": "node:1"}]})
    with pytest.raises(ScenarioError, match="training.rebalance_every"):
        _load({"training.rebalance_every": 5})
    with pytest.raises(ScenarioError, match="training.batch_split"):  # a steady run over run.duration
        _run({"training.batch_split": "dynamic", "failures": None, "run": {"duration": "10 s", "fidelity": "estimate"}})


def test_dynamic_split_rebalances_after_k_iterations():
    eq = _run({"communication.strategy": "ring"})
    dyn = _run({"communication.strategy": "ring", "training.batch_split": "dynamic", "training.rebalance_every": 10})
    balanced = _load({"communication.strategy": "ring", "training.batch_split": "dynamic"})
    # the straggler (2x slower) gets about half the work: 128 samples over speeds 1, 1/2, 1, 1 -> 37, 18, 37, 36
    batches = rank_batches(balanced)
    assert sum(batches) == 128 and batches[1] < 32 < min(batches[0], batches[2], batches[3])
    phases = dyn.phases.phases
    assert [(p.batch_split, p.iterations) for p in phases] == [("proportional", 10), ("dynamic", 30)]
    t_eq, t_bal = phases[0].iteration_time_s, phases[1].iteration_time_s
    assert t_eq == pytest.approx(eq.iteration_time_s, rel=1e-12) and t_bal < t_eq
    assert dyn.iteration_time_s == pytest.approx((10 * t_eq + 30 * t_bal) / 40, rel=1e-12)


def test_the_text_report_prints_the_phases(tmp_path):
    import yaml
    from click.testing import CliRunner

    from simdist.cli import main

    data = copy.deepcopy(BASE)
    data["training"] = {"sync": "hybrid", "hybrid_switch": "30%", "batch_split": "dynamic", "rebalance_every": 5}
    path = tmp_path / "h.yaml"
    path.write_text(yaml.safe_dump(data))
    res = CliRunner().invoke(main, ["run", str(path)])
    assert res.exit_code == 0, res.output
    assert "== phases (bsp from iteration 12 (30% of the run asynchronous); re-split every 5 iterations) ==" in res.output
    assert "12-39       bsp   dynamic" in res.output
