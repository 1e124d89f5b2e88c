"""Roofline compute model: per-layer forward and backward time on one GPU, and the optimizer step.

time = max(FLOPs / (peak(dtype) x efficiency(kind, dtype)), bytes / (memory bandwidth x memory efficiency))
       + launch overhead per kernel. The rates it prices kernels at (bytes per element, efficiencies, the GEMM size
curve, bandwidth, launches, the calibration) are simdist.compute_rates', re-exported here. Every default figure and
its source is in docs/model.md ("compute model").
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from simdist.compute_rates import (  # noqa: F401 - the rates, re-exported: simdist.compute is where callers find them
    ACTIVATION_BYTES, ANY_GPU, DEFAULT_DTYPE_EFFICIENCY, DEFAULT_KIND_FACTOR, DEFAULT_LAUNCH_OVERHEAD_S,
    DEFAULT_MEMORY_EFFICIENCY, DTYPE_BYTES, GEMM_KINDS, GEMM_RAMP_S, GRAPH_KERNEL_GAP_S, MIXED_PRECISIONS,
    TENSOR_CORE_PRECISIONS, ComputeCalibration, _check_fraction, _check_precision, _NO_CALIBRATION, efficiency,
    gemm_saturation, gemm_shrink_factor, grouped_gemm_factor, launch_overhead_s, layer_kernel_overhead_s,
    matmul_efficiency, memory_bandwidth_Bps)
from simdist.hardware.specs import GpuSpec
from simdist.low_precision import HIGH_PRECISION_BYTES, RECIPES, attention_cast_cost, cast_cost, layer_precision, recipe_for
from simdist.workload.specs import ModelSpec

# Per parameter per step: optimizer state tensors (fp32) read and written, and FLOPs of the update.
OPTIMIZER_STATES: Mapping[str, int] = {"sgd": 0, "momentum": 1, "adam": 2, "lamb": 2}
# LAMB: Adam's update plus the two squared norms (w and the update, 2 FLOPs per element each) and the trust ratio
OPTIMIZER_FLOPS_PER_PARAM: Mapping[str, float] = {"sgd": 2.0, "momentum": 4.0, "adam": 12.0, "lamb": 17.0}
# A fused LAMB runs two passes (NVIDIA's multi-tensor LAMB): the first writes the update and its norms, the
# second, once the per-tensor ratio is known, reads the update back: 8 B per parameter more than fused Adam.
SECOND_PASS_BYTES: Mapping[str, int] = {"lamb": 8}
# An update written as elementwise tensor ops runs one kernel per op, each reading its inputs from HBM and
# writing its output (fp32 tensors, 4 B per element; reads of the gradient counted at its own width below).
# (fp32 elements read + written, reads of the gradient) per parameter, counted from the op sequences:
#   sgd:      t = lr*g; p' = p - t; assign p                                    -> 3 ops
#   momentum: t = mu*v; v' = t + g; u = lr*v'; p' = p - u; assign v, p          -> 6 ops
#   adam (with decoupled weight decay, as BERT's AdamWeightDecayOptimizer in google-research/bert and
#   NVIDIA DeepLearningExamples' TensorFlow BERT, optimization.py): b1*m, (1-b1)*g, add; g*g, b2*v,
#   (1-b2)*g2, add; sqrt, + eps, divide; wd*p, add; lr*u, p - u; assign p, m, v  -> 17 ops
#   lamb (DeepLearningExamples' TensorFlow BERT LAMBOptimizer, optimization.py): Adam's moments as above; the
#   bias corrections m/c1, v/c2; sqrt, + eps, divide; wd*p, add; the norms ||p||, ||u|| (a read each); the
#   scalar ratio*lr times u, p - u; assign p, m, v                                -> 21 ops
UNFUSED_OPTIMIZER_ELEMENTS: Mapping[str, tuple[int, int]] = {"sgd": (6, 1), "momentum": (13, 1), "adam": (37, 2),
                                                             "lamb": (43, 2)}
# On CUDA cores (fp32) cuDNN runs a 3 x 3, stride-1 convolution, forward and both gradients, as Winograd's minimal
# filtering F(2 x 2, 3 x 3) (Lavin and Gray 2016, "Fast Algorithms for Convolutional Neural Networks"): 16
# multiplications per 2 x 2 output tile instead of 36, so the same work at the same efficiency takes 1 / 2.25 of the
# time; the transforms are additions, amortised over the channels. Tensor-core convolutions (mixed precision, tf32)
# run as implicit GEMM and keep their full FLOPs. Larger tiles (F(4 x 4, 3 x 3): 4x) exist; the smallest is assumed.
# Only with NCHW filters: cuDNN's tables of supported algorithms (cudnnConvolutionForward, BackwardData,
# BackwardFilter) list, for float convolutions whose filter is NHWC, implicit-GEMM algorithms only (no Winograd,
# no FFT), so a channels_last fp32 step runs its 3 x 3 convolutions at full FLOPs (runs_winograd).
WINOGRAD_SPEEDUP = 36 / 16


@dataclass(frozen=True)
class LayerTime:
    """Forward and backward time of one layer for one micro-batch on one GPU."""

    fwd_s: float
    bwd_s: float

    @property
    def total_s(self) -> float:
        return self.fwd_s + self.bwd_s


def _roofline(flops: float, bytes_moved: float, peak: float, eff: float, bw: float) -> float:
    return max(flops / (peak * eff), bytes_moved / bw)


def first_trainable_layer(model: ModelSpec) -> int:
    """Index of the first layer with trainable parameters (len(layers) when none; frozen layers' do not count):
    backward starts needing input grads after it."""
    return next((i for i, layer in enumerate(model.layers) if layer.params > 0 and not layer.frozen),
                len(model.layers))


# "native": the layout the frameworks pick for the units that run the convolution (NHWC on tensor cores, NCHW on
# CUDA cores: PyTorch's default tensors, TensorFlow's layout optimizer and XLA on GPU); "nhwc" / "nchw": that
# layout whatever the units, paying what it costs on the others (layout_transposes_elems, runs_winograd).
MEMORY_FORMATS = ("native", "nhwc", "nchw")


def runs_winograd(layer, memory_format: str, precision: str) -> bool:
    """Whether cuDNN runs this layer as Winograd (WINOGRAD_SPEEDUP): a 3 x 3 stride-1 convolution on CUDA cores
    (`precision` is the one the GPU computes in: GpuSpec.runs_as), with its tensors in NCHW (native or nchw);
    channels_last fp32 filters have implicit-GEMM algorithms only."""
    return layer.winograd and precision not in TENSOR_CORE_PRECISIONS and memory_format != "nhwc"


def layout_transposes_elems(layer, memory_format: str, precision: str, dgrad: bool) -> tuple[float, float]:
    """Activation elements per sample that layout transposes move in one conv layer's (forward, backward).

    Tensor cores run convolutions in NHWC. With activations in NCHW (PyTorch without channels_last,
    tf_cnn_benchmarks' data_format NCHW, XLA's layout for every non-fp16 convolution) on tensor cores (mixed
    precision, or tf32), cuDNN transposes each call's input to NHWC before the convolution and its output back
    to NCHW after (cuDNN's developer guide: "NCHW-to-NHWC transformations to call the Tensor Core operations";
    MosaicML's "Channels Last" method card draws it); every transpose reads and writes its tensor. Forward:
    input and output. Backward: the data gradient (output gradient in, input gradient out) and the weight
    gradient (input and output gradient in), each its own call; the first trainable layer has no data
    gradient. Nothing in NHWC or native, in plain fp32 (CUDA cores, whose kernels read NCHW; their cost in NHWC is
    runs_winograd's) or for other layer kinds.
    """
    if memory_format != "nchw" or layer.kind != "conv" or precision not in TENSOR_CORE_PRECISIONS:
        return 0.0, 0.0
    both = layer.input_elems + layer.output_elems
    return 2.0 * both, 2.0 * both * (2 if dgrad else 1)


def layer_times(model: ModelSpec, gpu: GpuSpec, batch: int, precision: str,
                calibration: ComputeCalibration | None = None,
                efficiency_factors: Sequence[float] | None = None,
                accumulation_bytes: int = 0, memory_format: str = "native",
                weight_cast_share: float = 1.0) -> list[LayerTime]:
    """Per-layer forward/backward time of a `batch`-sample micro-batch, in forward order.

    Backward is 2 x forward FLOPs (input gradient + weight gradient), 1 x for a frozen layer (LayerSpec.frozen:
    input gradient only, no weight gradient written or accumulated). Layers before the first layer with
    parameters have no backward at all (nothing upstream needs a gradient); the first one computes only its
    weight gradient (1 x forward FLOPs), as autograd does for a network input that does not require grad.
    `efficiency_factors` (one per layer, in (0, 1]) multiply each layer's FLOP efficiency: tensor parallelism
    passes gemm_shrink_factor for its split matrices; None is 1 everywhere.
    `accumulation_bytes` > 0: the micro-batch's weight gradients are added into an accumulation buffer of that
    many bytes per element by a separate kernel per gradient tensor (Megatron-LM 2021's `main_grad.add_(grad)`
    hook, PyTorch autograd's AccumulateGrad): each reads the new gradient and reads and writes the buffer.
    `memory_format` "nchw" adds, on tensor cores (mixed precision, tf32 where the GPU has it), the layout
    transposes cuDNN runs around every convolution (layout_transposes_elems; one kernel per transposed tensor);
    "nhwc" takes away, on CUDA cores, the 3 x 3 convolutions' Winograd (runs_winograd); "native" (the default)
    is each unit's own layout, paying neither.
    A Transformer Engine recipe (`precision` fp8, mxfp8 or nvfp4, on a GPU that runs it) computes only the linear
    layers TE wraps in it, reading their quantized operands, and adds the quantize kernels around them
    (low_precision.cast_cost; `weight_cast_share`: the fraction of micro-batches that cast the weights); every
    other layer runs in bf16 (low_precision.layer_precision).
    """
    if memory_format not in MEMORY_FORMATS:
        raise ValueError(f"memory_format: got {memory_format!r}; expected one of {', '.join(MEMORY_FORMATS)}")
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise ValueError(f"batch: got {batch!r}; expected a positive integer")
    if efficiency_factors is not None:
        if len(efficiency_factors) != len(model.layers):
            raise ValueError(f"efficiency_factors: got {len(efficiency_factors)}; expected one per layer "
                             f"({len(model.layers)})")
        for f in efficiency_factors:
            _check_fraction("efficiency_factors[]", f)
    if isinstance(accumulation_bytes, bool) or not isinstance(accumulation_bytes, int) or accumulation_bytes < 0:
        raise ValueError(f"accumulation_bytes: got {accumulation_bytes!r}; expected a non-negative integer")
    p = _check_precision(precision)
    cal = calibration or _NO_CALIBRATION
    bw = memory_bandwidth_Bps(gpu, calibration)
    first = first_trainable_layer(model)
    # None: no recipe, or a GPU that falls back
    recipe = recipe_for(gpu.runs_as(p), cal.fp8_recipe) if p in RECIPES and gpu.runs_as(p) in RECIPES else None
    fp8_attention = recipe is not None and p == "fp8" and cal.fp8_attention
    out: list[LayerTime] = []
    for i, layer in enumerate(model.layers):
        # CUDA graphs capture every layer but a dropless MoE layer's experts: their token counts are known only at
        # run time (Megatron-Core's CUDA graphs leave them out unless the experts are padded to capacity)
        dynamic = layer.experts > 0 and (model.moe is None or model.moe.capacity_factor is None)
        launch = layer_kernel_overhead_s(calibration, graphed=not dynamic)
        lp = layer_precision(layer, p, fp8_attention)  # bf16 for what a recipe leaves out
        low = recipe is not None and lp == p and layer.params > 0  # a GEMM the recipe runs, its operands quantized
        peak = gpu.flops(lp)
        a, w = ACTIVATION_BYTES[lp], DTYPE_BYTES[lp]
        q = recipe.data_bytes if low else a  # bytes of a GEMM operand read from its quantized copy
        grad_w = HIGH_PRECISION_BYTES if low else w  # TE's wgrad GEMM writes the weight gradient in bf16
        cast = cast_cost(layer, batch, recipe, weight_cast_share) if low else None
        if fp8_attention and lp == p and layer.kind == "attention":  # TE's fp8_dpa: Q, K, V in, O out converted
            cast = attention_cast_cost(layer, batch, recipe)
        layout_p = gpu.runs_as(lp)  # the units that run the convolutions (tf32 without tf32: fp32, no transposes)
        eff = efficiency(layer.kind, gpu, lp, calibration)
        factor = efficiency_factors[i] if efficiency_factors is not None else 1.0
        eff *= factor
        flops = layer.fwd_flops * batch
        if runs_winograd(layer, memory_format, layout_p):  # on CUDA cores in NCHW: Winograd's saved multiplications
            flops /= WINOGRAD_SPEEDUP
        grouped = _GroupedGemm.of(model, layer)
        if layer.fwd_kernels:
            fwd = _kernels_s(layer.fwd_kernels, batch, layer.params * w, gpu, lp, calibration, factor, bw, launch,
                             grouped)
        else:
            fwd_bytes = batch * (layer.input_elems * q + layer.output_elems * a) + layer.params * w
            fwd = _roofline(flops, fwd_bytes, peak, eff, bw) + launch
        if cast is not None:  # quantize X and W before the forward GEMM
            fwd += cast.fwd_bytes / bw + cast.fwd_kernels * launch
        dgrad = i > first
        t_fwd, t_bwd = layout_transposes_elems(layer, memory_format, layout_p, dgrad)
        if t_fwd:  # each transpose reads and writes its tensor: 2 launches forward, 2 per backward call
            fwd += batch * t_fwd * a / bw + 2 * launch
        transposes_bwd = batch * t_bwd * a / bw + (4 if dgrad else 2) * launch if t_bwd else 0.0
        if i < first:
            out.append(LayerTime(fwd, 0.0))
            continue
        wgrad = layer.params > 0 and not layer.frozen  # a frozen layer (LoRA's base) computes no weight gradient
        accumulate = 0.0
        if accumulation_bytes and wgrad:
            accumulate = (layer.params * (grad_w + 2 * accumulation_bytes) / bw
                          + max(1, len(layer.grad_shapes)) * launch)
        accumulate += transposes_bwd  # (NCHW in mixed precision: the backward calls' layout transposes)
        if cast is not None:  # quantize dY before the dgrad and wgrad GEMMs
            accumulate += cast.bwd_bytes / bw + cast.bwd_kernels * launch
        if layer.bwd_kernels and dgrad:
            weights = layer.params * w * (1 + int(wgrad))
            out.append(LayerTime(fwd, _kernels_s(layer.bwd_kernels, batch, weights, gpu, lp, calibration, factor,
                                                 bw, launch, grouped) + accumulate))
            continue
        # bytes: read the output gradient and the saved activations (the quantized copies, for a recipe's GEMM),
        # write the input gradient (dgrad), read the weights (dgrad) and write their gradients (wgrad)
        bwd_bytes = batch * ((layer.output_elems + layer.saved_elems) * q + (layer.input_elems * a if dgrad else 0))
        bwd_bytes += layer.params * (w * int(dgrad) + grad_w * int(wgrad))
        if dgrad:  # input gradient + weight gradient; a frozen layer's input gradient only (1 x forward)
            bwd_flops = (1.0 if layer.frozen else 2.0) * flops
        else:
            bwd_flops = flops if wgrad else 0.0
        kernels = max(1, int(dgrad) + int(wgrad)) if layer.params else 1
        bwd = _roofline(bwd_flops, bwd_bytes, peak, eff, bw) + kernels * launch + accumulate
        out.append(LayerTime(fwd, bwd))
    return out


@dataclass(frozen=True)
class _GroupedGemm:
    """An expert layer's grouped GEMMs: `experts` GEMMs each of 1 / experts of the kernel's rows (balanced
    routing), all of them padded (or cut) to `capacity` x the routed rows when the model has a capacity factor."""

    experts: int
    capacity: float

    @staticmethod
    def of(model: ModelSpec, layer) -> "_GroupedGemm | None":
        if not layer.experts:
            return None
        cf = model.moe.capacity_factor if model.moe is not None else None
        return _GroupedGemm(layer.experts, 1.0 if cf is None else float(cf))


def _kernels_s(kernels, batch: int, weight_bytes: float, gpu: GpuSpec, precision: str,
               calibration: ComputeCalibration | None, gemm_factor: float, bw: float, launch: float,
               grouped: _GroupedGemm | None = None) -> float:
    """A layer run as a sequence of kernels: each on its own roofline plus a launch. The layer's weights (and
    weight gradients) are charged to its matmul kernels in proportion to their FLOPs (each GEMM reads its own
    weight: 2 FLOPs per weight per row), to the first kernel when it has none. `gemm_factor` (tensor
    parallelism's shrink) applies to the matmul-like kernels only; an expert layer's GEMMs (`grouped`) also run
    at grouped_gemm_factor, and with a capacity factor its GEMMs and activation on capacity x the routed rows."""
    peak = gpu.flops(precision)
    a = ACTIVATION_BYTES[precision]
    gemm_flops = math.fsum(k.flops for k in kernels if k.kind in GEMM_KINDS) if weight_bytes else 0.0
    total = 0.0
    for j, k in enumerate(kernels):
        eff = efficiency(k.kind, gpu, precision, calibration) * (gemm_factor if k.kind in GEMM_KINDS else 1.0)
        flops, elems = k.flops * batch, k.elems
        if grouped is not None and k.kind in ("expert", "activation"):
            flops, elems = flops * grouped.capacity, elems * grouped.capacity
            if k.kind == "expert":
                eff *= grouped_gemm_factor(flops, grouped.experts, gpu, precision, calibration)
        if gemm_flops > 0:
            weights = weight_bytes * k.flops / gemm_flops if k.kind in GEMM_KINDS else 0.0
        else:
            weights = weight_bytes if j == 0 else 0.0
        moved = batch * (elems * a + k.mask_bytes) + weights
        total += _roofline(flops, moved, peak, eff, bw) + launch
    return total


def forward_backward_s(times: Sequence[LayerTime]) -> tuple[float, float]:
    """(total forward, total backward) of a list of layer times."""
    return math.fsum(t.fwd_s for t in times), math.fsum(t.bwd_s for t in times)


def optimizer_step_time(params: int, gpu: GpuSpec, optimizer: str, precision: str, grad_dtype: str = "fp32",
                        calibration: ComputeCalibration | None = None, kernels: str = "fused") -> float:
    """Time of one optimizer step over `params` parameters: a memory-bound streaming update.

    Fused (`kernels`): per parameter it reads the fp32 master weight and the gradient, reads and writes each
    fp32 state (momentum: 1, Adam: 2), writes the master weight back and, in mixed precision, the
    low-precision copy. Unfused: every elementwise op of the update is its own pass (UNFUSED_OPTIMIZER_ELEMENTS).
    """
    opt = str(optimizer)
    if opt not in OPTIMIZER_STATES:
        raise ValueError(f"optimizer: got {optimizer!r}; expected one of {', '.join(OPTIMIZER_STATES)}")
    per_param = optimizer_bytes_per_param(opt, precision, grad_dtype, kernels)
    if params < 0:
        raise ValueError(f"params: got {params!r}; expected >= 0")
    if params == 0:
        return 0.0
    bytes_moved = params * per_param
    flops = params * OPTIMIZER_FLOPS_PER_PARAM[opt]
    t = max(flops / gpu.flops("fp32"), bytes_moved / memory_bandwidth_Bps(gpu, calibration))
    return t + launch_overhead_s(calibration)


def optimizer_bytes_per_param(optimizer: str, precision: str, grad_dtype: str = "fp32", kernels: str = "fused") -> int:
    """Bytes of HBM traffic per parameter in one optimizer step (the figure optimizer_step_time streams):
    one fused pass, or (kernels "unfused") every elementwise op's reads and writes."""
    p, g = _check_precision(precision), _check_precision(grad_dtype)
    if str(optimizer) not in OPTIMIZER_STATES:
        raise ValueError(f"optimizer: got {optimizer!r}; expected one of {', '.join(OPTIMIZER_STATES)}")
    low_copy = DTYPE_BYTES[p] if p in MIXED_PRECISIONS else 0  # the compute-precision copy of the weights
    if str(kernels) == "unfused":
        fp32_elements, grad_reads = UNFUSED_OPTIMIZER_ELEMENTS[str(optimizer)]
        return 4 * fp32_elements + DTYPE_BYTES[g] * grad_reads + (4 + low_copy if low_copy else 0)
    if str(kernels) != "fused":
        raise ValueError(f"kernels: got {kernels!r}; expected fused or unfused")
    second_pass = SECOND_PASS_BYTES.get(str(optimizer), 0)
    return 4 + DTYPE_BYTES[g] + 8 * OPTIMIZER_STATES[str(optimizer)] + 4 + low_copy + second_pass


# Passes over the gradients (each a read, or a write, of every element at grad_dtype) per application:
#   clipping by global norm: read all (the squared norms), then read and write all (the scale)    -> 3
#   dynamic loss scaling: unscale and check for inf/NaN. Fused (PyTorch's
#   _amp_foreach_non_finite_check_and_unscale_): read and write -> 2; as tensor ops (TensorFlow's
#   LossScaleOptimizer: a divide, then is_finite and reduce_all): read, write, read            -> 3
GRAD_CLIP_PASSES = 3
LOSS_SCALE_PASSES = {"fused": 2, "unfused": 3}


def grad_processing_time(params: int, gpu: GpuSpec, clipping: str, loss_scaling: str, grad_dtype: str = "fp32",
                         kernels: str = "fused", calibration: ComputeCalibration | None = None) -> float:
    """Time of one application of gradient clipping and loss-scale unscaling over `params` gradients: streaming
    passes over HBM (GRAD_CLIP_PASSES, LOSS_SCALE_PASSES), one launch each; 0 when neither is on."""
    if str(clipping) not in ("none", "global_norm"):
        raise ValueError(f"clipping: got {clipping!r}; expected none or global_norm")
    if str(loss_scaling) not in ("none", "dynamic"):
        raise ValueError(f"loss_scaling: got {loss_scaling!r}; expected none or dynamic")
    if str(kernels) not in LOSS_SCALE_PASSES:
        raise ValueError(f"kernels: got {kernels!r}; expected fused or unfused")
    if params < 0:
        raise ValueError(f"params: got {params!r}; expected >= 0")
    passes = (GRAD_CLIP_PASSES if str(clipping) == "global_norm" else 0) + \
        (LOSS_SCALE_PASSES[str(kernels)] if str(loss_scaling) == "dynamic" else 0)
    if not passes or params == 0:
        return 0.0
    moved = params * DTYPE_BYTES[_check_precision(grad_dtype)] * passes
    return moved / memory_bandwidth_Bps(gpu, calibration) + passes * launch_overhead_s(calibration)


def comm_slowdown(node_group_gpus: Sequence[GpuSpec], classes) -> "Callable[[int, str], float] | None":
    """Compute-communication interference of rank classes, for the executor and the fold:
    `slowdown(class index, collective op)` from each class's GPU (`GpuSpec.comm_interference`, by its
    node group); None when no GPU of these classes has any (no cost, results as without interference)."""
    table = {rc.index: node_group_gpus[rc.node_group] for rc in classes}
    if not any(g.comm_interference and any(v > 0 for v in g.comm_interference.values()) for g in table.values()):
        return None
    cache: dict[tuple[int, str], float] = {}

    def slowdown(index: int, op: str) -> float:
        key = (index, op)
        if key not in cache:
            gpu = table.get(index)
            cache[key] = gpu.interference(op) if gpu is not None else 0.0
        return cache[key]

    return slowdown
