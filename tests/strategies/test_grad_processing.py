"""Gradient clipping and fp16 loss scaling: their HBM passes, where they run (per update or per micro-batch),
and the contexts that refuse them."""
from __future__ import annotations

import pytest

from simdist.compute import GRAD_CLIP_PASSES, grad_processing_time, memory_bandwidth_Bps
from simdist.errors import ScenarioError
from simdist.io.catalog import gpus
from tests.strategies.scenario_runner import run_with

V100 = gpus()["v100-sxm2-16gb"]
BASE = {
    "name": "grad-processing",
    "cluster": {"nodes": [{"count": 2, "gpu": "v100-sxm2-16gb", "gpus_per_node": 2, "intra_node": {"link": "pcie-gen3"},
                           "nic": {"bandwidth": "100 Gb/s", "latency": "5 us", "transport": "rdma"}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": {"bert": {"layers": 4, "hidden": 512, "heads": 8, "vocab": 8000}}, "seq_len": 128,
                 "batch_per_gpu": 8, "precision": "fp16"},
    "training": {"optimizer": "adam", "grad_accumulation": 4},
    "communication": {"strategy": "ring", "bucket_size": "25 MB"},
    "run": {"iterations": 3, "warmup": 1, "fidelity": "estimate"},
}


def test_clipping_and_unscaling_are_streaming_passes_over_the_gradients():
    """Clipping reads every gradient for the norm, then reads and writes it to scale (3 passes); unscaling with
    the inf/NaN check is 2 passes fused, 3 as tensor ops (a divide, then is_finite)."""
    n, bw = 100_000_000, memory_bandwidth_Bps(V100)
    launch = grad_processing_time(1, V100, "global_norm", "none") - 4 * GRAD_CLIP_PASSES / bw
    assert grad_processing_time(n, V100, "none", "none") == 0.0
    assert grad_processing_time(n, V100, "global_norm", "none") == pytest.approx(n * 4 * 3 / bw + launch)
    fused = grad_processing_time(n, V100, "none", "dynamic")
    unfused = grad_processing_time(n, V100, "none", "dynamic", kernels="unfused")
    assert fused == pytest.approx(n * 4 * 2 / bw + 2 / 3 * launch)
    assert unfused == pytest.approx(n * 4 * 3 / bw + launch)
    assert grad_processing_time(n, V100, "global_norm", "none", grad_dtype="fp16") == \
        pytest.approx(n * 2 * 3 / bw + launch)   # fp16 gradients move half the bytes
    with pytest.raises(ValueError, match="clipping"):
        grad_processing_time(n, V100, "value", "none")


def _step(changes: dict) -> float:
    return run_with(BASE, changes).iteration_time_s


def test_per_micro_batch_runs_them_on_every_micro_batch_and_per_update_once():
    plain = _step({})
    per_update = _step({"training.grad_clipping": "global_norm", "training.loss_scaling": "dynamic"})
    per_micro = _step({"training.grad_clipping": "global_norm", "training.loss_scaling": "dynamic",
                       "training.grad_processing": "per_micro_batch"})
    once = per_update - plain
    assert once > 0
    # four micro-batches: three more applications than once per update (up to the exchange it now delays)
    assert per_micro - plain >= 4 * once * (1 - 1e-9)


@pytest.mark.parametrize("changes,key", [
    ({"training.loss_scaling": "dynamic", "workload.precision": "bf16"}, "training.loss_scaling"),
    ({"training.grad_processing": "per_micro_batch"}, "training.grad_processing"),
    ({"training.grad_processing": "per_micro_batch", "training.grad_clipping": "global_norm",
      "training.parallelism": {"zero": 2}}, "training.grad_processing"),
    ({"training.grad_clipping": "global_norm", "communication.strategy": "ps"}, "training.grad_clipping"),
])
def test_contexts_that_would_not_read_them_are_refused(changes, key):
    with pytest.raises(ScenarioError, match=key.replace(".", r"\.")):
        run_with(BASE, changes)


def test_per_micro_batch_processing_holds_every_gradient_until_the_backward_and_it_end():
    """Once per step either way (no accumulation), but per micro-batch the global norm needs every gradient
    before any bucket is exchanged, so the exchange no longer overlaps the backward; per update it runs after
    the exchange, beside the optimizer step."""
    on = {"training.grad_clipping": "global_norm", "training.grad_accumulation": 1,
          "cluster.nodes.0.nic.bandwidth": "10 Gb/s"}
    per_update = run_with(BASE, on).to_dict()
    per_micro = run_with(BASE, {**on, "training.grad_processing": "per_micro_batch"}).to_dict()
    assert per_micro["breakdown_s"]["exposed_communication"] > per_update["breakdown_s"]["exposed_communication"]
    assert per_micro["iteration_time_s"] > per_update["iteration_time_s"]
