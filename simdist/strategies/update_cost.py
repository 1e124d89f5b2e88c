"""What a rank's update costs: the optimizer step over its parameters, plus gradient clipping and loss-scale
unscaling where they run once per update; and what those two cost on each micro-batch where they run there
(training.grad_processing). One place, so that every plan (data parallel, ZeRO, model parallel) prices them alike."""
from __future__ import annotations

from simdist.compute import grad_processing_time, optimizer_step_time
from simdist.hardware.specs import GpuSpec
from simdist.scenario import GradProcessing, Scenario


def _processing(params: int, gpu: GpuSpec, scenario: Scenario) -> float:
    t, w = scenario.training, scenario.workload
    return grad_processing_time(params, gpu, t.grad_clipping.value, t.loss_scaling.value, w.grad_dtype.value,
                                kernels=t.optimizer_kernels.value, calibration=scenario.compute_calibration)


def update_time(params: int, gpu: GpuSpec, scenario: Scenario) -> float:
    """The optimizer step over `params` parameters on `gpu`, with clipping and unscaling when per update."""
    t, w = scenario.training, scenario.workload
    step = optimizer_step_time(params, gpu, t.optimizer.value, w.precision.value, grad_dtype=w.grad_dtype.value,
                               kernels=t.optimizer_kernels.value, calibration=scenario.compute_calibration)
    if t.grad_processing is GradProcessing.PER_UPDATE:
        step += _processing(params, gpu, scenario)
    return step


def micro_batch_processing_time(params: int, gpu: GpuSpec, scenario: Scenario) -> float:
    """Clipping and unscaling after each micro-batch's backward (grad_processing per_micro_batch), else 0."""
    if scenario.training.grad_processing is not GradProcessing.PER_MICRO_BATCH:
        return 0.0
    return _processing(params, gpu, scenario)
