"""The strict scenario schema (DESIGN.md section 3) as pydantic v2 models: the YAML contract.

Unknown keys are errors (`extra="forbid"`), quantities are strings with units parsed to SI floats,
counts are positive integers. Catalog keys are checked against the catalogs passed in the
validation context (`{"gpu_keys": ..., ...}`), so one pass reports every problem. Cross-field
rules (dp*tp*pp = GPUs, batch divisibility, topology fit) live in resolve.py.
"""
import re
from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Discriminator, Field, Tag, ValidationInfo, field_validator

import simdist.layout as layout  # lazy (simdist.LAZY_MODULES): read only when training.placement_order is given
from simdist.collectives.schedule import CollectiveOp
from simdist.io.fields import (
    SIMDIST_ERROR, Duration, Fraction, Key, NonNegInt, PosFloat, PosInt, PositiveDuration, Size, StrictBool,
)
from simdist.io.schema_cluster import (  # noqa: F401 - re-exported: the whole schema is importable from here
    TAG_PREFIX, ClusterModel, FabricModel, GpuField, IntraNodeModel, LinkModel, NicModel, NicTransport,
    NodeGroupModel, Strict, Transport, check_key, fail,
)
from simdist.io.schema_failures import (  # noqa: F401 - re-exported
    FailureDistribution, FailureEventModel, FailureKind, FailuresModel, MaintenanceModel, RandomFailuresModel,
    RecoveryModel, RecoveryPolicy,
)
from simdist.scenario import (
    PsAggregation, PsServer, Backend, BatchSplit, CompressionMethod, Fidelity, GradClipping, GradProcessing,
    LossScaling, Optimizer, OptimizerKernels, PipelineSchedule, Precision,
    Bucketing, DdpAverage, PsPlacement, Recompute, StrategyKind, SyncMode,
)


# ----------------------------------------------------------------------------- workload


class GptModel(Strict):
    """A parametric decoder (GPT) or encoder (BERT) transformer."""

    layers: PosInt
    """Transformer blocks."""
    hidden: PosInt
    """Hidden size."""
    heads: PosInt
    """Attention heads (must divide hidden)."""
    vocab: PosInt
    """Vocabulary size."""
    ffn_hidden: PosInt | None = None
    """Feed-forward width. Default: 4 x hidden."""


class GptWrapper(Strict):
    gpt: GptModel
    """Parametric GPT: {layers, hidden, heads, vocab, ffn_hidden}."""


class BertWrapper(Strict):
    bert: GptModel
    """Parametric BERT: {layers, hidden, heads, vocab, ffn_hidden}."""


class LayersModel(Strict):
    layers: Annotated[list[dict[str, Any]], Field(min_length=1)]
    """Explicit layers, in forward order (see docs/scenario.md for the per-layer keys)."""
    name: Key = "custom"
    """The model's name in results."""


