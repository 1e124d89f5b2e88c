"""estimate of a pipeline repeats a shorter run's steady state (graph/periodic.py) and gives what folding the whole
graphs gives (1e-9), on 1F1B and interleaved schedules with sequence parallelism, dp, ZeRO 1 with overlapped buckets,
ZeRO 2 and 3 (whose optimizer waits for every micro-batch's gradients, in effect for the last on their stream) and
uneven stages, with compute-communication interference too; where the graphs do not grow by a repeating block
(GPipe) it folds the whole graphs."""
from __future__ import annotations

import math

import pytest

from simdist.engine import closed_form
from simdist.engine.simulation import simulate
from simdist.graph import periodic
from simdist.io.load import load_scenario
from simdist.strategies.pipeline_schedule import steady_sizes
from tests.golden.regenerate import shipped_scenarios

PRESET = next(p for p in shipped_scenarios() if p.stem == "megatron-gpt3-175b")
SMALL = ["workload.model=gpt3-13b", "cluster.nodes.0.count=2", "training.parallelism.dp=1", "training.parallelism.tp=4",
         "training.parallelism.pp=4", "workload.global_batch=32"]
DP2 = ["workload.model=gpt3-13b", "cluster.nodes.0.count=4", "training.parallelism.dp=2", "training.parallelism.tp=4",
       "training.parallelism.pp=4", "workload.global_batch=64"]
REPEATS = {
    "1f1b": SMALL,
    "1f1b, pp 8, uneven stages": ["workload.model=gpt3-13b", "cluster.nodes.0.count=2", "training.parallelism.dp=1",
                                  "training.parallelism.tp=2", "training.parallelism.pp=8", "workload.global_batch=48"],
    "interleaved, sequence parallel": SMALL[:-1] + ["workload.global_batch=64", "training.schedule=interleaved",
                                                    "training.virtual_stages=2", "training.sequence_parallel=true"],
    "dp 2, overlapped buckets": DP2 + ["communication.overlap=true", "communication.bucket_size=1 GB"],
    "zero 1, dp 2, overlapped buckets": DP2 + ["training.parallelism.zero=1", "communication.overlap=true",
                                               "communication.bucket_size=1 GB", "training.recompute=selective"],
    # compute-communication interference: the executor runs the graphs on closed-form times
    "interleaved, dp 2, buckets beside the compute": DP2 + ["workload.global_batch=128", "training.schedule=interleaved",
                                                         "training.virtual_stages=2", "communication.overlap=true",
                                                         "communication.bucket_size=1 GB"],
    # a ring exchange of tp_comm_overlap runs beside the compute of the block before it: before the inserted
    # block, where nothing moves, that is no obstacle to the repeat
    "tp_comm_overlap, sequence parallel": SMALL + ["training.sequence_parallel=true", "training.tp_comm_overlap=true"],
    # the optimizer waits for every micro-batch's reduce_scatter: on one stream, in effect for the last
    "zero 2, dp 2": DP2 + ["training.parallelism.zero=2"],
    "zero 2, interleaved, selective recomputation": DP2 + ["training.parallelism.zero=2", "workload.global_batch=128",
                                                         "training.schedule=interleaved", "training.virtual_stages=2",
                                                         "training.recompute=selective"],
    "zero 3, dp 2": DP2 + ["training.parallelism.zero=3", "communication.bucket_size=25 MB"],
}
WHOLE = {
    "gpipe": SMALL + ["training.schedule=gpipe"],
}


def _estimate(overrides: list[str], monkeypatch, repeat: bool) -> tuple[dict, list]:
    """The estimate's result and whether each fold_repeated call found a repeat (`repeat=False`: the whole graphs)."""
    found: list = []
    real = periodic.fold_repeated

    def spy(*args):
        out = real(*args)
        found.append(out is not None)
        return out

    monkeypatch.setattr(closed_form.periodic, "fold_repeated", spy)
    if not repeat:
        monkeypatch.setattr(closed_form.pipeline_schedule, "steady_sizes", lambda *a: [])
    out = simulate(load_scenario(PRESET, overrides), "estimate").to_dict()
    monkeypatch.undo()
    out.pop("simdist_version", None)
    return out, found


