"""Layers outside the GPT block names that tensor parallelism still splits: Qwen3's per-head query/key norms run on
the rank's heads, DeepSeek-V3's multi-token-prediction module uses the model's vocab-parallel embedding and output
layer (Megatron-Core's MultiTokenPredictionLayer), with its norms on the sequence as final_norm."""
from __future__ import annotations

import pytest

from simdist.strategies.tensor_parallel import TpRole, layer_role, shard_model, tensor_parallel_plan
from simdist.workload import get_model
from tests.test_memory_activations import H100


def _by_name(model):
    return {x.name: x for x in model.layers}


def test_qwen3_qk_norm_runs_on_the_ranks_heads() -> None:
    m = get_model("qwen3-30b-a3b", seq_len=1024)
    norm = _by_name(m)["blocks.0.attn.qk_norm"]
    assert layer_role(norm) is TpRole.SHARDED
    shard = _by_name(shard_model(m, 4))["blocks.0.attn.qk_norm"]
    assert shard.fwd_flops == pytest.approx(norm.fwd_flops / 4, rel=1e-12)
    assert shard.saved_elems == pytest.approx(norm.saved_elems / 4, rel=1e-12)
    assert shard.params == norm.params  # each rank keeps the head-width weights whole


def test_mtp_module_uses_the_vocab_parallel_embedding_and_head() -> None:
    m = get_model("deepseek-v3-mtp", seq_len=512)
    roles = {x.name: layer_role(x) for x in m.layers if x.name.startswith("mtp.0.")}
    assert roles == {"mtp.0.embed": TpRole.VOCAB_EMBEDDING, "mtp.0.enorm": TpRole.SEQUENCE,
                     "mtp.0.hnorm": TpRole.SEQUENCE, "mtp.0.eh_proj": TpRole.REPLICATED,
                     "mtp.0.norm": TpRole.SEQUENCE, "mtp.0.head": TpRole.VOCAB_HEAD, "mtp.0.loss": TpRole.VOCAB_LOSS}
    whole, shard = _by_name(m), _by_name(shard_model(m, 8))
    for name in ("mtp.0.head", "mtp.0.loss", "lm_head"):
        assert shard[name].fwd_flops == pytest.approx(whole[name].fwd_flops / 8, rel=1e-12)
    # the MTP head's logits cost each rank what the main head's do
    assert shard["mtp.0.head"].fwd_flops == pytest.approx(shard["lm_head"].fwd_flops, rel=1e-12)
    plan = tensor_parallel_plan(m, H100, 1, "bf16", 8)
    head = [c for c in plan.collectives if c.what.startswith("mtp.0.head ")]
    assert [c.what.split(" ", 1)[1] for c in head] == ["input gradient partial sums"]
    assert len([c for c in plan.collectives if c.what.startswith("mtp.0.loss ")]) == 3