class TorchModel(Strict):
    torch: Annotated[str, Field(strict=True)]
    """'package.module:factory' returning an nn.Module (imported lazily; needs torch)."""
    input_shape: Annotated[list[PosInt], Field(min_length=1)]
    """Shape of the profiling input, batch first, e.g. [1, 3, 224, 224] (see simdist.workload.torch_import)."""

    @field_validator("torch")
    @classmethod
    def _factory(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", v):
            raise fail(f"got {v!r}; expected 'package.module:factory' (a Python module path, not a file)")
        return v


def _model_tag(v: Any) -> str | None:
    if isinstance(v, str):
        return TAG_PREFIX + "key"
    if isinstance(v, dict):
        for key in ("gpt", "bert", "torch", "layers"):
            if key in v:
                return TAG_PREFIX + key
    return None


ModelField = Annotated[
    Union[
        Annotated[Key, Tag(TAG_PREFIX + "key")],
        Annotated[GptWrapper, Tag(TAG_PREFIX + "gpt")],
        Annotated[BertWrapper, Tag(TAG_PREFIX + "bert")],
        Annotated[TorchModel, Tag(TAG_PREFIX + "torch")],
        Annotated[LayersModel, Tag(TAG_PREFIX + "layers")],
    ],
    Discriminator(_model_tag, custom_error_type=SIMDIST_ERROR,
                  custom_error_message="expected a model catalog key or one of {gpt: ...}, {bert: ...}, "
                                       "{layers: [...]}, {torch: 'module:factory', input_shape: [...]}"),
]


class BenchmarkModel(Strict):
    """A communication microbenchmark, like nccl-tests."""

    op: CollectiveOp
    """all_reduce | reduce_scatter | all_gather | broadcast | reduce | all_to_all."""
    sizes: Annotated[list[Size], Field(min_length=1)]
    """Per-rank buffer sizes, e.g. ['1 MB', '1 GB']."""


def _no_bool_dropout(v: Any) -> Any:
    if isinstance(v, bool):
        raise fail(f"got {v!r}; expected a probability in [0, 1)")
    return float(v) if isinstance(v, int) else v


# Core-seconds per sample of an ImageNet training loader (Pillow decode of a 500 x 375, ~110 KB JPEG,
# RandomResizedCrop to 224, flip, to uint8), measured on one core of the development machine (AMD EPYC, Zen 4
# Genoa, 2.6 GHz: host_cpus.yaml `epyc-genoa-dev`) with benchmarks/input_pipeline_cpu.py: 2.14 ms; scaled to
# the node's CPU by per-core integer throughput (simdist.input_pipeline). UNCERTAIN for other pipelines (DALI,
# tf.data's fast integer DCT): set the measured figure.
IMAGENET_CPU_S_PER_SAMPLE = 2.14e-3


class InputPipelineModel(Strict):
    """A host-side data loader feeding every GPU (real-data training; omit for synthetic data)."""

    cpu_per_sample: PositiveDuration = IMAGENET_CPU_S_PER_SAMPLE
    """Core-seconds of loader work per sample, e.g. '2.14 ms' (default: ImageNet JPEG decode + RandomResizedCrop +
    flip with Pillow, measured on the Zen 4 reference core by benchmarks/input_pipeline_cpu.py and scaled to the nodes' CPU) (added key)."""
    workers_per_gpu: PosInt
    """Loader processes or threads per GPU: PyTorch DataLoader num_workers, DALI num_threads, tf.data parallel calls."""
    host_cores: PosInt
    """Physical CPU cores per node (the server's datasheet), shared by every GPU's loaders and training process."""
    measured_on: str | None = None
    """host_cpus.yaml key of the CPU cpu_per_sample was measured on: the cost is scaled by its per-core integer
    score over the nodes' CPU's (default: the reference CPU for the default cost; a given cpu_per_sample is taken
    as measured on the nodes' own CPU) (added key)."""
    host_cpu: str | None = None
    """host_cpus.yaml key of the nodes' CPU (default: the intra-node entry's CPU, host_cpus.yaml nodes; a node
    without one is reported and not scaled) (added key)."""


class PackedSequencesModel(Strict):
    document_tokens: PosInt
    """Tokens of each document packed into a sample: seq_len / document_tokens documents per sample, each
    attending only within itself (flash attention's varlen kernels; NeMo's packed sequences)."""


class WorkloadModel(Strict):
    """A model to train, or a communication benchmark (exactly one)."""

    model: ModelField | None = None
    """Catalog key | {gpt: ...} | {bert: ...} | {layers: [...]} | {torch: 'module:factory', input_shape}."""
    benchmark: BenchmarkModel | None = None
    """{op, sizes}: time one collective over several sizes instead of training."""
    batch_per_gpu: PosInt | None = None
    """Samples per data-parallel replica per step (give this or global_batch)."""
    global_batch: PosInt | None = None
    """Samples per step over all replicas (divisible by dp x grad_accumulation)."""
    precision: Precision = Precision.FP32
    """Compute dtype: fp32 | tf32 | fp16 | bf16 | fp8 | mxfp8 | nvfp4. fp8, mxfp8 and nvfp4 are Transformer Engine's
    recipes: the transformer blocks' linear layers in the low precision with their quantize kernels, the rest in
    bf16; mxfp8 and nvfp4 only on GPUs that have them (Blackwell)."""
    seq_len: PosInt | None = None
    """Sequence length of transformer models (tokens per sample)."""
    flash_attention: StrictBool | None = None
    """Transformers: attention as one flash-attention kernel (true) or as its GEMM, softmax and dropout kernels
    with the s x s scores in HBM (false). Default: the model's (Llama-2, GPT-2, BERT: true; GPT-3, ViT, {gpt},
    {bert}: false)."""
    dropout: Annotated[float, BeforeValidator(_no_bool_dropout), Field(strict=True, ge=0, lt=1)] | None = None
    """Transformers: hidden and attention dropout probability (> 0 runs the dropout kernels and their masks).
    Default: the model's (GPT, BERT, {gpt}/{bert}: 0.1; Llama-2, ViT: 0)."""
    fused_kernels: StrictBool | None = None
    """Transformers: Megatron-LM's fused scale-mask-softmax and bias+dropout+add kernels (true, the default) or
    PyTorch eager's separate kernels (false)."""
    causal_attention: StrictBool | None = None
    """Decoders with flash attention: the core computes only the key tiles on and below the diagonal of its causal
    mask (FlashAttention-2, cuDNN's fused attention), about half the s x s square, and the model FLOPs (MFU) count
    that work, as Megatron-LM's do. Default false: the whole square. Refused for encoders (BERT, ViT) and without
    flash attention (an unfused core computes the whole square, masked or not) (added key)."""
    grad_dtype: Precision = Precision.FP32
    """Dtype gradients are reduced in before compression."""
    input_pipeline: InputPipelineModel | None = None
    """{cpu_per_sample, workers_per_gpu, host_cores}: the host data loader that bounds a step when the node's CPU
    cores cannot decode samples as fast as its GPUs train on them (docs/model.md "Input pipeline") (added key)."""
    memory_format: Literal["native", "nhwc", "nchw"] = "native"
    """Activation layout of convolutions: native (the default: NHWC on tensor cores, NCHW on CUDA cores, as the
    frameworks pick), nhwc (PyTorch channels_last, TF NHWC) or nchw (PyTorch's default, tf_cnn_benchmarks' data_format
    NCHW, XLA's layout for non-fp16 convolutions). In nchw, tensor-core convolutions (mixed precision, tf32 on GPUs
    that have it) pay cuDNN's layout transposes around every call; in nhwc, CUDA-core (fp32) 3 x 3 stride-1
    convolutions lose Winograd (cuDNN has only implicit GEMM for NHWC filters). Refused where it changes nothing
    (no conv layers; on CUDA cores, no 3 x 3 stride-1 conv) (added key)."""
    single_gpu_throughput: PosFloat | None = None
    """Samples/s measured on ONE GPU of the cluster's kind at batch_per_gpu without communication: the GPU compute
    is scaled so the single-GPU step takes batch / this (anchors the compute model to a measurement) (added key)."""
    moe_capacity_factor: PosFloat | None = None
    """Mixture-of-experts models: each expert takes at most this factor x its balanced share of the routed tokens
    and is padded to it (Megatron-Core's moe_expert_capacity_factor with moe_pad_expert_input_to_capacity; GShard,
    Switch Transformer); default dropless (docs/model.md, "Mixture of experts") (added key)."""
    fp8_recipe: Literal["delayed", "current", "blockwise"] | None = None
    """precision fp8: Transformer Engine's scaling of the fp8 tensors: delayed (DelayedScaling, TE's default: each
    tensor's scale from the amax history of earlier steps, the amax taken inside the cast), current
    (Float8CurrentScaling: each tensor's own amax, a pass over it before the cast) or blockwise (Float8BlockScaling,
    DeepSeek-V3's: a scale per 1 x 128 block of activations, 128 x 128 of weights). Refused without fp8 or on GPUs
    without fp8 units (docs/model.md, "Transformer Engine's recipes") (added key)."""
    fp8_attention: StrictBool = False
    """precision fp8: attention's batched GEMMs in fp8 too (TE's fp8_dpa, cuDNN's FP8 fused attention), with the
    conversions of Q, K, V and the output; needs flash attention and a Hopper or Blackwell GPU (added key)."""
    packed_sequences: PackedSequencesModel | None = None
    """{document_tokens}: documents packed into each sample, attention per document (its s^2 terms become
    s x document_tokens); transformers with flash attention only (docs/model.md, "Fine-tuning") (added key)."""

    @field_validator("model")
    @classmethod
    def _known_model(cls, v: Any, info: ValidationInfo) -> Any:
        return check_key(v, info, "model_keys", "model")


# ----------------------------------------------------------------------------- training / communication


def _zero_alias(v: Any) -> Any:
    """`zero: fsdp` is ZeRO stage 3 (FSDP's FULL_SHARD shards exactly what stage 3 shards)."""
    if v == FSDP_ALIAS:
        return 3
    if isinstance(v, str) or isinstance(v, bool):
        raise fail(f"got {v!r}; expected 0, 1, 2, 3 or '{FSDP_ALIAS}' (= 3)")
    return v


FSDP_ALIAS = "fsdp"


class ParallelismModel(Strict):
    dp: PosInt | None = None
    """Data-parallel degree. Default: GPUs / (tp x cp x pp)."""
    tp: PosInt = 1
    """Tensor-parallel degree."""
    pp: PosInt = 1
    """Pipeline-parallel stages."""
    cp: PosInt = 1
    """Context-parallel degree: the sequence split over cp ranks, attention exchanging K/V
    (training.cp_comm_type); dp x tp x cp x pp must equal the number of GPUs (added key)."""
    zero: Annotated[int, BeforeValidator(_zero_alias), Field(strict=True, ge=0, le=3)] = 0
    """ZeRO stage 0-3; 'fsdp' is accepted as an alias and resolves to 3 (FSDP full sharding = stage 3)."""
    ep: PosInt = 1
    """Expert-parallel degree (Megatron-Core's --expert-model-parallel-size): a mixture-of-experts model's routed
    experts split over ep ranks, tokens dispatched and combined by all-to-alls; ep divides the experts and ep x etp
    divides tp x cp x dp (docs/model-parallel.md, "Expert parallelism") (added key)."""
    etp: PosInt | None = None
    """Expert tensor-parallel degree (--expert-tensor-parallel-size): each expert's weights split over etp ranks.
    Default: tp, as Megatron-Core's default (added key)."""


class FinetuneModel(Strict):
    method: Literal["lora", "full"]
    """lora (frozen base, low-rank adapters); full is refused: it is the training a run without the key prices."""
    rank: PosInt | None = None
    """LoRA: the adapters' rank r (Megatron-Bridge's `dim`, PEFT's `r`); required."""
    target_modules: Annotated[list[Literal["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2", "all-linear",
                                           "attention"]], Field(min_length=1)] | None = None
    """LoRA: the block linears adapted, Megatron-Core's names (attention: linear_qkv and linear_proj; all-linear:
    the four). Default: all four, as Megatron-Bridge's LoRA."""


class TrainingModel(Strict):
    parallelism: ParallelismModel = ParallelismModel()
    """{dp, tp, pp, cp, zero, ep, etp}; dp x tp x cp x pp must equal the number of GPUs."""
    micro_batch: PosInt = 1
    """Pipeline micro-batch size."""
    schedule: PipelineSchedule = PipelineSchedule.ONE_F_ONE_B
    """Pipeline schedule: gpipe | 1f1b | interleaved."""
    sync: SyncMode = SyncMode.BSP
    """bsp | asp | ssp | local_sgd | hybrid (asp, then bsp from training.hybrid_switch)."""
    hybrid_switch: PosInt | Annotated[str, Field(pattern=r"^\s*[0-9]+(\.[0-9]+)?\s*%\s*$")] | None = None
    """sync hybrid: the iteration where bsp takes over from asp (e.g. 1000), or a share of run.iterations
    ("30%": the first 30 % asynchronous); required with hybrid, refused otherwise (added key)."""
    staleness: NonNegInt = 0
    """ssp: how many steps a worker may run ahead."""
    local_steps: PosInt = 1
    """local_sgd: steps between averaging."""
    grad_accumulation: PosInt = 1
    """Micro-steps accumulated before each gradient exchange."""
    batch_split: BatchSplit = BatchSplit.EQUAL
    """equal | proportional (to GPU speed, for mixed clusters) | dynamic (proportional, then re-split from
    the step times observed, stragglers included, every training.rebalance_every iterations)."""
    rebalance_every: PosInt | None = None
    """batch_split dynamic: iterations between re-splits (default 50); refused otherwise (added key)."""
    optimizer: Optimizer = Optimizer.SGD
    """sgd | momentum | adam | lamb: optimizer state memory and update cost (added key)."""
    optimizer_kernels: OptimizerKernels = OptimizerKernels.FUSED
    """fused | unfused: the update as one pass over each parameter (fused kernels, multi-tensor apply, a framework's ApplyAdam) or as one kernel per elementwise op of an update written in tensor ops (e.g. BERT's AdamWeightDecayOptimizer in TensorFlow 1), each op reading and writing HBM (docs/model.md, "Optimizer step") (added key)."""
    grad_clipping: GradClipping = GradClipping.NONE
    """none | global_norm: clip the gradients by their global L2 norm before the update (clip_grad_norm_,
    tf.clip_by_global_norm): a pass to take the norm and one to scale, priced as HBM traffic (docs/model.md,
    "Gradient clipping and loss scaling") (added key)."""
    loss_scaling: LossScaling = LossScaling.NONE
    """none | dynamic: fp16 loss scaling (GradScaler, LossScaleOptimizer): the gradients are unscaled and checked
    for inf/NaN before the update; workload.precision fp16 only (added key)."""
    grad_processing: GradProcessing = GradProcessing.PER_UPDATE
    """per_update | per_micro_batch: clipping and unscaling once per update on the accumulated gradients, or on
    every micro-batch before it is accumulated (DeepLearningExamples' TensorFlow BERT); needs grad_clipping or
    loss_scaling (added key)."""
    convergence_factor: PosFloat = 1.0
    """Iterations needed relative to uncompressed BSP, an assumption for time-to-train (added key)."""
    placement_order: Key | None = None
    """Axes innermost first, e.g. 'tp,pp,dp'; default 'tp,dp,pp' (Megatron-LM: tp inside a node, pp outermost), with
    cp > 1 'tp,cp,dp,pp' (Megatron-Core's tp-cp-ep-dp-pp), which must then name cp (added key)."""
    sequence_parallel: StrictBool = False
    """Megatron sequence parallelism: reduce_scatter + all_gather instead of each tp all_reduce; needs tp > 1 (added key)."""
    tp_comm_overlap: StrictBool = False
    """Megatron's --tp-comm-overlap (Transformer Engine userbuffers): each block GEMM's sequence-parallel all_gather
    / reduce_scatter runs in tp chunks beside the chunked GEMM it feeds; needs sequence_parallel (added key)."""
    fp8_param_gather: StrictBool = False
    """Megatron's --fp8-param-gather: the parameters are kept in fp8 and their all-gathers (ZeRO/FSDP, the distributed
    optimizer's after the step) move 1 byte per parameter instead of the bf16 weights' 2; needs workload.precision
    fp8 or mxfp8 on GPUs with fp8 units and a parameter gather (training.parallelism.zero >= 1) (added key)."""
    cp_comm_type: Literal["p2p", "all_gather", "a2a"] | None = None
    """Context parallelism's K/V exchange (Megatron-Core's cp_comm_type): p2p (ring, overlapped with attention;
    the default) | all_gather | a2a (Ulysses head scattering); needs training.parallelism.cp > 1 (added key)."""
    moe_load_imbalance: Annotated[float, Field(strict=False, ge=1.0)] = 1.0
    """The hottest routed expert's tokens over the mean per expert (>= 1; 1: balanced, as the published runs
    force-balance): its GPU receives and computes that much more and each MoE layer waits for it; needs a
    mixture-of-experts model with ep > 1 and no capacity factor (added key)."""
    recompute: Recompute = Recompute.NONE
    """Activation recomputation of transformer layers: none | selective (attention core) | full | selective_op
    (torchtitan's op policy: every second matmul and the elementwise ops; ZeRO / FSDP runs without tp or pp) (added key)."""
    recompute_every: PosInt = 1
    """recompute full: checkpoint one transformer block in N (blocks N, 2N, ...; torchtitan's selective layer AC,
    selective_ac_option N); ZeRO / FSDP runs without tp or pp (added key)."""
    recompute_modules: list[str] | None = None
    """recompute selective: Megatron-Core's --recompute-modules, the modules whose forward runs again in the
    backward and whose saved tensors are dropped: core_attn (the default), layernorm, mla_up_proj (MLA models),
    mlp (dense MLP blocks), shared_experts (a MoE block's shared experts), moe_act (the routed experts' activation),
    moe (the whole MoE layer, its token dispatch and combine included; MoE models); model-parallel runs (tp, pp, cp
    or ep > 1) (added key)."""
    virtual_stages: PosInt = 1
    """Interleaved schedule: model chunks per pipeline rank (>= 2 with schedule interleaved and pp > 1) (added key)."""
    cuda_graphs: StrictBool = False
    """Forward and backward replayed from CUDA graphs (Megatron-Core's --enable-cuda-graph, TE's
    make_graphed_callables, torch.cuda.graphs): each captured kernel costs the device's gap between kernels instead
    of a host launch; a dropless MoE layer's experts stay eager (docs/model.md, "CUDA graphs") (added key)."""
    finetune: FinetuneModel | None = None
    """{method: lora, rank, target_modules}: LoRA fine-tuning, the base weights frozen (no gradients or optimizer
    states; their backward computes input gradients only) and rank-r adapters trained; data parallel with or
    without ZeRO / FSDP, or with tp, pp and cp (ZeRO 0-3; docs/model-parallel.md, "LoRA under tensor and pipeline
    parallelism"); refused on a mixture-of-experts model (docs/model.md, "Fine-tuning") (added key)."""

    @field_validator("placement_order")
    @classmethod
    def _order(cls, v: str | None) -> str | None:
        if v is None:
            return v

        parts = [p.strip() for p in v.split(",")]
        if not layout.order_is_valid(parts):
            raise fail(f"got {v!r}; expected the three axes tp, dp and pp (or the four tp, cp, dp, pp) once each, "
                       "innermost first, e.g. 'tp,dp,pp'")
        return ",".join(a.value for a in layout.parse_order(v))


class HierarchicalModel(Strict):
    intra: StrategyKind = StrategyKind.RING
    """Algorithm inside a node: ring | tree | halving_doubling."""
    inter: StrategyKind = StrategyKind.RING
    """Algorithm across nodes: ring | tree | halving_doubling."""


class PsModel(Strict):
    servers: PosInt | None = None
    """Parameter-server shards. Default: one per worker node, as BytePS and MXNet's dist kvstore run one server process per machine (with placement dedicated: as many server machines as worker nodes)."""
    placement: PsPlacement = PsPlacement.COLOCATED
    """colocated (on worker nodes) | dedicated (extra hosts with the first group's NIC) | host (processes on the worker nodes' CPU sockets, in host memory: a node's GPUs push over PCIe, other nodes through its NIC, as TensorFlow's parameter_server with local_parameter_device=cpu and PS tasks on the worker machines run; needs server: cpu) (host added)."""
    aggregation: PsAggregation | None = None
    """gpu (every GPU pushes and pulls its whole gradient) | node (the node's GPUs reduce-scatter first, so one gradient's worth per node crosses its NICs, as TensorFlow replicated, MXNet KVStore device+dist and BytePS do). Default: node, except gpu for training.sync asp, ssp and hybrid (asynchronous workers are single GPUs) and for node groups with different GPUs per node (added key)."""
    server: PsServer = PsServer.GPU
    """gpu (a server's update streams through a GPU's HBM) | cpu (through host memory, as TensorFlow PS tasks and MXNet / BytePS servers run) (added key)."""
    partition: Size | None = None
    """Push and pull each shard in partitions of this size, pipelined (a worker pulls partition k while it pushes k+1), as BytePS does ('4096000 B', its BYTEPS_PARTITION_BYTES default) and MXNet's KVStore per key; training.sync bsp only. none: the whole shard is pushed, then pulled (added key)."""


class CompressionModel(Strict):
    method: CompressionMethod = CompressionMethod.NONE
    """none | fp16 | bf16 | int8 | onebit | topk | randomk | powersgd."""
    ratio: Fraction | None = None
    """topk / randomk: fraction of elements kept, 0 < r <= 1."""
    rank: PosInt | None = None
    """powersgd: low-rank approximation rank."""
    error_feedback: StrictBool = True
    """Keep the compression error and add it to the next step's gradient."""


class CommunicationModel(Strict):
    strategy: StrategyKind = StrategyKind.RING
    """ring | tree | halving_doubling | hierarchical | torus2d | torus3d | ps. With backend nccl, ring leaves the
    algorithm to NCCL's tuner (pin one with nccl_algo, as NCCL_ALGO does); tree and halving_doubling are refused
    there. torus3d: reduce-scatter and all-gather along each dimension of a 3-D grid in turn (a TPU slice's
    all-reduce, collectives/torus3d.py)."""
    backend: Backend = Backend.TEXTBOOK
    """textbook | gloo | nccl: which library's real algorithms to model."""
    hierarchical: HierarchicalModel = HierarchicalModel()
    """hierarchical: {intra, inter} algorithms."""
    ps: PsModel = PsModel()
    """ps: {servers, placement, aggregation, server}."""
    bucket_size: Size = 25e6
    """Gradient bucket size, e.g. '25 MB'."""
    first_bucket_size: Size | None = None
    """Cap of the first bucket (backward's last layers), e.g. '1 MiB' as DDP's default when bucket_cap_mb is not set; none: bucket_size (added key)."""
    bucketing: Bucketing = Bucketing.DDP
    """ddp (a bucket closes once it reaches bucket_size, as PyTorch DDP) | fusion (never exceeds it, as Horovod) (added key)."""
    ddp_average: DdpAverage = DdpAverage.IN_COPY
    """in_copy | per_bucket: where DDP's reducer divides the summed gradients by the world size. in_copy (reducer.cpp
    today: 'Divides while copying into the bucket view', at::mul_out, no kernel of its own) | per_bucket (the early
    reducer, 2019-2020: 'Prescale bucket contents to turn the global sum into the global average', a div_ over each
    bucket as it fills, one kernel on the compute stream before its all-reduce). Read with bucketing ddp on an
    all-reduce strategy without compression (a comm hook skips the division) (added key)."""
    gradient_as_bucket_view: StrictBool = False
    """PyTorch DDP's gradient_as_bucket_view (distributed.py: 'gradients will be views pointing to different
    offsets of allreduce communication buckets ... the saved memory size will be equal to the total gradients
    size'): true drops the reducer's 'copy to grad' of each reduced bucket after the backward and the buckets'
    flat copy of every gradient (memory part buffers); false, PyTorch's default, keeps both. Read where DDP's
    reducer runs: bucketing ddp, an all-reduce strategy, dp > 1, bsp, no ZeRO / FSDP, tp, pp, cp or ep, no 1-bit
    codec, no TPU (added key)."""
    fusion_cycle: Duration = 0.0
    """Horovod-style tensor fusion cycle, e.g. '5 ms': with bucketing fusion and overlap, each tick fuses the
    gradients ready by then (up to bucket_size) and launches them; '0 s' cuts buckets by size alone, each launched
    when its last gradient is ready (added key)."""
    collnet: StrictBool = False
    """NCCL_COLLNET_ENABLE=1: backend nccl may run CollNet Direct / Chain all-reduce (in-switch reduction), and NVLS
    across third-generation NVSwitch nodes, where its tuner predicts them faster; needs backend nccl and
    cluster.fabric.sharp: true (added key)."""
    nvls: StrictBool = True
    """NCCL_NVLS_ENABLE: backend nccl may run NVLS (one node, or several with collnet) and NVLSTree (NVLS inside
    each node, a tree over the nodes) all-reduce on third-generation NVSwitch nodes where its tuner predicts them
    faster; false turns them off (NCCL_NVLS_ENABLE=0); read only with backend nccl, refused where no node runs
    NVLS (added key)."""
    nccl_algo: Key | None = None
    """NCCL_ALGO: the algorithms backend nccl's tuner may choose, as NCCL reads the variable: a list ('Ring',
    'Tree,Ring'), everything but a list ('^NVLS,NVLSTree'), per function after the first entry
    ('Ring;allreduce:Tree'); names Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT, any case.
    Read only with backend nccl and a flat strategy (ring); a collective left nothing it can run ends the run
    (exit 3), as NCCL fails the call (added key)."""
    nccl_proto: Key | None = None
    """NCCL_PROTO: the protocols backend nccl may use, in NCCL_ALGO's syntax with LL, LL128, Simple; a protocol
    named runs even where NCCL leaves it off by default (LL128 off NVLink). Read only with backend nccl and a flat
    strategy (ring) (added key)."""
    nccl_socket_threads: Annotated[int, Field(strict=True, ge=0, le=16)] | None = None
    """NCCL_SOCKET_NTHREADS: helper threads per connection of NCCL's socket transport (tcp NICs). None: NCCL's own
    choice, 0 on NICs of neither AWS nor GCP (the rank's one proxy thread copies every byte it sends and receives
    over sockets), 2 on AWS NICs and 4 on GCP's, which set it themselves: state it for those. Read only with backend
    nccl and a tcp NIC (added key)."""
    overlap: StrictBool = True
    """Overlap gradient communication with backward compute."""
    compression: CompressionModel = CompressionModel()
    """{method, ratio, rank, error_feedback}."""


# ----------------------------------------------------------------------------- run (failures: schema_failures.py)


class RunModel(Strict):
    iterations: PosInt = 50
    """Training iterations to simulate (or give duration)."""
    duration: PositiveDuration | None = None
    """Simulated wall time instead of iterations, e.g. '24 h'."""
    warmup: NonNegInt = 2
    """Leading iterations left out of steady-state figures."""
    seed: NonNegInt = 0
    """Seed of the run's random generator."""
    replicas: PosInt = 1
    """Monte Carlo repetitions over failure seeds."""
    fidelity: Fidelity = Fidelity.SIMULATE
    """simulate (discrete events) | estimate (closed forms)."""


class ScenarioModel(Strict):
    """One scenario file."""

    name: Key | None = None
    """Scenario name. Default: the file name without extension."""
    cluster: ClusterModel
    """Node groups and fabric."""
    workload: WorkloadModel
    """What runs: a model or a communication benchmark."""
    training: TrainingModel = TrainingModel()
    """Parallelism, synchronisation, accumulation."""
    communication: CommunicationModel = CommunicationModel()
    """Gradient exchange: algorithm, buckets, overlap, compression."""
    failures: FailuresModel | None = None
    """Scheduled and random failures, recovery."""
    run: RunModel = RunModel()
    """Iterations, seed, fidelity."""
    calibration: Key | None = None
    """Calibration profile (`simdist calibrate`), relative to the scenario file's folder."""
