"""Transformer Engine's low-precision recipes: which GEMMs run in fp8, mxfp8 or nvfp4, and what the quantize
kernels around those GEMMs read and write (compute.layer_times adds them to each low-precision linear layer).

Transformer Engine (TE) runs a recipe inside its own modules only: the transformer blocks' linear layers
(te.Linear, LayerNormLinear, LayerNormMLP). Attention runs in bf16 unless FP8 attention is asked for (not
modelled), and so do Megatron-Core's embedding and output layer (plain tensor-parallel layers, not TE modules)
and every elementwise kernel; tensors between layers stay bf16. Before each low-precision GEMM, TE quantizes its
operands: the input X and the weight W in forward, the output gradient dY in backward. Each is written twice,
rowwise for the GEMM that reads it as it is and columnwise (transposed) for the GEMM that reads its transpose
(fprop: X and W; dgrad: dY and W^T; wgrad: X^T and dY^T), as TE's cast_transpose and quantize kernels do.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

HIGH_PRECISION = "bf16"  # what a TE run computes everything else in
HIGH_PRECISION_BYTES = 2
COPIES = 2  # rowwise and columnwise


@dataclass(frozen=True)
class CastRecipe:
    """How one recipe quantizes a bf16 tensor: data bytes per element, a scale per `block` elements (None: one
    per tensor), and whether a separate pass reads the tensor for its amax before the quantize kernel."""

    precision: str
    data_bytes: float
    block: int | None
    scale_bytes: float
    amax_pass: bool
    source: str

    @property
    def written_bytes_per_elem(self) -> float:
        """Bytes the quantize kernel writes per input element: both copies, each with its block scales."""
        scales = self.scale_bytes / self.block if self.block else 0.0
        return COPIES * (self.data_bytes + scales)

    @property
    def read_bytes_per_elem(self) -> float:
        """Bytes read per input element: the bf16 tensor, twice when the amax is a pass of its own."""
        return HIGH_PRECISION_BYTES * (2 if self.amax_pass else 1)

    @property
    def kernels_per_tensor(self) -> int:
        return 2 if self.amax_pass else 1


RECIPES: dict[str, CastRecipe] = {
    "fp8": CastRecipe("fp8", 1.0, None, 0.0, False,
                      "TE DelayedScaling (its default recipe): one scale per tensor from the amax history of earlier "
                      "steps, so the amax is taken inside the cast_transpose kernel that writes the E4M3 tensor "
                      "and its transpose"),
    "mxfp8": CastRecipe("mxfp8", 1.0, 32, 1.0, False,
                        "TE MXFP8BlockScaling (Blackwell): E4M3 data with one E8M0 scale per 32 consecutive "
                        "elements, rowwise and columnwise each with their own scales, found inside the quantize "
                        "kernel"),
    "nvfp4": CastRecipe("nvfp4", 0.5, 16, 1.0, True,
                        "TE NVFP4BlockScaling (Blackwell): E2M1 data, one E4M3 scale per 16 elements and a "
                        "per-tensor fp32 scale from the tensor's amax, which a pass before the quantize kernel "
                        "reads"),
}
# TE's Float8CurrentScaling: one scale per tensor from the tensor's own amax, taken just before the cast, so a
# kernel reads the bf16 tensor for its amax and the cast_transpose reads it again (TE's compute_amax, then
# quantize with the scale it gives)
FP8_CURRENT = CastRecipe("fp8", 1.0, None, 0.0, True,
                         "TE Float8CurrentScaling: one scale per tensor from its own amax, taken by a pass over the "
                         "bf16 tensor before the cast_transpose kernel")
# TE's Float8BlockScaling (DeepSeek-V3's recipe on Hopper): E4M3 data with an fp32 scale per 1 x 128 block of
# activations and gradients and per 128 x 128 block of weights, each block's amax found inside the quantize kernel;
# charged here at one scale per 128 elements for every tensor (the weights' 128 x 128 blocks need 128 x fewer)
FP8_BLOCKWISE = CastRecipe("fp8", 1.0, 128, 4.0, False,
                           "TE Float8BlockScaling: an fp32 scale per 1 x 128 block of activations and gradients and "
                           "per 128 x 128 block of weights (DeepSeek-V3's FP8 training), the amax taken per block "
                           "inside the quantize kernel")
FP8_RECIPES = ("delayed", "current", "blockwise")  # workload.fp8_recipe
LOW_PRECISION_GEMMS = frozenset(RECIPES)
# Layer kinds TE runs in a recipe: linear layers, and the experts' grouped GEMMs (TE's GroupedLinear, which
# Megatron-Core's TEGroupedMLP runs under the same fp8_autocast)
TE_GEMM_KINDS = frozenset({"linear", "expert"})


def recipe_for(precision: str, fp8_recipe: str = "delayed") -> CastRecipe | None:
    """The recipe that quantizes `precision`'s GEMM operands (None: no recipe): fp8 with delayed (TE's default),
    current or blockwise scaling, mxfp8, nvfp4."""
    if fp8_recipe not in FP8_RECIPES:
        raise ValueError(f"fp8_recipe: got {fp8_recipe!r}; expected one of {', '.join(FP8_RECIPES)}")
    if precision == "fp8" and fp8_recipe == "current":
        return FP8_CURRENT
    if precision == "fp8" and fp8_recipe == "blockwise":
        return FP8_BLOCKWISE
    return RECIPES.get(precision)


def layer_precision(layer, precision: str, fp8_attention: bool = False) -> str:
    """The precision a layer's kernels compute in under `precision`: a recipe's own for the linear layers TE wraps
    (not those marked high_precision: the output layer), and for the attention core under fp8 with
    `fp8_attention` (TE's fp8_dpa); bf16 for every other layer; `precision` itself when it is no recipe."""
    if precision == "fp8" and fp8_attention and layer.kind == "attention":
        return precision
    if precision in RECIPES and not (layer.kind in TE_GEMM_KINDS and not layer.high_precision):
        return HIGH_PRECISION
    return precision


def weight_shapes(layer) -> list[tuple[int, ...]]:
    """A layer's weight matrices: gradient tensors of two or more dimensions, three for an expert layer's (one
    matrix per expert); the rest are biases and norm weights, which are not cast."""
    dims = 3 if layer.experts else 2
    return [shape for shape in layer.grad_shapes if len(shape) >= dims]


def weight_elems(layer) -> int:
    """Elements of a layer's weight matrices (weight_shapes; biases are not cast)."""
    return sum(math.prod(shape) for shape in weight_shapes(layer))


def gemm_operand_elems(layer) -> tuple[float, float]:
    """Per sample, the elements of the GEMM inputs X and output gradients dY the recipe quantizes in one layer.

    A plain linear layer: its input and output. A layer run as several GEMM kernels (an MoE layer's experts, its
    shared experts) quantizes each GEMM's own input and output gradient: with weights of (out, in) per expert
    (the last two dimensions of each weight tensor) and rows = forward GEMM FLOPs / (2 x weights per expert),
    X = rows x sum(in) and dY = rows x sum(out)."""
    gemm = [k for k in layer.fwd_kernels if k.kind in TE_GEMM_KINDS]
    if not gemm:
        return layer.input_elems, layer.output_elems
    shapes = [s[-2:] for s in weight_shapes(layer)]
    per_copy = sum(o * i for o, i in shapes)
    rows = math.fsum(k.flops for k in gemm) / (2.0 * per_copy)
    return rows * sum(i for _, i in shapes), rows * sum(o for o, _ in shapes)


@dataclass(frozen=True)
class CastCost:
    """Bytes the quantize kernels of one linear layer move per micro-batch, and how many kernels they launch."""

    fwd_bytes: float
    bwd_bytes: float
    fwd_kernels: float
    bwd_kernels: float


def cast_cost(layer, batch: int, recipe: CastRecipe, weight_cast_share: float = 1.0) -> CastCost:
    """The quantize kernels around one low-precision linear layer for a `batch`-sample micro-batch.

    Forward: the input X (batch x input_elems) and the weight W; backward: the output gradient dY (batch x
    output_elems). Each tensor is read in bf16 (twice with a separate amax pass) and written as two quantized
    copies. `weight_cast_share` is the fraction of micro-batches that cast the weights: TE caches the quantized
    weights from a step's first micro-batch (is_first_microbatch), so 1 / micro-batches per step under gradient
    accumulation, 1 without.
    """
    if not 0.0 <= weight_cast_share <= 1.0:
        raise ValueError(f"weight_cast_share: got {weight_cast_share!r}; expected a fraction in [0, 1]")
    per_elem = recipe.read_bytes_per_elem + recipe.written_bytes_per_elem
    x, dy = gemm_operand_elems(layer)
    x, dy, w = batch * x, batch * dy, weight_elems(layer)
    k = recipe.kernels_per_tensor
    return CastCost(fwd_bytes=(x + weight_cast_share * w) * per_elem, bwd_bytes=dy * per_elem,
                    fwd_kernels=k * (1 + weight_cast_share), bwd_kernels=float(k))


def attention_cast_cost(layer, batch: int, recipe: CastRecipe) -> CastCost:
    """FP8 attention's conversions around one attention core (TE's fp8_dpa with cuDNN's FP8 fused attention): Q, K
    and V (the layer's input) quantized to fp8 before it and its fp8 output converted to bf16 after; in backward
    the output gradient quantized and the fp8 dQ, dK, dV converted to bf16. A quantize reads bf16 (twice with an
    amax pass) and writes one fp8 copy (no transpose: the fused kernel reads both layouts); a conversion reads fp8
    and writes bf16. Two kernels each way."""
    quantize = recipe.read_bytes_per_elem + recipe.data_bytes
    convert = recipe.data_bytes + HIGH_PRECISION_BYTES
    qkv, o = batch * layer.input_elems, batch * layer.output_elems
    k = recipe.kernels_per_tensor
    return CastCost(fwd_bytes=qkv * quantize + o * convert, bwd_bytes=o * quantize + qkv * convert,
                    fwd_kernels=float(k + 1), bwd_kernels=float(k + 1))


# Precisions whose parameters Megatron's --fp8-param-gather can gather quantized (Transformer Engine's
# Float8Tensor and MXFP8Tensor parameters; NVFP4 weights are gathered in bf16)
FP8_PARAM_GATHER_PRECISIONS = frozenset({"fp8", "mxfp8"})


def gathered_param_bytes(run_precision: str, fp8_param_gather: bool = False) -> float:
    """Bytes per parameter of a parameter all-gather (ZeRO-3/FSDP before each unit, the distributed optimizer's
    and ZeRO-1/2's after the step), at the precision the GPU runs (GpuSpec.runs_as): fp32 training gathers fp32;
    mixed precision gathers the 16-bit model weights, also under an fp8 or nvfp4 recipe, since Transformer
    Engine quantizes each GEMM's weight after the gather; with `fp8_param_gather` (Megatron's
    --fp8-param-gather, fp8 and mxfp8 only: io.rules_precision refuses it elsewhere) the parameters are kept and
    gathered in fp8, 1 byte each."""
    if fp8_param_gather and run_precision in FP8_PARAM_GATHER_PRECISIONS:
        return 1.0
    if run_precision in ("fp16", "bf16") or run_precision in LOW_PRECISION_GEMMS:
        return float(HIGH_PRECISION_BYTES)
    return 4.0
