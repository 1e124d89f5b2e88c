"""Per-GPU memory estimate: weights, gradients, optimizer states, activations, buffers, workspace.

Mixed precision follows the ZeRO paper's accounting (Rajbhandari et al. 2020, section 3.1): a low-precision
copy of the weights, gradients in `grad_dtype`, and an fp32 master copy plus fp32 optimizer states, so Adam
with fp16 weights and gradients costs 2 + 2 + (4 + 4 + 4) = 16 bytes per parameter. ZeRO stage 1/2/3 shards
optimizer states / + gradients / + weights over the dp ranks. Model-parallel runs add transformer activations
per layer derived from what each block saves for backward, as Korthikanti et al. 2022 count it (tp, sequence
parallelism, recomputation; flash attention, grouped-query attention, gated MLPs and Transformer Engine's
quantized GEMM inputs), and the micro-batches a pipeline schedule keeps in flight. Under a Transformer Engine
recipe the weights stay in bf16 beside their cached quantized copies. Formulas and sources: docs/model-parallel.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from simdist.compute import ACTIVATION_BYTES, DTYPE_BYTES, MIXED_PRECISIONS, OPTIMIZER_STATES
from simdist.errors import InfeasibleError
from simdist.hardware.specs import GpuSpec
from simdist.low_precision import COPIES, HIGH_PRECISION_BYTES, RECIPES, layer_precision
from simdist.scenario import PipelineSchedule, Recompute
from simdist.units import format_memory
from simdist.workload.lora import frozen_param_count, trainable_param_count
from simdist.workload.specs import ModelSpec

# CUDA context, cuBLAS/cuDNN workspaces and allocator fragmentation reserve, per GPU.
FRAMEWORK_RESERVE_BYTES = 1.0e9
FP32_MASTER_BYTES = 4
FP32_STATE_BYTES = 4


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak bytes one GPU needs, by part, against the GPU's capacity."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_states_bytes: float  # incl. the fp32 master weights in mixed precision
    activations_bytes: float
    buffers_bytes: float  # communication buckets, compression error-feedback (given by the caller)
    workspace_bytes: float  # framework reserve + the largest layer's transient input and output
    capacity_bytes: float
    gpu: str = ""

    @property
    def total_bytes(self) -> float:
        return math.fsum((self.weights_bytes, self.gradients_bytes, self.optimizer_states_bytes,
                          self.activations_bytes, self.buffers_bytes, self.workspace_bytes))

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    @property
    def parts_bytes(self) -> dict[str, float]:
        """Part name (weights, gradients, optimizer_states, activations, buffers, workspace) -> bytes."""
        return {"weights": self.weights_bytes, "gradients": self.gradients_bytes,
                "optimizer_states": self.optimizer_states_bytes, "activations": self.activations_bytes,
                "buffers": self.buffers_bytes, "workspace": self.workspace_bytes}

    def parts(self) -> dict[str, float]:
        """The same as parts_bytes (kept for callers that prefer a method)."""
        return self.parts_bytes

    def describe(self) -> str:
        """'needs 2.8 TB per GPU (weights 349 GB, ...), the v100 has 16 GB'."""
        parts = ", ".join(f"{k.replace('_', ' ')} {format_memory(v)}" for k, v in self.parts_bytes.items() if v > 0)
        return f"needs {format_memory(self.total_bytes)} per GPU ({parts}), the {self.gpu or 'GPU'} has {format_memory(self.capacity_bytes)}"


def _dtype(label: str, value: str) -> str:
    v = str(value)
    if v not in DTYPE_BYTES:
        raise ValueError(f"{label}: got {value!r}; expected one of {', '.join(DTYPE_BYTES)}")
    return v


def model_state_bytes(params: float, precision: str, optimizer: str, grad_dtype: str = "fp32", zero: int = 0,
                      dp: int = 1, quantized_copy_bytes: float = 0.0,
                      frozen_params: float = 0.0) -> tuple[float, float, float]:
    """(weights, gradients, optimizer states incl. fp32 master) bytes of `params` trainable parameters and
    `frozen_params` frozen ones (LoRA's base: weights in the compute dtype only, no master copy, gradient or
    optimizer state; simdist.workload.lora) on one GPU.

    Under a Transformer Engine recipe (fp8, mxfp8, nvfp4; `precision` as the GPU runs it) the model's weights
    stay bf16 and TE caches the quantized copies of its GEMMs' weights across micro-batches
    (`quantized_copy_bytes`, from quantized_copy_bytes()). Under ZeRO-3 a unit's copies are cast from its
    gathered weights and freed with them: none kept."""
    p, g, opt = _dtype("precision", precision), _dtype("grad_dtype", grad_dtype), str(optimizer)
    if opt not in OPTIMIZER_STATES:
        raise ValueError(f"optimizer: got {optimizer!r}; expected one of {', '.join(OPTIMIZER_STATES)}")
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"zero: got {zero!r}; expected 0, 1, 2 or 3")
    if not quantized_copy_bytes >= 0:
        raise ValueError(f"quantized_copy_bytes: got {quantized_copy_bytes!r}; expected >= 0")
    if not frozen_params >= 0:
        raise ValueError(f"frozen_params: got {frozen_params!r}; expected >= 0")
    mixed = p in MIXED_PRECISIONS
    recipe = RECIPES.get(p)
    weights = (params + frozen_params) * (HIGH_PRECISION_BYTES if recipe else DTYPE_BYTES[p] if mixed
                                          else FP32_MASTER_BYTES)
    if recipe is not None and zero < 3:
        weights += quantized_copy_bytes
    grads = params * DTYPE_BYTES[g]
    states = params * (FP32_STATE_BYTES * OPTIMIZER_STATES[opt] + (FP32_MASTER_BYTES if mixed else 0))
    if zero >= 1:
        states /= dp
    if zero >= 2:
        grads /= dp
    if zero >= 3:
        weights /= dp
    return float(weights), float(grads), float(states)


def estimate_memory(model: ModelSpec, gpu: GpuSpec, batch_per_gpu: int, precision: str, optimizer: str,
                    grad_dtype: str = "fp32", zero: int = 0, dp: int = 1,
                    extra_buffer_bytes: float = 0.0) -> MemoryEstimate:
    """Peak memory of one data-parallel rank training `model` with `batch_per_gpu` samples per step.

    Activations are every layer's saved elements x batch x activation bytes (all kept until backward,
    no recomputation); the workspace adds the largest layer's live input and output on top of a reserve.
    """
    p = _dtype("precision", precision)
    g = _dtype("grad_dtype", grad_dtype)
    opt = str(optimizer)
    if opt not in OPTIMIZER_STATES:
        raise ValueError(f"optimizer: got {optimizer!r}; expected one of {', '.join(OPTIMIZER_STATES)}")
    if not isinstance(batch_per_gpu, int) or isinstance(batch_per_gpu, bool) or batch_per_gpu < 1:
        raise ValueError(f"batch_per_gpu: got {batch_per_gpu!r}; expected a positive integer")
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"zero: got {zero!r}; expected 0, 1, 2 or 3")
    if not isinstance(dp, int) or dp < 1:
        raise ValueError(f"dp: got {dp!r}; expected a positive integer")
    if extra_buffer_bytes < 0:
        raise ValueError(f"extra_buffer_bytes: got {extra_buffer_bytes!r}; expected >= 0")
    run = gpu.runs_as(p)  # fp8 without fp8 units computes (and keeps its weights) in fp16
    weights, grads, states = model_state_bytes(trainable_param_count(model), run, opt, g, zero, dp,
                                               quantized_copy_bytes(model.layers, run, gpu), frozen_param_count(model))
    a = ACTIVATION_BYTES[p]
    activations = math.fsum(layer.saved_elems for layer in model.layers) * batch_per_gpu * a
    live = max((layer.input_elems + layer.output_elems for layer in model.layers), default=0.0)
    workspace = FRAMEWORK_RESERVE_BYTES + live * batch_per_gpu * a
    return MemoryEstimate(float(weights), float(grads), float(states), activations, float(extra_buffer_bytes),
                          workspace, gpu.memory_bytes, gpu.key)


def check_fits(estimate: MemoryEstimate) -> MemoryEstimate:
    """Return the estimate when it fits, else raise InfeasibleError naming the figures."""
    if not estimate.fits:
        raise InfeasibleError(f"does not fit in GPU memory: {estimate.describe()}")
    return estimate


# ----------------------------------------------------------------------------- model parallelism


def quantized_copy_bytes(layers, precision: str, gpu: GpuSpec) -> float:
    """Bytes of the quantized weight copies Transformer Engine caches for these layers' recipe GEMMs (`precision`
    as the GPU runs it; 0 without a recipe): a rowwise copy for fprop and a columnwise one for dgrad, each with
    its block scales. A per-tensor-scaled fp8 weight keeps the rowwise copy only where cuBLAS takes FP8 GEMMs in
    any layout (compute capability 10, the Blackwell GPUs: those with mxfp8 units; TE's
    is_non_tn_fp8_gemm_supported); block-scaled recipes scale rows and columns apart and keep both."""
    recipe = RECIPES.get(precision)
    if recipe is None:
        return 0.0
    params = sum(x.params for x in layers if x.params and layer_precision(x, precision) == precision)
    per_param = recipe.written_bytes_per_elem
    if recipe.block is None and "mxfp8" in gpu.peak_flops:
        per_param /= COPIES
    return float(params * per_param)


def saved_gemm_input_bytes(precision: str, activation_bytes: float) -> float:
    """Bytes per element of a linear layer's input saved for its weight-gradient GEMM: the recipe's columnwise
    quantized copy with its block scales (TE saves no other), else the activation itself."""
    recipe = RECIPES.get(precision)
    return recipe.written_bytes_per_elem / COPIES if recipe else float(activation_bytes)


@dataclass(frozen=True)
class TransformerShape:
    """One transformer block as the activation formula needs it. The defaults are Korthikanti et al.'s GPT block:
    multi-head attention, a GELU MLP of 4 x hidden, dropout after attention and MLP and on the attention
    probabilities, no flash attention."""

    hidden: int
    heads: int
    seq_len: int
    kv_heads: int | None = None  # None: heads; fewer: grouped-query attention
    ffn_hidden: int | None = None  # None: 4 x hidden
    mlp: str = "gelu"  # gelu | squared_relu (one up projection) | swiglu (gate and up projections)
    dropout: bool = True
    flash_attention: bool = False
    cp: int = 1  # context-parallel ranks the sequence is split over: each holds seq_len / cp tokens
    # the attention's widths per token over all heads, where they are not heads x hidden / heads (None: that):
    q_width: int | None = None  # Q: heads x the query head width (Qwen3: 64 x 128 with hidden 4096)
    k_width: int | None = None  # K: kv_heads x the key head width (MLA: heads x (no-RoPE + RoPE) width)
    v_width: int | None = None  # V: kv_heads x the value head width
    out_width: int | None = None  # the core's output, the projection's input: heads x the value head width
    latent_width: int = 0  # MLA's compressed query and key/value latents (q_lora_rank + kv_lora_rank)
    routed_ffn: int = 0  # a MoE block's routed experts' activation width per token (top_k x expert ffn); 0: dense
    shared_ffn: int = 0  # a MoE block's shared experts' width per token (shared experts x expert ffn); 0: none

    def __post_init__(self):
        if self.mlp not in ("gelu", "squared_relu", "swiglu"):
            raise ValueError(f"mlp: got {self.mlp!r}; expected gelu, squared_relu or swiglu")
        if not (isinstance(self.cp, int) and self.cp >= 1 and self.seq_len % self.cp == 0):
            raise ValueError(f"cp: got {self.cp!r}; expected a positive divisor of seq_len {self.seq_len}")

    def widths(self) -> tuple[float, float, float, float]:
        """(Q, K, V, output) elements per token over all heads: hidden for Q and the output and hidden x kv_heads /
        heads for K and V unless the block gives its own widths (a head wider than hidden / heads, MLA)."""
        kv = self.hidden * (self.kv_heads or self.heads) / self.heads
        q = self.hidden if self.q_width is None else self.q_width
        return (q, kv if self.k_width is None else self.k_width, kv if self.v_width is None else self.v_width,
                q if self.out_width is None else self.out_width)


@dataclass(frozen=True)
class BlockActivations:
    """Bytes one transformer block saves for backward on one tp rank, by when recomputation drops them."""

    kept_bytes: float  # saved unless the whole layer is recomputed
    core_bytes: float  # the attention core's own (scores, softmax, dropout; flash: log-sum-exp), dropped by selective
    input_bytes: float  # the layer's input: all that full recomputation keeps
    # parts of kept_bytes that Megatron-Core's recompute_modules drop (selective with the module listed):
    norm_out_bytes: float = 0.0  # layernorm: the two norms' outputs, as the QKV and first MLP projections save them
    qkv_bytes: float = 0.0  # mla_up_proj: Q, K and V, the up projections' outputs the attention core saves
    mlp_bytes: float = 0.0  # mlp: the dense MLP's inside (activation inputs, down projection input); moe: a MoE
    # block's (its routed and shared experts', f = (top_k + shared experts) x expert ffn)
    moe_act_bytes: float = 0.0  # moe_act: the routed experts' activation outputs (their down projections' inputs)
    shared_mlp_bytes: float = 0.0  # shared_experts: the shared experts' SwiGLU inputs and down projection's input

    def under(self, recompute: "Recompute | str", modules: tuple[str, ...] = ("core_attn",),
              dense_mlp: bool = True) -> float:
        """Bytes kept under `recompute`; selective drops each listed module's tensors (`mlp` only in a block
        with a dense MLP, `dense_mlp`; `shared_experts` and `moe` only in one without: `moe` the whole MoE layer's
        inside, which holds moe_act's and shared_experts' tensors, dropped once)."""
        rc = Recompute(recompute)
        if rc is Recompute.FULL:
            return self.input_bytes
        if rc is not Recompute.SELECTIVE:
            return self.kept_bytes + self.core_bytes
        dropped = {"layernorm": self.norm_out_bytes, "mla_up_proj": self.qkv_bytes,
                   "mlp": self.mlp_bytes if dense_mlp else 0.0, "moe_act": self.moe_act_bytes,
                   "shared_experts": 0.0 if dense_mlp else self.shared_mlp_bytes,
                   "moe": 0.0 if dense_mlp else self.mlp_bytes}
        if "moe" in modules and not dense_mlp:  # the checkpointed MoE layer keeps its input only
            dropped["moe_act"] = dropped["shared_experts"] = 0.0
        kept = self.kept_bytes - math.fsum(dropped[m] for m in dict.fromkeys(modules) if m != "core_attn")
        return kept + (0.0 if "core_attn" in modules else self.core_bytes)


def block_activations(shape: TransformerShape, micro_batch: int, tp: int = 1, sequence_parallel: bool = False,
                      activation_bytes: float = 2, gemm_input_bytes: float | None = None) -> BlockActivations:
    """What one block saves for backward on one tp rank, tensor by tensor (Korthikanti et al. 2022, section 4.1).

    Per token, in elements of A = `activation_bytes`, q = `gemm_input_bytes` (a linear layer's saved input; A
    unless a TE recipe saves it quantized) and 1-byte dropout masks: the two norms' inputs (2A h), the QKV and
    first MLP projections' inputs (2q h), the dropout masks after attention and MLP (2h), and MLA's latents l
    (their norms' and up projections' inputs, (A + q) l: Megatron-Core's down projections are duplicated, not
    split); these are whole on every tp rank, sequence-sharded (/t) with sequence parallelism. Split over tp
    (/t): Q, K, V (A (w_q + w_k + w_v), shape.widths(): A h (1 + 2 kv/a) when a head is h / a wide), the
    attention output as the projection's input (q w_o), the MLP activation's inputs (A f; SwiGLU's gate and up
    2A f) and the down projection's input (q f), of which a MoE block's shared experts hold f_s (2A + q) (f_s: their
    width, `shape.shared_ffn`; dropped by the shared_experts module). The attention core adds, /t: without flash attention the
    softmax output (A as), its dropout mask and output (as (1 + A)); with flash attention the fp32 log-sum-exp
    (4a) and, where the projection saved a quantized copy, the bf16 output the kernel's backward reads (A w_o).
    GPT (A = q = 2, f = 4h, dropout) gives sbh (34 + 5as/h), Korthikanti's Table 2. Context parallelism
    (`shape.cp`) leaves each rank s / cp of the sequence's tokens (Megatron-Core splits the sequence), so every
    per-token term divides by cp; the s x s core keeps its rows of s / cp queries against all s keys.
    """
    s, b, h, a, t = shape.seq_len, micro_batch, shape.hidden, shape.heads, tp
    f = shape.ffn_hidden or 4 * h
    A = float(activation_bytes)
    q = A if gemm_input_bytes is None else float(gemm_input_bytes)
    mask = 1.0 if shape.dropout else 0.0
    tokens = s // shape.cp * b
    wq, wk, wv, wo = shape.widths()
    # norm inputs, QKV and MLP inputs, dropout masks; MLA's latents
    whole = tokens * (h * (2 * A + 2 * q + 2 * mask) + shape.latent_width * (A + q))
    split = tokens * (A * (wq + wk + wv) + wo * q + f * (A * (2 if shape.mlp == "swiglu" else 1) + q))
    if shape.flash_attention:
        core = tokens * (4.0 * a + (wo * A if q != A else 0.0))
    else:
        core = tokens * a * s * (A + (1 + A) * mask)
    per_rank = 1 / t if sequence_parallel else 1.0
    mlp = tokens * f * (A * (2 if shape.mlp == "swiglu" else 1) + q)
    return BlockActivations(kept_bytes=whole * per_rank + split / t, core_bytes=core / t,
                            input_bytes=tokens * h * A * per_rank, norm_out_bytes=tokens * 2 * q * h * per_rank,
                            qkv_bytes=tokens * A * (wq + wk + wv) / t, mlp_bytes=mlp / t,
                            moe_act_bytes=tokens * shape.routed_ffn * q / t,
                            shared_mlp_bytes=tokens * shape.shared_ffn * (2 * A + q) / t)


def layer_activation_bytes(shape: TransformerShape, micro_batch: int, tp: int = 1, sequence_parallel: bool = False,
                           recompute: "Recompute | str" = Recompute.NONE, activation_bytes: float = 2,
                           gemm_input_bytes: float | None = None, modules: tuple[str, ...] = ("core_attn",),
                           dense_mlp: bool = True) -> float:
    """Activation bytes one transformer layer keeps for backward on one tp rank (block_activations).

    GPT block, 16-bit (Korthikanti et al. 2022, Table 2): none sbh(10 + 24/t + 5as/(ht)), or sbh/t (34 + 5as/h)
    with sequence parallelism; selective (attention core recomputed) sbh(10 + 24/t), or 34sbh/t; full (layer
    input only) 2sbh, or 2sbh/t with sequence parallelism. Flash attention stores no s x s tensor: its core
    keeps 4a bytes per token (the fp32 log-sum-exp) instead of 5as. Selective with Megatron-Core's `modules`
    drops each one's tensors (BlockActivations.under).
    """
    return block_activations(shape, micro_batch, tp, sequence_parallel, activation_bytes,
                             gemm_input_bytes).under(recompute, modules, dense_mlp)


def in_flight_micro_batches(schedule: "PipelineSchedule | str", pp: int, micro_batches: int, stage: int,
                            virtual_stages: int = 1) -> float:
    """Micro-batches whose activations pipeline rank `stage` holds at its peak, in whole-stage equivalents.

    GPipe: all m. 1F1B: min(p - stage, m). Interleaved: min(2(p - stage - 1) + (v - 1)p + 1, m v) chunks of 1/v
    stage each, i.e. p + (p - 1)/v stages on the first rank (Narayanan et al. 2021). One pipeline stage: 1.
    """
    kind = PipelineSchedule(schedule)
    p, m, v = pp, micro_batches, virtual_stages
    if not 0 <= stage < p:
        raise ValueError(f"stage {stage} outside 0..{p - 1}")
    if p == 1:
        return 1.0
    if kind is PipelineSchedule.GPIPE:
        return float(m)
    if kind is PipelineSchedule.ONE_F_ONE_B:
        return float(min(p - stage, m))
    return min(2 * (p - stage - 1) + (v - 1) * p + 1, m * v) / v


def estimate_parallel_memory(gpu: GpuSpec, *, params: float, precision: str, optimizer: str,
                             quantized_copy_bytes: float = 0.0,
                             grad_dtype: str = "fp32", zero: int = 0, dp: int = 1,
                             activation_bytes_per_micro_batch: float = 0.0, in_flight: float = 1.0,
                             transient_bytes: float = 0.0, gathered_param_bytes: float = 0.0,
                             extra_buffer_bytes: float = 0.0, what: str = "",
                             frozen_params: float = 0.0) -> MemoryEstimate:
    """Peak memory of one GPU holding `params` parameters (its tp shard of its pipeline stage) sharded by ZeRO,
    with `quantized_copy_bytes` of Transformer Engine's cached quantized weights (model_state_bytes) and
    `frozen_params` frozen ones (LoRA's base: weights only, never sharded below ZeRO-3).

    Activations: one micro-batch's bytes on this GPU times the micro-batches in flight. Workspace: the framework
    reserve, the transient bytes (largest live layer input/output, a layer being recomputed) and, under ZeRO-3,
    the gathered parameters of the unit in use and the one prefetched.
    """
    for label, v in (("activation_bytes_per_micro_batch", activation_bytes_per_micro_batch),
                     ("in_flight", in_flight), ("transient_bytes", transient_bytes),
                     ("gathered_param_bytes", gathered_param_bytes), ("extra_buffer_bytes", extra_buffer_bytes),
                     ("params", params)):
        if not v >= 0:
            raise ValueError(f"{label}: got {v!r}; expected >= 0")
    weights, grads, states = model_state_bytes(params, precision, optimizer, grad_dtype, zero, dp,
                                               quantized_copy_bytes, frozen_params)
    workspace = FRAMEWORK_RESERVE_BYTES + transient_bytes + (gathered_param_bytes if zero >= 3 else 0.0)
    return MemoryEstimate(weights, grads, states, activation_bytes_per_micro_batch * in_flight,
                          float(extra_buffer_bytes), workspace, gpu.memory_bytes,
                          gpu.key + (f" ({what})" if what else ""))
