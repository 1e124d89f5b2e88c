"""torchtitan's activation-checkpointing modes on the ZeRO / FSDP path: selective_op (every second matmul and the
elementwise ops recomputed) and full recomputation of one block in N (training.recompute_every)."""
from __future__ import annotations

import pytest

from simdist.errors import ScenarioError
from simdist.scenario import Recompute
from simdist.strategies.recompute_policy import checkpointed, kept_elems, recomputed_fraction
from simdist.workload.transformer import BlockConfig, block
from tests.strategies.scenario_runner import run_with

FSDP = {
    "name": "recompute-policy",
    "cluster": {"nodes": [{"count": 2, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                           "nic": {"bandwidth": "200 Gb/s", "latency": "2 us", "count": 8, "transport": "rdma"}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": "llama2-13b", "seq_len": 4096, "batch_per_gpu": 1, "precision": "bf16"},
    "training": {"parallelism": {"zero": "fsdp"}, "optimizer": "adam"},
    "communication": {"strategy": "ring", "backend": "nccl"},
    "run": {"iterations": 2, "warmup": 1, "fidelity": "estimate"},
}


class _Model:
    def __init__(self, layers):
        self.layers = layers


def _llama_block():
    cfg = BlockConfig(hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, mlp="swiglu", norm="rmsnorm",
                      rotary=True, bias=False, flash_attention=True)
    layers = block("blocks.0", cfg, 1024)
    return _Model(layers), list(range(len(layers))), {x.name.split(".", 2)[-1]: i for i, x in enumerate(layers)}


def test_selective_op_recomputes_k_o_and_w3_and_every_elementwise_op():
    """Matmuls in call order q 1, k 2, v 3, o 4, w1 5, w3 6, w2 7: the even ones are recomputed; q, k and v come
    fused as attn.qkv (q 4096 wide, k and v 1024 each with 8 KV heads) and w1, w3 as mlp.gate_up."""
    model, layers, at = _llama_block()
    redo = recomputed_fraction(model, layers, Recompute.SELECTIVE_OP)
    assert redo[at["attn.qkv"]] == pytest.approx(1024 / (4096 + 2 * 1024))
    assert redo[at["attn.proj"]] == 1.0 and redo[at["mlp.gate_up"]] == 0.5 and redo[at["mlp.down"]] == 0.0
    assert at["attn.core"] not in redo   # the attention kernel's output is kept
    for name in ("norm1", "norm2", "mlp.swiglu", "attn.residual", "mlp.residual"):
        assert redo[at[name]] == 1.0
    kept = kept_elems(model, layers, Recompute.SELECTIVE_OP)
    down = model.layers[at["mlp.down"]]
    assert kept[at["mlp.down"]] == down.output_elems and kept[at["mlp.swiglu"]] == 0.0


def test_recompute_every_checkpoints_blocks_n_2n_and_so_on():
    assert [p for p in range(1, 9) if checkpointed(p, Recompute.FULL, 2)] == [2, 4, 6, 8]
    assert all(checkpointed(p, Recompute.FULL, 1) for p in range(1, 9))
    assert all(checkpointed(p, Recompute.SELECTIVE_OP, 1) for p in range(1, 9))
    assert not checkpointed(2, Recompute.NONE, 1)


def _run(changes):
    r = run_with(FSDP, changes).to_dict()
    return r["iteration_time_s"], r["memory"]["per_gpu_bytes"]


def test_each_mode_trades_memory_for_time_between_none_and_full():
    t_none, m_none = _run({})
    t_full, m_full = _run({"training.recompute": "full"})
    t_half, m_half = _run({"training.recompute": "full", "training.recompute_every": 2})
    t_op, m_op = _run({"training.recompute": "selective_op"})
    assert t_none < t_half < t_full and m_full < m_half < m_none
    assert t_none < t_op < t_full and m_full < m_op < m_none


@pytest.mark.parametrize("changes,key", [
    ({"training.recompute": "selective", "training.recompute_every": 2}, "training.recompute_every"),
    ({"training.recompute": "selective_op", "training.parallelism": {"tp": 2}}, "training.recompute"),
])
def test_modes_outside_the_fsdp_path_are_refused(changes, key):
    with pytest.raises(ScenarioError, match=key.replace(".", r"\.")):
        run_with(FSDP, changes)
