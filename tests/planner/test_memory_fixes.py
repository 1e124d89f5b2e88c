"""An out-of-memory scenario: each usual fix tried alone through the run's own memory check."""
from __future__ import annotations

import copy
from pathlib import Path

import yaml

from simdist.strategies.rank_memory import check_memory
from simdist.errors import InfeasibleError
from simdist.io.sweep_load import load_point
from simdist.planner.memory_fixes import memory_fixes
from simdist.strategies.mp_plan import build_mp_plan
from simdist.strategies.plan import is_model_parallel

ROOT = Path(__file__).resolve().parents[2]
GPT2XL = yaml.safe_load((ROOT / "scenarios" / "planner" / "gpt2xl-token-budget.yaml").read_text())
GPT2XL.pop("plan")


def _memory_error(scenario) -> InfeasibleError | None:
    """The memory check a run makes before it simulates (data parallel / ZeRO, or tp / pp)."""
    try:
        if is_model_parallel(scenario):
            check_memory(scenario, build_mp_plan(scenario))
        else:
            check_memory(scenario)
    except InfeasibleError as err:
        return err
    return None


def _load(base, changes=None):
    return load_point(copy.deepcopy(base), (), dict(changes or {}), ".", "t")


def test_each_usual_fix_is_tried_and_those_that_fit_are_named():
    base = copy.deepcopy(GPT2XL)
    base["workload"]["batch_per_gpu"] = 64  # 205 GiB of activations and states on an 80 GiB A100
    scenario = _load(base)
    assert "does not fit in GPU memory" in str(_memory_error(scenario))
    fixes = {f.fix: f for f in memory_fixes(scenario, lambda ch: _load(base, ch), _memory_error)}
    assert list(fixes) == ["a higher ZeRO stage", "more tensor parallelism", "more pipeline stages",
                           "activation recomputation", "a smaller micro-batch"]
    zero = fixes["a higher ZeRO stage"]
    assert zero.fits is False and "needs" in zero.detail  # sharding the states leaves the 166 GiB of activations
    assert fixes["more tensor parallelism"].fits is None  # 25 heads: tp 2 is refused
    assert "attention heads" in fixes["more tensor parallelism"].detail
    pp, small = fixes["more pipeline stages"], fixes["a smaller micro-batch"]
    assert pp.fits and pp.changes["training.parallelism.pp"] == 2
    assert small.fits and small.changes == {"workload.batch_per_gpu": 16, "training.grad_accumulation": 4}
    for fix in (pp, small):  # what is reported to fit does fit, and the milder step before it does not
        assert _memory_error(_load(base, fix.changes)) is None
    assert _memory_error(_load(base, {"workload.batch_per_gpu": 32, "training.grad_accumulation": 2})) is not None
    text = small.text(scenario)
    assert text == "a smaller micro-batch: workload.batch_per_gpu 64 -> 16, training.grad_accumulation 1 -> 4 fits"


def test_a_model_parallel_scenario_halves_its_pipeline_micro_batch():
    base = copy.deepcopy(GPT2XL)
    base["workload"].pop("batch_per_gpu")
    base["workload"]["global_batch"] = 2048
    base["training"] = {"optimizer": "adam", "parallelism": {"pp": 2}, "micro_batch": 64}
    scenario = _load(base)
    assert _memory_error(scenario) is not None
    fixes = {f.fix: f for f in memory_fixes(scenario, lambda ch: _load(base, ch), _memory_error)}
    small, recompute = fixes["a smaller micro-batch"], fixes["activation recomputation"]
    # gpt2-xl runs flash attention: 34 sbh + 4abs bytes per layer (no s x s scores), 24 layers x 2 in flight
    assert small.fits and small.changes == {"training.micro_batch": 16}
    assert _memory_error(_load(base, {"training.micro_batch": 32})) is not None
    assert recompute.fits and recompute.changes == {"training.recompute": "full"}  # selective: flash keeps no scores
    assert _memory_error(_load(base, {"training.recompute": "selective"})) is not None
    # 1F1B keeps as many micro-batches in flight on stage 0 as there are stages: more stages do not help here
    assert fixes["more pipeline stages"].fits is False


def test_full_recomputation_replaces_selectives_modules():
    """A selective run with Megatron's recompute_modules that does not fit: the fix is full recomputation, which
    takes no module list (the key alone would refuse it), and it fits."""
    base = copy.deepcopy(GPT2XL)
    base["workload"].pop("batch_per_gpu")
    base["workload"]["global_batch"] = 2048
    base["training"] = {"optimizer": "adam", "parallelism": {"pp": 2}, "micro_batch": 64, "recompute": "selective",
                        "recompute_modules": ["layernorm"]}
    scenario = _load(base)
    assert _memory_error(scenario) is not None
    recompute = {f.fix: f for f in memory_fixes(scenario, lambda ch: _load(base, ch), _memory_error)}[
        "activation recomputation"]
    assert recompute.changes == {"training.recompute": "full", "training.recompute_modules": None}
    assert recompute.fits and _memory_error(_load(base, recompute.changes)) is None


def test_run_and_estimate_name_the_fixes_under_an_out_of_memory_refusal(tmp_path):
    from click.testing import CliRunner

    from simdist.cli import main

    path = tmp_path / "gpt2xl.yaml"
    path.write_text(yaml.safe_dump(GPT2XL, sort_keys=False))
    for verb in ("run", "estimate"):
        res = CliRunner().invoke(main, [verb, str(path), "--set", "workload.batch_per_gpu=64"])
        lines = res.output.splitlines()
        assert res.exit_code == 3 and lines[0].startswith("error: does not fit in GPU memory: needs 205 GiB")
        assert lines[1].startswith("the usual fixes, each tried alone")
        assert "  more pipeline stages: training.parallelism.pp 1 -> 2, training.parallelism.dp 32 -> 16 fits" in lines
        assert ("  a smaller micro-batch: workload.batch_per_gpu 64 -> 16, training.grad_accumulation 1 -> 4 fits"
                in lines)
    res = CliRunner().invoke(main, ["check", str(path), "--set", "workload.batch_per_gpu=64"])
    lines = res.output.splitlines()
    assert res.exit_code == 3 and lines[0].startswith(f"{path}: does not fit in GPU memory: needs 205 GiB")
    assert "  more pipeline stages: training.parallelism.pp 1 -> 2, training.parallelism.dp 32 -> 16 fits" in lines
    res = CliRunner().invoke(main, ["run", str(path), "--set", "workload.batch_per_gpu=8"])
    assert res.exit_code == 0 and "usual fixes" not in res.output  # nothing to fix
