"""ZeRO memory per GPU follows Rajbhandari et al. 2020 (Figure 1: Ψ = 7.5 B, Nd = 64, mixed-precision Adam,
K = 12): 120 GB without ZeRO, 31.4 GB with P_os, 16.6 GB with P_os+g, 1.9 GB with P_os+g+p; the run's
check_memory uses it, and an infeasible layout exits 3 with the figures."""
from __future__ import annotations

import pytest

from simdist.errors import InfeasibleError
from simdist.memory import FRAMEWORK_RESERVE_BYTES
from simdist.scenario import Recompute
from simdist.strategies.sharded_dp import sharded_memory
from simdist.workload import get_model
from simdist.workload.specs import LayerSpec, ModelSpec
from tests.compute.gpus import A100_80GB
from tests.strategies.scenario_runner import run_with

PSI, ND = 7.5e9, 64
PAPER_GB = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}


def _model(params: float) -> ModelSpec:
    return ModelSpec("psi", "custom", (LayerSpec("fc", "linear", int(params), 2 * params, 1, 1, 1, ((int(params),),)),))


def _states(e) -> float:
    return e.weights_bytes + e.gradients_bytes + e.optimizer_states_bytes


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_model_states_match_the_papers_figure_1(zero: int) -> None:
    e = sharded_memory(_model(PSI), A100_80GB, 1, "fp16", "adam", "fp16", zero, ND)
    formula = {1: 2 * PSI + 2 * PSI + 12 * PSI / ND, 2: 2 * PSI + 14 * PSI / ND, 3: 16 * PSI / ND}[zero]
    assert _states(e) == pytest.approx(formula, rel=1e-9)
    assert round(_states(e) / 1e9, 1) == PAPER_GB[zero]
    assert round(16 * PSI / 1e9, 1) == PAPER_GB[0]  # the baseline the paper starts from


def test_parts_of_each_stage() -> None:
    m = _model(PSI)
    e1, e2, e3 = (sharded_memory(m, A100_80GB, 1, "bf16", "adam", "bf16", z, ND) for z in (1, 2, 3))
    assert (e1.weights_bytes, e1.gradients_bytes, e1.optimizer_states_bytes) == pytest.approx((2 * PSI, 2 * PSI,
                                                                                               12 * PSI / ND))
    assert e2.gradients_bytes == pytest.approx(2 * PSI / ND) and e2.weights_bytes == pytest.approx(2 * PSI)
    assert e3.weights_bytes == pytest.approx(2 * PSI / ND)
    # stage 3 holds the gathered unit (here the whole one-layer model) and its unsharded gradients
    assert e3.workspace_bytes - e2.workspace_bytes == pytest.approx(2 * PSI)
    assert e3.buffers_bytes == pytest.approx(2 * PSI)
    assert e1.buffers_bytes == pytest.approx(25e6)  # the gradient bucket being reduce_scattered


def test_recompute_keeps_only_block_inputs() -> None:
    m = get_model("llama2-7b", seq_len=4096)
    none, sel, full = (sharded_memory(m, A100_80GB, 1, "bf16", "adam", "bf16", 3, 64, rc)
                       for rc in (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL))
    assert full.activations_bytes < sel.activations_bytes < none.activations_bytes
    # full: each of the 32 blocks keeps its input, s x h bf16 values, plus the layers outside blocks
    outside = sum(x.saved_elems for x in m.layers if not x.name.startswith("blocks."))
    assert full.activations_bytes == pytest.approx((32 * 4096 * 4096 + outside) * 2)
    assert full.workspace_bytes > none.workspace_bytes  # the block being recomputed holds its activations


SCENARIO = {
    "name": "zero-mem",
    "cluster": {"nodes": [{"count": 8, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                           "nic": {"bandwidth": "200 Gb/s", "latency": "3 us", "count": 8}}],
                "fabric": {"topology": "single_switch", "link": {"bandwidth": "200 Gb/s"}}},
    "workload": {"model": "llama2-7b", "batch_per_gpu": 1, "precision": "bf16", "seq_len": 4096, "grad_dtype": "bf16"},
    "training": {"optimizer": "adam", "recompute": "full"},
    "run": {"fidelity": "estimate", "iterations": 2, "warmup": 0},
}


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_a_runs_memory_is_the_stage_formula(zero: int) -> None:
    r = run_with(SCENARIO, {"training.parallelism": {"zero": zero}}).to_dict()
    parts = r["memory"]["parts_bytes"]
    psi = get_model("llama2-7b", seq_len=4096).params
    expect = {1: (2, 2, 12 / 64), 2: (2, 2 / 64, 12 / 64), 3: (2 / 64, 2 / 64, 12 / 64)}[zero]
    got = (parts["weights"], parts["gradients"], parts["optimizer_states"])
    assert got == pytest.approx(tuple(x * psi for x in expect), rel=1e-9)
    assert r["memory"]["fits"] and parts["workspace"] > FRAMEWORK_RESERVE_BYTES


def test_infeasible_stage_exits_3_with_the_numbers() -> None:
    # Llama-2-70B under ZeRO-1 keeps 4 bytes per parameter unsharded (280 GB): no 80 GiB GPU holds it
    change = {"training.parallelism": {"zero": 1}, "workload.model": "llama2-70b"}
    with pytest.raises(InfeasibleError) as info:
        run_with(SCENARIO, change)
    msg = str(info.value)
    assert info.value.exit_code == 3 and "does not fit" in msg and "weights 128 GiB, gradients 128 GiB" in msg and "has 80 GiB" in msg
    r = run_with(SCENARIO, {**change, "training.parallelism": {"zero": "fsdp"}}).to_dict()
    assert r["memory"]["fits"]


def test_stage3_holds_two_gathered_blocks_and_the_root() -> None:
    from simdist.strategies.sharding import fsdp_units

    m = get_model("llama2-7b", seq_len=4096)
    units = fsdp_units(m)
    root, blocks = units[0], units[1:]
    assert root.name == "root" and root.params == 2 * 32000 * 4096 + 4096  # embedding, head, final norm
    z2, z3 = (sharded_memory(m, A100_80GB, 1, "bf16", "adam", "bf16", z, 64) for z in (2, 3))
    assert z3.workspace_bytes - z2.workspace_bytes == pytest.approx(2 * (2 * blocks[0].params + root.params))
