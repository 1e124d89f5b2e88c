"""Parameter all-gathers move the bf16 weights under fp8 and nvfp4 recipes (Transformer Engine quantizes after the
gather), and fp8 with training.fp8_param_gather (Megatron's --fp8-param-gather)."""
from __future__ import annotations

import pytest

from simdist.errors import ScenarioError
from simdist.io.catalog import gpus
from simdist.io.load import load_data
from simdist.low_precision import gathered_param_bytes
from simdist.strategies.mp_plan import build_mp_plan
from simdist.strategies.rank_memory import _stage_memory
from simdist.strategies.sharded_dp import sharded_memory
from simdist.strategies.sharding import fsdp_units, zero3_live_param_bytes
from simdist.workload import parametric_gpt
from tests.engine.test_every_key import GPT, MP, TRAIN
from tests.strategies.scenario_runner import run_with

H100 = {"cluster.nodes.0.gpu": "h100-sxm5-80gb", "workload.precision": "fp8"}


def test_gathered_bytes_per_precision() -> None:
    assert gathered_param_bytes("fp32") == gathered_param_bytes("tf32") == 4
    for p in ("fp16", "bf16", "fp8", "mxfp8", "nvfp4"):
        assert gathered_param_bytes(p) == 2  # the 16-bit model weights, quantized after the gather
    assert gathered_param_bytes("fp8", True) == gathered_param_bytes("mxfp8", True) == 1
    assert gathered_param_bytes("nvfp4", True) == 2  # no fp4 parameter gather (refused in io)


def test_zero3_gathers_half_the_bytes_in_fp8() -> None:
    """FSDP gathers every unit before its forward and its backward: 2 P bytes per parameter less, 1/dp of them
    each worker's payload (8 GPUs)."""
    base = {**GPT, **H100, "training.parallelism": {"zero": 3}}
    bf16, fp8 = (run_with(TRAIN, {**base, "training.fp8_param_gather": f}) for f in (False, True))
    params = parametric_gpt(2, 256, 4, 1000, 128).params
    assert bf16.sync.wire_bytes_per_iteration - fp8.sync.wire_bytes_per_iteration == pytest.approx(
        2 * params * (2 - 1) / 8, rel=1e-9)
    assert fp8.iteration_time_s < bf16.iteration_time_s


def test_zero3_memory_holds_the_gathered_units_in_fp8() -> None:
    model = parametric_gpt(4, 256, 4, 1000, 128)
    gpu = gpus()["h100-sxm5-80gb"]
    a, b = (sharded_memory(model, gpu, 2, "fp8", "adam", "fp32", 3, 8, fp8_param_gather=f) for f in (False, True))
    units = fsdp_units(model)
    live = zero3_live_param_bytes(units[1:], 2) + units[0].params * 2 - zero3_live_param_bytes(units[1:], 1) \
        - units[0].params * 1
    assert a.workspace_bytes - b.workspace_bytes == pytest.approx(live, rel=1e-12)


def test_distributed_optimizer_gathers_fp8_in_model_parallel_plans() -> None:
    base = {**MP, **H100, "training.parallelism": {"tp": 2, "pp": 2, "zero": 1}}
    plans = [build_mp_plan(load_data(_data({**base, "training.fp8_param_gather": f}))) for f in (False, True)]
    assert plans[0].param_bytes == 2 and plans[1].param_bytes == 1
    z3 = {**base, "training.parallelism": {"tp": 2, "pp": 2, "zero": 3}}
    mem = [_stage_memory(s, build_mp_plan(s)) for s in
           (load_data(_data({**z3, "training.fp8_param_gather": f})) for f in (False, True))]
    assert all(x.workspace_bytes > y.workspace_bytes for x, y in zip(*mem))


def _data(changes: dict) -> dict:
    import copy
    from simdist.io.overrides import set_path
    data = copy.deepcopy(TRAIN)
    for dotted, value in changes.items():
        set_path(data, dotted.split("."), value)
    return data


@pytest.mark.parametrize("changes,match", [
    ({**GPT, **H100, "workload.precision": "bf16", "training.parallelism": {"zero": 3}}, "fp8 or mxfp8"),
    ({**GPT, **H100, "workload.precision": "nvfp4", "cluster.nodes.0.gpu": "b200-180gb",
      "training.parallelism": {"zero": 3}}, "fp8 or mxfp8"),
    ({**GPT, **H100}, "parameter all-gather"),
    ({**GPT, **H100, "cluster.nodes.0.gpu": "a100-sxm4-80gb", "training.parallelism": {"zero": 3}}, "no fp8 units"),
])
def test_refused_without_fp8_parameters_or_a_gather(changes: dict, match: str) -> None:
    with pytest.raises(ScenarioError, match="training.fp8_param_gather") as e:
        run_with(TRAIN, {**changes, "training.fp8_param_gather": True})
    assert match in str(e.value)