def _diffs(a, b, path="") -> list[str]:
    if isinstance(a, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _diffs(a.get(k), b.get(k), f"{path}/{k}")]
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: {len(a)} != {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diffs(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, float):
        return [] if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15) else [f"{path}: {a!r} != {b!r}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


@pytest.mark.parametrize("name", list(REPEATS))
def test_a_repeated_steady_state_equals_folding_the_whole_graphs(name, monkeypatch):
    repeated, found = _estimate(REPEATS[name], monkeypatch, repeat=True)
    assert found == [True]  # the shorter run repeated: its steady state settled and nothing reaches further back
    whole, none = _estimate(REPEATS[name], monkeypatch, repeat=False)
    assert none == [False]
    diffs = _diffs(repeated, whole)
    assert not diffs, "\n".join(diffs[:20])
    assert repeated["breakdown_s"]["pipeline_bubble"] > 0  # a pipeline that the repeat had to get right


@pytest.mark.parametrize("name", list(WHOLE))
def test_graphs_that_do_not_repeat_a_block_are_folded_whole(name, monkeypatch):
    _, found = _estimate(WHOLE[name], monkeypatch, repeat=True)
    assert found in ([], [False])


def test_the_window_catches_a_steady_state_that_has_not_settled(monkeypatch):
    """A fold whose inserted block does not run exactly one period after the one before is not repeated."""
    scenario = load_scenario(PRESET, REPEATS["1f1b"])
    real = periodic.repeat_of
    seen = []

    def perturbed(graphs, blocks, spans, pre, slowdown=None):
        q, n = blocks[1]
        spans[1][q:q + n] += 1e-6  # the second stage's block 1 us late
        seen.append(real(graphs, blocks, spans, pre, slowdown))
        return seen[-1]

    monkeypatch.setattr(periodic, "repeat_of", perturbed)
    simulate(scenario, "estimate")
    assert seen and all(r == periodic.UNSETTLED for r in seen)


def test_steady_sizes_leave_a_block_to_repeat():
    assert steady_sizes("gpipe", 4, 64) == []
    assert steady_sizes("1f1b", 16, 192) == [(18, 19), (24, 25)]  # 15 warm-up forwards + 3 and 9 blocks
    assert steady_sizes("1f1b", 16, 37) == []  # a shorter run that repeats would cost more than the whole graphs
    assert steady_sizes("1f1b", 16, 38) == [(18, 19)]
    for short, long in steady_sizes("interleaved", 4, 64, 2):
        assert short % 4 == 0 and long - short == 4


def _insertion_by_definition(short, long, pb):
    """`insertion` as its docstring defines it: the largest q, at most the length of the common prefix and at
    least max(n, that length - n), at which every later task of `short` matches the one n further in `long`,
    trying every q over every task (quadratic)."""
    shapes = [periodic._shape(t) for t in short.tasks], [periodic._shape(t) for t in long.tasks]
    pa, n = periodic._prerequisites(short), len(long.tasks) - len(short.tasks)
    common = next((i for i in range(len(pa)) if (shapes[0][i], pa[i]) != (shapes[1][i], pb[i])), len(pa))

    def fits(q: int) -> bool:
        return all(shapes[0][i] == shapes[1][i + n] and pa[i] == tuple(y - n * (y >= q) for y in pb[i + n])
                   for i in range(q, len(pa)))

    return next(((q, n) for q in range(common, max(n, common - n) - 1, -1) if n > 0 and fits(q)), None)


@pytest.mark.parametrize("name", list(REPEATS) + list(WHOLE))
def test_the_one_pass_insertion_finds_what_trying_every_position_finds(name, monkeypatch):
    """On every stage graph these layouts build, and on each pair with a task's prerequisites perturbed (a block
    that no longer lines up), the one-pass alignment gives the quadratic definition's answer."""
    seen = []
    real = periodic.insertion

    def both(short, long, pb):
        got = real(short, long, pb)
        seen.append(got)
        assert got == _insertion_by_definition(short, long, pb)
        for y in (len(pb) - 1, len(pb) // 2, len(pb) - len(short.tasks)):  # one task waits on task 0 too
            bent = list(pb)
            bent[y] = tuple(sorted({0, *pb[y]}))
            assert real(short, long, bent) == _insertion_by_definition(short, long, bent)
        return got

    monkeypatch.setattr(periodic, "insertion", both)
    simulate(load_scenario(PRESET, (REPEATS | WHOLE)[name]), "estimate")
    assert name in WHOLE or any(x is not None for x in seen)
