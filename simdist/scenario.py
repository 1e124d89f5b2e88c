"""The resolved scenario: every key of DESIGN.md section 3 as frozen dataclasses in SI units.

io/ parses and validates YAML into these; the core only ever sees them. Defaults here match the
documented defaults of the YAML keys.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from simdist.collectives.algorithms import Algorithm as StrategyKind  # communication.strategy: one spelling
from simdist.collectives.ps import PsAggregation, PsServer  # noqa: F401 - communication.ps.* spellings
from simdist.collectives.schedule import CollectiveOp
from simdist.compute import ComputeCalibration
from simdist.hardware.specs import ClusterSpec, HostCpuCatalog
from simdist.workload.specs import ModelSpec


class Precision(StrEnum):
    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    MXFP8 = "mxfp8"  # Transformer Engine's MXFP8 block scaling (Blackwell)
    NVFP4 = "nvfp4"  # Transformer Engine's NVFP4 block scaling (Blackwell)


class Optimizer(StrEnum):
    SGD = "sgd"
    MOMENTUM = "momentum"
    ADAM = "adam"
    LAMB = "lamb"   # Adam's moments plus a per-tensor trust ratio ||w|| / ||update|| (You et al., 2019)


class OptimizerKernels(StrEnum):
    """How the optimizer update runs: one fused pass over each parameter (fused kernels, Apex, a
    framework's own ApplyAdam) or one kernel per elementwise op of an update written as tensor ops."""

    FUSED = "fused"
    UNFUSED = "unfused"


class GradClipping(StrEnum):
    """Clipping of the gradients before the update: none, or by their global L2 norm (torch.nn.utils.
    clip_grad_norm_, tf.clip_by_global_norm): one pass to take the norm and one to scale."""

    NONE = "none"
    GLOBAL_NORM = "global_norm"


class LossScaling(StrEnum):
    """fp16 loss scaling: none, or dynamic (PyTorch's GradScaler, TensorFlow's LossScaleOptimizer): the
    gradients are unscaled and checked for inf/NaN before the update."""

    NONE = "none"
    DYNAMIC = "dynamic"


class GradProcessing(StrEnum):
    """Where clipping and unscaling run when gradients accumulate: once per update on the accumulated
    gradients (PyTorch's GradScaler.unscale_ + clip_grad_norm_ before optimizer.step), or on every micro-batch
    before it is accumulated (DeepLearningExamples' TensorFlow BERT, optimization.py)."""

    PER_UPDATE = "per_update"
    PER_MICRO_BATCH = "per_micro_batch"


class SyncMode(StrEnum):
    BSP = "bsp"
    ASP = "asp"
    SSP = "ssp"
    LOCAL_SGD = "local_sgd"
    HYBRID = "hybrid"  # asp until training.hybrid_switch, bsp after (engine/hybrid.py)


class Backend(StrEnum):
    TEXTBOOK = "textbook"
    GLOO = "gloo"
    NCCL = "nccl"


class PsPlacement(StrEnum):
    COLOCATED = "colocated"  # on worker GPUs: a server's own shard never touches the wire
    DEDICATED = "dedicated"  # on extra CPU machines, behind their own NICs
    HOST = "host"  # in the worker nodes' host memory: pushes cross PCIe to a CPU socket (TF local_parameter_device=cpu)


class Bucketing(StrEnum):
    """How gradients are packed into buckets (strategies/buckets.py)."""

    DDP = "ddp"  # PyTorch DDP's Reducer: a bucket closes once it reaches the cap (its last tensor may cross it)
    FUSION = "fusion"  # Horovod's tensor fusion: a fused buffer never exceeds the threshold


class DdpAverage(StrEnum):
    """communication.ddp_average: where DDP's reducer divides the summed gradients by the world size."""

    IN_COPY = "in_copy"  # while copying each gradient into its bucket view (at::mul_out): no kernel of its own
    PER_BUCKET = "per_bucket"  # a div_ over each bucket as it fills, on the compute stream (early reducer.cpp)


class CompressionMethod(StrEnum):
    NONE = "none"
    FP16 = "fp16"
    BF16 = "bf16"
    INT8 = "int8"
    ONEBIT = "onebit"
    TOPK = "topk"
    RANDOMK = "randomk"
    POWERSGD = "powersgd"


class Fidelity(StrEnum):
    SIMULATE = "simulate"
    ESTIMATE = "estimate"


class PipelineSchedule(StrEnum):
    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"


class CpCommType(StrEnum):
    """How context-parallel attention exchanges K/V (Megatron-Core's cp_comm_type)."""

    P2P = "p2p"  # ring: K/V blocks passed to the next rank, overlapped with each block's attention
    ALL_GATHER = "all_gather"  # K/V all-gathered before attention, dK/dV reduce-scattered after (not overlapped)
    A2A = "a2a"  # Ulysses: all-to-all of Q, K, V (heads scattered) and of the output


class Recompute(StrEnum):
    """Activation recomputation of transformer layers (Korthikanti et al. 2022)."""

    NONE = "none"
    SELECTIVE = "selective"  # recompute the attention core (softmax, dropout, scores x values)
    FULL = "full"  # keep only each layer's input, recompute the layer in backward
    # torchtitan's op-level selective AC: keep every matmul's output but every second one, and the attention
    # kernel's; recompute the rest (norms, activations, adds) (strategies/recompute_policy.py)
    SELECTIVE_OP = "selective_op"


class BatchSplit(StrEnum):
    EQUAL = "equal"
    PROPORTIONAL = "proportional"
    DYNAMIC = "dynamic"  # re-split every training.rebalance_every iterations from observed step times


@dataclass(frozen=True)
class BenchmarkSpec:
    """An nccl-tests-like sweep: one op over several per-rank sizes."""

    op: CollectiveOp
    sizes_bytes: tuple[float, ...]


@dataclass(frozen=True)
class InputPipelineSpec:
    """The host-side data loader (workload.input_pipeline): each GPU's loader decodes and augments its samples
    on the node's CPU cores, prefetching ahead of the GPU (simdist.input_pipeline says how it bounds a step)."""

    cpu_s_per_sample: float  # core-seconds of loader work per sample
    workers_per_gpu: int  # loader processes or threads per GPU (DataLoader num_workers, DALI/tf.data threads)
    host_cores: int  # physical CPU cores per node, shared by the loaders and the training processes
    # host_cpus.yaml key of the CPU cpu_s_per_sample was measured on (None: the node's own CPU, no scaling);
    # the default cost carries the catalog's reference CPU (the machine benchmarks/input_pipeline_cpu.py ran on)
    measured_on: str | None = None
    host_cpu: str | None = None  # host_cpus.yaml key of the nodes' CPU (None: the intra-node entry's, host_cpus.yaml nodes)
    cpus: HostCpuCatalog | None = None  # the host CPU catalog (None: no CPU known, the cost is never scaled)


@dataclass(frozen=True)
class WorkloadSpec:
    """A model to train, or a communication benchmark (exactly one of the two)."""

    model: ModelSpec | None = None
    benchmark: BenchmarkSpec | None = None
    batch_per_gpu: int | None = None
    global_batch: int | None = None
    precision: Precision = Precision.FP32
    grad_dtype: Precision = Precision.FP32
    seq_len: int | None = None
    input_pipeline: InputPipelineSpec | None = None  # None: data is ready on the GPU (synthetic data)
    # samples/s the user measured on ONE GPU of the cluster's kind at batch_per_gpu, no communication: the GPU
    # compute is scaled so simdist's single-GPU step takes batch / this (None: the roofline compute model)
    single_gpu_throughput: float | None = None
    memory_format: str = "native"  # activation layout of convolutions: native (each unit's own) | nhwc | nchw


@dataclass(frozen=True)
class ParallelismSpec:
    """How the GPUs are split: data (dp), tensor (tp) and pipeline (pp) parallel degrees, and the ZeRO stage."""

    dp: int | None = None  # None: all GPUs
    tp: int = 1
    pp: int = 1
    cp: int = 1  # context parallelism: the sequence split over cp ranks (Megatron-Core)
    zero: int = 0  # 3 is FSDP (the YAML alias `zero: fsdp` resolves to 3)
    ep: int = 1  # expert parallelism: the routed experts split over ep ranks (Megatron-Core)
    etp: int = 1  # expert tensor parallelism: each expert's weights split over etp ranks (io.resolve: default tp)


@dataclass(frozen=True)
class TrainingSpec:
    """How one iteration trains: parallelism, micro-batches and pipeline schedule, synchronisation, optimizer,
    recomputation and how the batch is split across unequal GPUs."""

    parallelism: ParallelismSpec = field(default_factory=ParallelismSpec)
    micro_batch: int = 1
    schedule: PipelineSchedule = PipelineSchedule.ONE_F_ONE_B
    sync: SyncMode = SyncMode.BSP
    staleness: int = 0
    local_steps: int = 1
    grad_accumulation: int = 1
    batch_split: BatchSplit = BatchSplit.EQUAL
    optimizer: Optimizer = Optimizer.SGD
    optimizer_kernels: OptimizerKernels = OptimizerKernels.FUSED
    grad_clipping: GradClipping = GradClipping.NONE
    loss_scaling: LossScaling = LossScaling.NONE
    grad_processing: GradProcessing = GradProcessing.PER_UPDATE
    convergence_factor: float = 1.0  # iterations needed relative to uncompressed BSP (an assumption)
    placement_order: str | None = None  # e.g. 'tp,dp,pp' innermost first; None: simdist.layout.DEFAULT_ORDER
    sequence_parallel: bool = False
    tp_comm_overlap: bool = False  # tp all_gather / reduce_scatter chunked beside the GEMMs (needs sequence_parallel)
    fp8_param_gather: bool = False  # Megatron's --fp8-param-gather: parameter all-gathers in fp8 (1 byte), not bf16
    cp_comm_type: CpCommType = CpCommType.P2P  # context-parallel attention's K/V exchange
    moe_load_imbalance: float = 1.0  # the hottest expert's routed tokens over the mean per expert
    recompute: Recompute = Recompute.NONE
    recompute_every: int = 1  # recompute full: checkpoint one transformer block in this many
    # recompute selective: Megatron-Core's recompute_modules (strategies/recompute_policy.py); () = core_attn
    recompute_modules: tuple[str, ...] = ()
    virtual_stages: int = 1  # interleaved schedule: model chunks per pipeline rank
    hybrid_switch_iteration: int | None = None  # sync hybrid: the first bsp iteration (0-based), or
    hybrid_switch_fraction: float | None = None  # ... that fraction of the run's iterations
    rebalance_every: int = 50  # batch_split dynamic: iterations between re-splits
    split_slowdowns: tuple[float, ...] | None = None  # dynamic (internal): the per-GPU slowdowns the split
    # was last balanced for (None: the current stragglers); the goodput timeline sets it while a re-split lags


@dataclass(frozen=True)
class CompressionSpec:
    """Gradient compression before the collective: the method and its parameter (ratio or rank)."""

    method: CompressionMethod = CompressionMethod.NONE
    ratio: float | None = None  # topk / randomk: fraction of elements kept
    rank: int | None = None  # powersgd
    error_feedback: bool = True


@dataclass(frozen=True)
class CommunicationSpec:
    """How gradients are exchanged: the collective strategy and backend, parameter-server settings, gradient
    buckets, overlap with the backward pass and compression."""

    strategy: StrategyKind = StrategyKind.RING
    backend: Backend = Backend.TEXTBOOK
    hierarchical_intra: StrategyKind = StrategyKind.RING
    hierarchical_inter: StrategyKind = StrategyKind.RING
    ps_servers: int = 1
    ps_placement: PsPlacement = PsPlacement.COLOCATED
    ps_aggregation: PsAggregation = PsAggregation.GPU  # gpu: per-GPU workers; node: reduced inside each node first
    ps_server: PsServer = PsServer.GPU  # what a server's update runs on: a GPU or the host CPU
    ps_partition_bytes: float | None = None  # push/pull in pipelined partitions of this size (BytePS); None: whole shards
    bucket_size_bytes: float = 25e6
    first_bucket_bytes: float | None = None  # None: the first bucket has bucket_size_bytes too
    bucketing: Bucketing = Bucketing.DDP
    ddp_average: DdpAverage = DdpAverage.IN_COPY  # where DDP divides by the world size (strategies/buckets.py)
    gradient_as_bucket_view: bool = False  # DDP(gradient_as_bucket_view=True): .grad are views of the buckets
    fusion_cycle_s: float = 0.0  # Horovod-style tensor fusion cycle; 0 = launch when the bucket is full
    collnet: bool = False  # NCCL_COLLNET_ENABLE=1 over SHARP switches (collectives/collnet.py)
    nvls: bool = True  # NCCL_NVLS_ENABLE: NVLS / NVLSTree where the nodes' NVSwitch has them (collectives/nvls.py)
    nccl_algo: str | None = None  # NCCL_ALGO as NCCL parses it (collectives/nccl_env.py); None: unset
    nccl_proto: str | None = None  # NCCL_PROTO, the same syntax
    nccl_socket_threads: int | None = None  # NCCL_SOCKET_NTHREADS; None: NCCL's auto-detection (collectives/nccl.py)
    overlap: bool = True
    compression: CompressionSpec = field(default_factory=CompressionSpec)


class FailureKind(StrEnum):
    """failures.events[].kind: what breaks or slows down."""

    GPU_DOWN = "gpu_down"
    NODE_DOWN = "node_down"
    LINK_DOWN = "link_down"
    SWITCH_DOWN = "switch_down"
    RACK_DOWN = "rack_down"  # a leaf switch and every node under it
    LINK_DEGRADE = "link_degrade"
    STRAGGLER = "straggler"
    NETWORK_JITTER = "network_jitter"


class RecoveryPolicy(StrEnum):
    """failures.recovery.policy: how the job gets going again after a failure."""

    CHECKPOINT_RESTART = "checkpoint_restart"
    IN_MEMORY = "in_memory"
    ELASTIC = "elastic"
    SPARES = "spares"
    REPLICA_GROUPS = "replica_groups"


class FailureDistribution(StrEnum):
    """failures.random.distribution: time between failures of one component."""

    EXPONENTIAL = "exponential"
    WEIBULL = "weibull"


@dataclass(frozen=True)
class FailureEventSpec:
    """One scheduled event; `target` is 'gpu:K', 'node:K', 'link:U-V' or 'switch:NAME' (as `simdist topo` names them)."""

    at_s: float
    kind: FailureKind
    target: str = ""
    factor: float | None = None  # link_degrade: remaining fraction of bandwidth
    slowdown: float | None = None  # straggler: compute-time multiplier
    duration_s: float | None = None  # None: until repaired (down kinds) or for good (slowdowns)
    delay_s: float | None = None  # network_jitter: mean extra seconds per step
    sigma: float = 0.0  # network_jitter: lognormal shape of the per-step delay (0: constant)


@dataclass(frozen=True)
class RandomFailuresSpec:
    """MTBF per component (None: that component does not fail) and the time-between-failures law."""

    gpu_mtbf_s: float | None = None
    node_mtbf_s: float | None = None
    nic_mtbf_s: float | None = None
    link_mtbf_s: float | None = None
    switch_mtbf_s: float | None = None
    distribution: FailureDistribution = FailureDistribution.EXPONENTIAL
    weibull_shape: float = 0.7
    repair_s: float = 1800.0  # mean repair time
    repair_sigma: float = 0.0  # lognormal shape of repair times (0: every repair takes repair_s)
    lemon_fraction: float = 0.0  # share of nodes whose GPUs, host and NICs fail lemon_factor x more often
    lemon_factor: float = 10.0
    defaults: bool = False  # True: no MTBF was given, the documented defaults apply


@dataclass(frozen=True)
class MaintenanceSpec:
    """Planned interruptions: every `interval_s` from `first_s`, the whole job stops for `duration_s`."""

    interval_s: float
    duration_s: float
    first_s: float | None = None  # None: one interval after the start


@dataclass(frozen=True)
class RecoverySpec:
    """What a failure costs: the recovery policy, checkpoint cadence and cost, detection and restart times, spares."""

    policy: RecoveryPolicy = RecoveryPolicy.CHECKPOINT_RESTART
    checkpoint_interval_s: float = 1800.0  # compute time between checkpoints
    checkpoint_write_s: float | None = 60.0  # None: model + optimizer bytes / storage_bandwidth_Bps
    storage_bandwidth_Bps: float | None = None
    checkpoint_async: bool = False  # only the snapshot to host memory blocks; the write runs behind
    snapshot_bandwidth_Bps: float = 20e9  # device-to-host copy per GPU (async snapshot, in-memory copy)
    detection_s: float = 60.0
    restart_s: float = 300.0
    persistent_interval_s: float | None = None  # in_memory: persistent checkpoints (None: 4 x interval)
    spares: int = 0
    spare_delay_s: float = 60.0
    replica_groups: int | None = None  # None: one group per node


@dataclass(frozen=True)
class FailuresSpec:
    """Scheduled failure events, random failures, planned maintenance and how the job recovers."""

    events: tuple[FailureEventSpec, ...] = ()
    random: RandomFailuresSpec | None = None
    recovery: RecoverySpec = field(default_factory=RecoverySpec)
    maintenance: MaintenanceSpec | None = None


@dataclass(frozen=True)
class RunSpec:
    """How long and how to run: iterations (or a duration), warm-up, seed, replicas and the fidelity."""

    iterations: int = 50
    duration_s: float | None = None
    warmup: int = 2
    seed: int = 0
    replicas: int = 1
    fidelity: Fidelity = Fidelity.SIMULATE


@dataclass(frozen=True)
class Scenario:
    """Everything one simulation needs, resolved and checked."""

    name: str
    cluster: ClusterSpec
    workload: WorkloadSpec
    training: TrainingSpec = field(default_factory=TrainingSpec)
    communication: CommunicationSpec = field(default_factory=CommunicationSpec)
    failures: FailuresSpec | None = None
    run: RunSpec = field(default_factory=RunSpec)
    calibration: str | None = None  # path of the profile that was applied, for the record
    # measured kind factors / memory efficiency / launch overhead from a profile's compute entries
    compute_calibration: ComputeCalibration | None = None
