"""Memory per GPU of a training run's rank classes, whatever its parallelism: each node group at its own
batch (DDP's model states and bucket copy, codecs' error-feedback state, or ZeRO / FSDP's sharded states), or
each pipeline stage of a dp x tp x pp layout. `check_memory` refuses what does not fit (InfeasibleError)."""
from __future__ import annotations

from dataclasses import replace

from simdist.compression import make_codec
from simdist.compute import ACTIVATION_BYTES, DTYPE_BYTES
from simdist.memory import MemoryEstimate, check_fits, estimate_memory
from simdist.results.records import MemoryUsage
from simdist.scenario import Scenario
import simdist.strategies.context_parallel as context_parallel  # lazy (simdist.LAZY_MODULES), as the three below:
import simdist.strategies.expert_parallel as expert_parallel  # what only model-parallel or ZeRO runs read
import simdist.strategies.mp_plan as mp_plan
import simdist.strategies.sharded_dp as sharded_dp
import simdist.strategies.sharding as sharding
from simdist.strategies.plan import data_parallel_degree, is_model_parallel, rank_batches, rank_groups
from simdist.workload.lora import trainable_param_count


def check_memory(scenario: Scenario, layout: mp_plan.MpPlan | None = None) -> MemoryUsage:
    """Per-GPU memory of the tightest rank class (node group at its own batch, or pipeline stage); raises
    InfeasibleError (exit 3) with the numbers when one does not fit. `layout`: a model-parallel run's plan."""
    if is_model_parallel(scenario):
        worst = sharding.check_stages_fit(_stage_memory(scenario, layout or mp_plan.build_mp_plan(scenario)))
    else:
        worst = None
        for _, est in _estimates(scenario):
            check_fits(est)
            if worst is None or est.total_bytes / est.capacity_bytes > worst.total_bytes / worst.capacity_bytes:
                worst = est
        assert worst is not None
    return MemoryUsage(per_gpu_bytes=worst.total_bytes, fits=worst.fits, capacity_bytes=worst.capacity_bytes,
                       parts_bytes=dict(worst.parts_bytes))


def memory_by_group(scenario: Scenario) -> dict[int, MemoryEstimate]:
    """{node group: MemoryEstimate at the group's largest batch}, refusing none (the text report shows each
    group of a mixed cluster; check_memory refuses)."""
    out: dict = {}
    for g, est in _estimates(scenario):
        if g not in out or est.total_bytes > out[g].total_bytes:
            out[g] = est
    return out


def _estimates(scenario: Scenario) -> list[tuple[int, MemoryEstimate]]:
    """(node group, MemoryEstimate) for every (group, batch) the ranks run, in that order: DDP's model states
    and bucket copy (codecs add error-feedback state), or ZeRO / FSDP's sharded states (sharded_dp)."""
    model, w, t = scenario.workload.model, scenario.workload, scenario.training
    assert model is not None
    dp = data_parallel_degree(scenario)
    pairs = sorted(set(zip(rank_groups(scenario), rank_batches(scenario, dp))))
    if t.parallelism.zero:
        return [(g, sharded_dp.sharded_memory(
            model, scenario.cluster.node_groups[g].gpu, batch, w.precision.value, t.optimizer.value,
            w.grad_dtype.value, t.parallelism.zero, dp, t.recompute, scenario.communication.bucket_size_bytes,
            t.recompute_every, t.fp8_param_gather)) for g, batch in pairs]
    grad_bytes = DTYPE_BYTES[w.grad_dtype]
    shapes = [s for _, s in model.gradients_backward_order()]
    codec = make_codec(scenario.communication.compression)
    # DDP keeps its gradient buckets as a flat copy of every gradient (LoRA: the adapters') unless each .grad is a
    # view of its bucket (communication.gradient_as_bucket_view: "the saved memory size will be equal to the total
    # gradients size"); codecs add error-feedback state
    bucket_copy = 0.0 if scenario.communication.gradient_as_bucket_view else trainable_param_count(model) * grad_bytes
    buffers = bucket_copy + codec.error_feedback_bytes(shapes, grad_bytes, dp)
    return [(g, estimate_memory(model, scenario.cluster.node_groups[g].gpu, batch, w.precision.value,
                                t.optimizer.value, grad_dtype=w.grad_dtype.value, dp=dp, extra_buffer_bytes=buffers))
            for g, batch in pairs]


def _stage_memory(scenario: Scenario, plan: mp_plan.MpPlan):
    """Every pipeline stage's memory per GPU (strategies.sharding.model_parallel_memory). With context
    parallelism each rank holds s / cp tokens' activations (the model cut by context_parallel.shard_sequence,
    the blocks' formula at s / cp) and the attention's communication buffers; the model states are sharded by
    ZeRO over dp x cp."""
    s, t, w = scenario, scenario.training, scenario.workload
    chunks = [None] * (plan.pp * plan.virtual_stages)
    for st in plan.stages:
        for c in st.chunks:
            chunks[c.virtual_stage] = c.layers
    shape, model, buffers = mp_plan.transformer_shape(w.model), w.model, zero_buffer_bytes(scenario, plan)
    if plan.cp > 1:
        shape = replace(shape, cp=plan.cp)
        model = context_parallel.shard_sequence(model, plan.cp, plan.cp_comm_type)
        act = ACTIVATION_BYTES[s.cluster.node_groups[0].gpu.runs_as(w.precision.value)]
        buffers += context_parallel.buffer_bytes(plan.cp_comm_type, shape, plan.micro_batch, plan.cp, plan.tp, act)
    gpu = s.cluster.node_groups[0].gpu
    out = sharding.model_parallel_memory(
        model, gpu, micro_batch=plan.micro_batch, micro_batches=plan.micro_batches,
        precision=w.precision.value, optimizer=t.optimizer.value, grad_dtype=w.grad_dtype.value, dp=plan.grad_dp,
        tp=plan.tp, pp=plan.pp, zero=t.parallelism.zero, sequence_parallel=t.sequence_parallel,
        recompute=t.recompute, schedule=t.schedule, virtual_stages=plan.virtual_stages,
        shape=shape, chunks=chunks, extra_buffer_bytes=buffers, fp8_param_gather=t.fp8_param_gather,
        recompute_modules=t.recompute_modules)
    if plan.moe_load is None:
        return out
    return expert_parallel.expert_stage_memory(
        out, model, chunks, plan.pp, gpu, ep=plan.ep, etp=plan.etp, dp=plan.grad_dp, edp=plan.edp,
        zero=t.parallelism.zero, precision=w.precision.value, optimizer=t.optimizer.value,
        grad_dtype=w.grad_dtype.value)


def zero_buffer_bytes(scenario: Scenario, plan: mp_plan.MpPlan) -> float:
    """Gradients ZeRO holds unsharded beside its 1/dp shard: at stage 3 the largest unit's before their
    reduce_scatter (as sharded_dp.sharded_memory counts them), at stage 2 one bucket being reduced
    (DeepSpeed's reduce bucket: a micro-batch's gradients are reduced bucket by bucket and freed). Stage 1
    keeps full gradients and reduce_scatters in place in that buffer (Megatron-LM's distributed optimizer),
    as stage 0 all_reduces there: none."""
    if plan.zero == 2:
        return float(min(scenario.communication.bucket_size_bytes,
                         max(c.grad_bytes for st in plan.stages for c in st.chunks)))
    if plan.zero != 3:
        return 0.0
    return max((u.params for st in plan.stages for u in st.units), default=0.0) * plan.grad_elem_bytes
