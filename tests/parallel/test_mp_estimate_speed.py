"""estimate of a model-parallel layout folds each stage's tp chain once per chunk and direction (not once per
micro-batch), and gives the same results as folding every chain anew: the shipped model-parallel presets
equal their goldens (1e-9), and layouts with interleaving, sequence parallelism and ZeRO are unchanged."""
from __future__ import annotations

import json

import pytest

from simdist.engine.simulation import simulate
from simdist.io.load import load_scenario
from simdist.strategies import pipeline_graph
from simdist.strategies.interference import runs_beside_compute
from simdist.strategies.mp_plan import build_mp_plan
from tests.golden.regenerate import compute, golden_path, shipped_scenarios
from tests.golden.test_goldens import _close

MODEL_PARALLEL = [p for p in shipped_scenarios()
                  if (lambda par: par.tp * par.pp > 1)(load_scenario(p).training.parallelism)]
PRESET = next(p for p in MODEL_PARALLEL if p.stem == "megatron-gpt3-175b")
SMALL = ["workload.model=gpt3-13b", "cluster.nodes.0.count=2", "training.parallelism.dp=1", "training.parallelism.tp=4",
         "training.parallelism.pp=4", "workload.global_batch=16"]
VARIANTS = {
    "1f1b": SMALL,
    "interleaved, sequence parallel": SMALL + ["training.schedule=interleaved", "training.virtual_stages=2",
                                               "training.sequence_parallel=true"],
    "zero 1, dp 2, overlapped buckets": ["workload.model=gpt3-13b", "cluster.nodes.0.count=4", "training.parallelism.dp=2",
                                         "training.parallelism.tp=4", "training.parallelism.pp=4",
                                         "workload.global_batch=16", "training.parallelism.zero=1",
                                         "communication.overlap=true", "communication.bucket_size=1 GB",
                                         "training.recompute=selective"],
}


def _counting_fold(monkeypatch) -> list:
    calls: list = []
    fold = pipeline_graph._Fuse._fold

    def counted(self, grp, segs):
        calls.append(grp)
        return fold(self, grp, segs)

    monkeypatch.setattr(pipeline_graph._Fuse, "_fold", counted)
    return calls


def _fold_every_chain(monkeypatch) -> None:
    """The behaviour before the memo: every chain of every micro-batch folds anew."""
    chain = pipeline_graph._Fuse.chain

    def anew(self, *args, **kwargs):
        self.folded.clear()
        self.plain.clear()
        return chain(self, *args, **kwargs)

    monkeypatch.setattr(pipeline_graph._Fuse, "chain", anew)


def test_the_megatron_preset_is_among_the_model_parallel_goldens():
    assert PRESET in MODEL_PARALLEL


@pytest.mark.parametrize("scenario", MODEL_PARALLEL, ids=lambda p: p.stem)
def test_model_parallel_presets_equal_their_goldens_folding_each_chain_once(scenario, monkeypatch):
    calls = _counting_fold(monkeypatch)
    diffs = _close(compute(scenario), json.loads(golden_path(scenario).read_text()))
    assert not diffs, "\n".join(diffs[:20])
    loaded = load_scenario(scenario)
    par = loaded.training
    chunks = par.virtual_stages if par.schedule.value == "interleaved" else 1
    # one per stage, chunk and direction at most, in each of the two shorter runs whose steady state the estimate
    # repeats (graph/periodic.py), with compute-communication interference too (the executor slows only the
    # compute between a fused chain's tp calls); none where tp_comm_overlap runs every tp call beside its GEMM
    fused = not par.tp_comm_overlap
    assert (0 < len(calls) if fused else not calls) and len(calls) <= 2 * par.parallelism.pp * chunks * 2


@pytest.mark.parametrize("name", list(VARIANTS))
def test_folding_once_equals_folding_every_chain(name, monkeypatch):
    scenario = load_scenario(PRESET, VARIANTS[name])
    once = simulate(scenario, "estimate").to_dict()
    _fold_every_chain(monkeypatch)
    calls = _counting_fold(monkeypatch)
    anew = simulate(load_scenario(PRESET, VARIANTS[name]), "estimate").to_dict()
    micro = scenario.workload.global_batch // scenario.training.parallelism.dp // scenario.training.micro_batch
    assert len(calls) >= micro * scenario.training.parallelism.pp  # the reference really folded per micro-batch
    once.pop("simdist_version", None), anew.pop("simdist_version", None)
    assert once == anew


INTERFERING = {
    "interleaved, zero 1, overlapped buckets": (PRESET, SMALL[:2] + [
        "cluster.nodes.0.count=4", "training.parallelism.dp=2", "training.parallelism.tp=4", "training.parallelism.pp=4",
        "workload.global_batch=32", "training.schedule=interleaved", "training.virtual_stages=2",
        "training.parallelism.zero=1", "communication.overlap=true", "communication.bucket_size=100 MB"]),
    "405B, tp 8 pp 8 cp 2 vp 8 (the preset)": (PRESET.parent / "llama31-405b-h100-cp.yaml", []),
}


@pytest.mark.parametrize("name", list(INTERFERING))
def test_fused_chains_under_interference_equal_the_unfused_graphs(name, monkeypatch):
    """With compute-communication interference the executor runs estimate's fused chains, slowing only the compute
    between their tp calls: every figure of the result equals the unfused graphs' (1e-9), and some fused task
    really was slowed (its calls ran later than at the full rate)."""
    from simdist.engine import executor
    path, sets = INTERFERING[name]
    scenario = load_scenario(path, sets)
    assert runs_beside_compute(scenario, build_mp_plan(scenario))
    stretched = []
    real_run = executor.Executor.run

    def spy(self, *args, **kwargs):
        log = real_run(self, *args, **kwargs)
        stretched.append(sum(len(v) for v in self.waits_ran.values()))
        return log

    monkeypatch.setattr(executor.Executor, "run", spy)
    fused = simulate(scenario, "estimate").to_dict()
    assert sum(stretched) > 0
    monkeypatch.setattr(pipeline_graph._Fuse, "fusable", lambda self, key, segs: False)
    unfused = simulate(load_scenario(path, sets), "estimate").to_dict()
    diffs = _close(fused, unfused)
    assert not diffs, "\n".join(diffs[:20])
