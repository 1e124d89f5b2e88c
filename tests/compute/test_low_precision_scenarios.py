"""workload.precision's recipes end to end: mxfp8 and nvfp4 run where the GPU has them and change the result,
are refused (naming the key) where it does not; fp8 on a GPU without fp8 runs its named fallback."""
from __future__ import annotations

import pytest

from simdist.errors import ScenarioError
from simdist.io.load import load_data
from tests.strategies.scenario_runner import run_with

NIC = {"bandwidth": "400 Gb/s", "latency": "5 us", "transport": "rdma"}
BASE = {
    "name": "recipes",
    "cluster": {"nodes": [{"count": 1, "gpu": "b200-180gb", "gpus_per_node": 8, "intra_node": {"link": "nvlink5"},
                           "nic": dict(NIC)}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": "llama3.1-8b", "seq_len": 2048, "global_batch": 8, "precision": "bf16"},
    "communication": {"strategy": "ring", "bucket_size": "25 MB"},
    "run": {"iterations": 2, "warmup": 1, "fidelity": "estimate"},
}


# data parallel, one micro-batch per step: every step casts the weights once, as the compute model charges
def _iteration_s(changes: dict) -> float:
    return run_with(BASE, changes).iteration_time_s


def test_each_recipe_changes_the_step_on_blackwell() -> None:
    times = {p: _iteration_s({"workload.precision": p}) for p in ("bf16", "fp8", "mxfp8", "nvfp4")}
    assert times["fp8"] < times["bf16"]
    assert times["mxfp8"] > times["fp8"]  # the same GEMM rate, plus its block scales
    assert times["nvfp4"] < times["mxfp8"]
    assert len(set(times.values())) == 4


@pytest.mark.parametrize("precision", ["mxfp8", "nvfp4"])
def test_block_scaled_precision_refused_on_hopper(precision: str) -> None:
    data = {**BASE, "cluster": {**BASE["cluster"], "nodes": [{**BASE["cluster"]["nodes"][0], "gpu": "h100-sxm5-80gb",
                                                              "intra_node": {"link": "nvlink4"}}]},
            "workload": {**BASE["workload"], "precision": precision}}
    with pytest.raises(ScenarioError, match="workload.precision") as e:
        load_data(data)
    assert "h100-sxm5-80gb" in str(e.value)


def test_block_scaled_grad_dtype_refused() -> None:
    with pytest.raises(ScenarioError, match="workload.grad_dtype"):
        load_data({**BASE, "workload": {**BASE["workload"], "grad_dtype": "mxfp8"}})


H100 = {"cluster": {**BASE["cluster"], "nodes": [{**BASE["cluster"]["nodes"][0], "gpu": "h100-sxm5-80gb",
                                                  "intra_node": {"link": "nvlink4"}}]}}
A100 = {"cluster": {**BASE["cluster"], "nodes": [{**BASE["cluster"]["nodes"][0], "gpu": "a100-sxm4-80gb",
                                                  "intra_node": {"link": "nvlink3"}}]}}


def test_fp8_recipe_and_attention_change_the_compute_on_hopper() -> None:
    fp8 = {**H100, "workload.precision": "fp8", "training.parallelism": {"zero": 3}}  # 80 GB: shard the states
    compute = lambda extra: run_with(BASE, {**fp8, **extra}).breakdown_s.compute
    delayed = compute({})
    assert compute({"workload.fp8_recipe": "delayed"}) == delayed  # TE's default
    assert compute({"workload.fp8_recipe": "current"}) > delayed  # + an amax pass per cast tensor
    assert compute({"workload.fp8_attention": True}) < delayed


@pytest.mark.parametrize("changes,key,words", [
    ({"workload.fp8_recipe": "current"}, "workload.fp8_recipe", "applies to precision fp8"),
    ({**A100, "workload.precision": "fp8", "workload.fp8_recipe": "current"}, "workload.fp8_recipe", "no fp8 units"),
    ({"workload.fp8_attention": True}, "workload.fp8_attention", "precision fp8"),
    ({**A100, "workload.precision": "fp8", "workload.fp8_attention": True}, "workload.fp8_attention", "a100"),
    ({**H100, "workload.precision": "fp8", "workload.flash_attention": False, "workload.fp8_attention": True},
     "workload.fp8_attention", "flash attention"),
    ({"workload": {"benchmark": {"op": "all_reduce", "sizes": ["1 MB"]}}, "run": {"fidelity": "estimate"},
      "training.cuda_graphs": True}, "training.cuda_graphs", "benchmark"),
])
def test_run_options_refused_where_they_change_nothing(changes: dict, key: str, words: str) -> None:
    with pytest.raises(ScenarioError, match=key) as e:
        run_with(BASE, changes)
    assert words in str(e.value)


def test_cuda_graphs_shorten_the_compute() -> None:
    assert run_with(BASE, {"training.cuda_graphs": True}).breakdown_s.compute < run_with(BASE, {}).breakdown_s.compute


def test_moe_capacity_factor_pads_the_experts_and_is_refused_on_dense_models() -> None:
    moe = {**H100, "workload.model": "qwen3-30b-a3b", "training.parallelism": {"zero": 3}}
    dropless = run_with(BASE, moe).breakdown_s.compute
    assert run_with(BASE, {**moe, "workload.moe_capacity_factor": 1.25}).breakdown_s.compute > dropless
    with pytest.raises(ScenarioError, match="workload.moe_capacity_factor") as e:
        run_with(BASE, {"workload.moe_capacity_factor": 1.25})
    assert "no mixture-of-experts" in str(e.value)
