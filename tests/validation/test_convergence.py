"""simdist.validation.convergence: deterministic iterations-to-target, the BSP baseline, codec and staleness effects."""
from __future__ import annotations

import itertools
import json
import math
import statistics

import pytest
import torch

from simdist.scenario import CompressionMethod, SyncMode
from simdist.validation import convergence as cv
from simdist.validation.convergence import CodecSetting, FactorRow, SyncSetting, TaskSpec

torch.set_num_threads(1)
TASK = TaskSpec(target_iters=40, max_iters=200)
N = 4
SEEDS = (0, 1, 2)
BSP = SyncSetting()


def _trace(codec: CodecSetting, sync: SyncSetting, seed: int = 0, n: int = 30) -> list[float]:
    return list(itertools.islice(cv.losses(TASK, codec, sync, N, seed), n))


def _iters(codec: CodecSetting, sync: SyncSetting) -> list[int]:
    out = []
    for s in SEEDS:
        it = cv.iterations_to_target(TASK, codec, sync, N, s, cv.reference_loss(TASK, N, s))
        out.append(TASK.max_iters + 1 if it is None else it)
    return out


def test_losses_are_deterministic_for_a_seed_and_differ_across_seeds() -> None:
    codec = CodecSetting(CompressionMethod.TOPK, ratio=0.05)
    sync = SyncSetting(SyncMode.SSP, staleness=2)
    assert _trace(codec, sync, 0) == _trace(codec, sync, 0)
    assert _trace(codec, sync, 0) != _trace(codec, sync, 1)


def test_training_learns_the_teacher() -> None:
    trace = _trace(CodecSetting(), BSP, n=TASK.target_iters)
    assert trace[0] < math.log(TASK.classes) * 1.2 and trace[-1] < 0.75 * trace[0]


def test_uncompressed_bsp_factor_is_exactly_one_and_fp16_is_about_one() -> None:
    rows = cv.measure([CodecSetting(), CodecSetting(CompressionMethod.FP16)], [BSP], N, SEEDS, TASK)
    assert rows[0].factors == (1.0,) * len(SEEDS) and rows[0].std == 0.0
    assert all(0.9 <= f <= 1.1 for f in rows[1].factors), rows[1]


def test_ssp_with_bound_zero_and_local_sgd_with_one_step_are_bsp() -> None:
    codec = CodecSetting(CompressionMethod.INT8)
    assert _trace(codec, SyncSetting(SyncMode.SSP, staleness=0)) == _trace(codec, BSP)
    bsp = _trace(CodecSetting(), BSP)  # uncompressed: averaging -lr g_w equals stepping by the mean gradient
    local = _trace(CodecSetting(), SyncSetting(SyncMode.LOCAL_SGD, local_steps=1))
    assert local == pytest.approx(bsp, rel=1e-5)


def test_aggressive_topk_needs_more_iterations_without_error_feedback() -> None:
    with_ef = _iters(CodecSetting(CompressionMethod.TOPK, ratio=0.01), BSP)
    without = _iters(CodecSetting(CompressionMethod.TOPK, ratio=0.01, error_feedback=False), BSP)
    assert statistics.fmean(without) > 1.5 * statistics.fmean(with_ef), (with_ef, without)


def test_more_staleness_never_needs_fewer_iterations_on_average() -> None:
    base = statistics.fmean(_iters(CodecSetting(), BSP))
    ssp2 = statistics.fmean(_iters(CodecSetting(), SyncSetting(SyncMode.SSP, staleness=2)))
    ssp8 = statistics.fmean(_iters(CodecSetting(), SyncSetting(SyncMode.SSP, staleness=8)))
    asp = statistics.fmean(_iters(CodecSetting(), SyncSetting(SyncMode.ASP)))
    assert base <= ssp2 <= ssp8 and base <= asp, (base, ssp2, ssp8, asp)


def test_unreached_target_is_infinite_factor_and_null_in_json() -> None:
    row = FactorRow("topk 0.01 no-EF", "bsp", (None, 50), (math.inf, 1.25))
    d = row.to_dict()
    assert d["factors"] == [None, 1.25] and d["mean"] is None and d["max"] is None and d["min"] == 1.25
    assert "n/r" in cv.format_table([row])


def test_table_and_cli_json(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    rows = [FactorRow("none", "bsp", (10, 12), (1.0, 1.0)), FactorRow("fp16", "bsp", (11, 12), (1.1, 1.0)),
            FactorRow("none", "asp", (12, 12), (1.2, 1.0))]
    table = cv.format_table(rows).splitlines()
    assert table[0].split() == ["codec", "bsp", "asp"] and table[1].split()[:3] == ["none", "1.00", "+-0.00"]
    assert table[2].split()[-1] == "-"  # fp16 x asp not measured
    monkeypatch.setattr(cv, "measure", lambda **kw: rows)
    out = tmp_path / "f.json"
    assert cv.main(["--workers", "2", "--seeds", "2", "--json", "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text()) and printed["workers"] == 2
    assert printed["rows"][1]["mean"] == pytest.approx(1.05)


def test_labels() -> None:
    assert CodecSetting(CompressionMethod.TOPK, ratio=0.01, error_feedback=False).label == "topk 0.01 no-EF"
    assert CodecSetting(CompressionMethod.POWERSGD, rank=4).label == "powersgd r4"
    assert CodecSetting(CompressionMethod.FP16, error_feedback=False).label == "fp16"
    assert SyncSetting(SyncMode.LOCAL_SGD, local_steps=8).label == "local_sgd H=8"
    assert TASK.params == sum(math.prod(s) for s in TASK.shapes)
