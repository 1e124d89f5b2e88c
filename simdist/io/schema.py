"""The strict scenario schema (DESIGN.md section 3) as pydantic v2 models: the YAML contract.

Unknown keys are errors (`extra="forbid"`), quantities are strings with units parsed to SI floats,
counts are positive integers. Catalog keys are checked against the catalogs passed in the
validation context (`{"gpu_keys": ..., ...}`), so one pass reports every problem. Cross-field
rules (dp*tp*pp = GPUs, batch divisibility, topology fit) live in resolve.py.
"""
from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Callable, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from simdist.collectives.schedule import CollectiveOp
from simdist.hardware.specs import TopologyKind
from simdist.io.fields import (
    SIMDIST_ERROR, Bandwidth, Duration, Efficiency, Fraction, Key, NonNegInt, PosFloat, PosInt,
    PositiveDuration, Size, SizeOrZero, StrictBool, unknown_key_message,
)
from simdist.scenario import (
    Backend, BatchSplit, CompressionMethod, Fidelity, Optimizer, PipelineSchedule, Precision,
    PsPlacement, StrategyKind, SyncMode,
)

TAG_PREFIX = "~"  # union tags appear in pydantic error locations; paths drop parts starting with it


class Transport(StrEnum):
    RDMA = "rdma"
    TCP = "tcp"
    NVLINK = "nvlink"
    PCIE = "pcie"
    SOCKET = "socket"


class NicTransport(StrEnum):
    RDMA = "rdma"
    TCP = "tcp"


class FailureKind(StrEnum):
    NODE_DOWN = "node_down"
    GPU_DOWN = "gpu_down"
    LINK_DOWN = "link_down"
    LINK_DEGRADE = "link_degrade"
    STRAGGLER = "straggler"


class RecoveryPolicy(StrEnum):
    CHECKPOINT_RESTART = "checkpoint_restart"
    ELASTIC = "elastic"
    SPARES = "spares"


class Strict(BaseModel):
    """Base of every scenario section: unknown keys are errors, values are not coerced silently."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def _fail(message: str) -> PydanticCustomError:
    return PydanticCustomError(SIMDIST_ERROR, "{message}", {"message": message})


def _check_key(value: Any, info: ValidationInfo, family: str, what: str) -> Any:
    """A catalog key must exist when the context lists the catalog's keys."""
    keys = (info.context or {}).get(family)
    if isinstance(value, str) and keys is not None and value not in keys:
        raise _fail(unknown_key_message(value, list(keys), what))
    return value


def _shape(kinds: dict[str, Callable[[Any], bool]]) -> Callable[[Any], str | None]:
    """A callable discriminator: the tag of the first predicate the raw value satisfies."""

    def pick(value: Any) -> str | None:
        for tag, test in kinds.items():
            if test(value):
                return tag
        return None

    return pick


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_map(v: Any) -> bool:
    return isinstance(v, (dict, BaseModel))


def _key_or(model: type, expected: str) -> Any:
    """A field that is either a catalog key (string) or an inline mapping validated by `model`."""
    return Annotated[
        Union[Annotated[Key, Tag(TAG_PREFIX + "key")], Annotated[model, Tag(TAG_PREFIX + "inline")]],
        Discriminator(_shape({TAG_PREFIX + "key": _is_str, TAG_PREFIX + "inline": _is_map}),
                      custom_error_type=SIMDIST_ERROR, custom_error_message=expected),
    ]


# ----------------------------------------------------------------------------- cluster


class LinkModel(Strict):
    """A link class inline: line rate per direction, latency, achieved efficiency."""

    link: Key | None = None
    """Start from this catalog link (e.g. 'ib-hdr'); the other keys here override its figures."""
    bandwidth: Bandwidth | None = None
    """Line rate per direction, e.g. '200 Gb/s' or '300 GB/s'. Required unless `link` is given."""
    latency: Duration | None = None
    """One-way latency, e.g. '1 us'. Default: the transport's documented default."""
    efficiency: Efficiency | None = None
    """Achieved fraction of line rate, 0 < e <= 1. Default: the transport's documented default."""
    transport: Transport | None = None
    """rdma | tcp | nvlink | pcie | socket: picks the default latency and efficiency."""

    @field_validator("link")
    @classmethod
    def _known(cls, v: Any, info: ValidationInfo) -> Any:
        return _check_key(v, info, "link_keys", "link")


class NicModel(LinkModel):
    """The NICs of every node in a group: `count` NICs of one link class."""

    transport: NicTransport | None = None  # type: ignore[assignment]
    """rdma | tcp (default rdma): picks the default latency and efficiency."""
    count: PosInt = 1
    """NICs per node."""


class IntraNodeModel(LinkModel):
    """An inline node interior: every GPU on one switch (NVSwitch-like) with this per-GPU link."""

    base: Key | None = None
    """Start from this intra_node catalog entry (e.g. 'nvswitch-a100'); the link keys here override its GPU link."""
    layout: Literal["switch"] = "switch"
    """switch (the only inline layout; use catalog keys for cube_mesh, nvlink_pairs, pcie)."""

    @field_validator("base")
    @classmethod
    def _known_base(cls, v: Any, info: ValidationInfo) -> Any:
        return _check_key(v, info, "intra_node_keys", "intra_node")


LinkField = _key_or(LinkModel, "expected a link catalog key or a mapping {bandwidth, latency, efficiency}")
NicField = _key_or(NicModel, "expected a link catalog key or a mapping {bandwidth, latency, count, transport}")
IntraNodeField = _key_or(IntraNodeModel, "expected an intra_node catalog key or a mapping {bandwidth, latency}")
GpuField = Annotated[
    Union[Annotated[Key, Tag(TAG_PREFIX + "key")], Annotated[dict[str, Any], Tag(TAG_PREFIX + "inline")]],
    Discriminator(_shape({TAG_PREFIX + "key": _is_str, TAG_PREFIX + "inline": _is_map}),
                  custom_error_type=SIMDIST_ERROR,
                  custom_error_message="expected a GPU catalog key or an inline GPU mapping"),
]


class NodeGroupModel(Strict):
    """`count` identical nodes."""

    count: PosInt = 1
    """Number of nodes in this group."""
    gpu: GpuField
    """GPU catalog key (`simdist catalog gpus`) or an inline GPU spec."""
    gpus_per_node: PosInt | None = None
    """GPUs per node. Default: the intra_node layout's fixed count, else 1."""
    intra_node: IntraNodeField
    """Catalog key (e.g. 'nvswitch-a100') or inline {bandwidth, latency, efficiency}."""
    nic: NicField
    """Link catalog key or inline {bandwidth, latency, count, transport, efficiency}."""

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, v: Any, info: ValidationInfo) -> Any:
        return _check_key(v, info, "gpu_keys", "GPU")

    @field_validator("intra_node")
    @classmethod
    def _known_intra(cls, v: Any, info: ValidationInfo) -> Any:
        return _check_key(v, info, "intra_node_keys", "intra_node")

    @field_validator("nic")
    @classmethod
    def _known_nic(cls, v: Any, info: ValidationInfo) -> Any:
        return _check_key(v, info, "link_keys", "link")


class FabricModel(Strict):
    """How nodes are joined."""

    topology: TopologyKind = TopologyKind.SINGLE_SWITCH
    """single_switch | fat_tree | leaf_spine | ring | torus2d | torus3d | custom."""
    nodes_per_leaf: PosInt | None = None
    """fat_tree / leaf_spine: nodes under one leaf switch. Default: chosen by the builder."""
    oversubscription: PosFloat = 1.0
    """Leaf downlink / uplink capacity (fewer uplinks at the fabric link speed)."""
    link: LinkField | None = None
    """Switch-to-switch (or node-to-node) link. Default: the first node group's NIC link."""
    levels: Literal[2, 3] | None = None
    """fat_tree: 2 or 3 levels. Default: picked by size."""
    leaves_per_pod: PosInt | None = None
    """Three-level fat_tree: leaves per pod."""
    dims: list[PosInt] | None = None
    """torus2d / torus3d shape, e.g. [4, 4]. Default: near-square."""
    graphml: Key | None = None
    """custom: GraphML file, relative to the scenario file's folder."""

    @field_validator("link")
    @classmethod
    def _known_link(cls, v: Any, info: ValidationInfo) -> Any:
        return _check_key(v, info, "link_keys", "link")


class ClusterModel(Strict):
    """Node groups plus the fabric between them."""

    nodes: Annotated[list[NodeGroupModel], Field(min_length=1)]
    """Node groups; several groups make a heterogeneous cluster."""
    fabric: FabricModel = FabricModel()
    """The network between nodes. Default: one switch, NIC-speed links."""


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
            raise _fail(f"got {v!r}; expected 'package.module:factory' (a Python module path, not a file)")
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
    """Compute dtype: fp32 | tf32 | fp16 | bf16 | fp8."""
    seq_len: PosInt | None = None
    """Sequence length of transformer models (tokens per sample)."""
    grad_dtype: Precision = Precision.FP32
    """Dtype gradients are reduced in before compression."""

    @field_validator("model")
    @classmethod
    def _known_model(cls, v: Any, info: ValidationInfo) -> Any:
        return _check_key(v, info, "model_keys", "model")


# ----------------------------------------------------------------------------- training / communication


class ParallelismModel(Strict):
    dp: PosInt | None = None
    """Data-parallel degree. Default: GPUs / (tp x pp)."""
    tp: PosInt = 1
    """Tensor-parallel degree."""
    pp: PosInt = 1
    """Pipeline-parallel stages."""
    zero: Annotated[int, Field(strict=True, ge=0, le=3)] = 0
    """ZeRO stage 0-3 (3 = FSDP)."""


class TrainingModel(Strict):
    parallelism: ParallelismModel = ParallelismModel()
    """{dp, tp, pp, zero}; dp x tp x pp must equal the number of GPUs."""
    micro_batch: PosInt = 1
    """Pipeline micro-batch size."""
    schedule: PipelineSchedule = PipelineSchedule.ONE_F_ONE_B
    """Pipeline schedule: gpipe | 1f1b | interleaved."""
    sync: SyncMode = SyncMode.BSP
    """bsp | asp | ssp | local_sgd."""
    staleness: NonNegInt = 0
    """ssp: how many steps a worker may run ahead."""
    local_steps: PosInt = 1
    """local_sgd: steps between averaging."""
    grad_accumulation: PosInt = 1
    """Micro-steps accumulated before each gradient exchange."""
    batch_split: BatchSplit = BatchSplit.EQUAL
    """equal | proportional (to GPU speed, for mixed clusters)."""
    optimizer: Optimizer = Optimizer.SGD
    """sgd | momentum | adam: optimizer state memory and update cost (added key)."""
    convergence_factor: PosFloat = 1.0
    """Iterations needed relative to uncompressed BSP, an assumption for time-to-train (added key)."""


class HierarchicalModel(Strict):
    intra: StrategyKind = StrategyKind.RING
    """Algorithm inside a node: ring | tree | halving_doubling | torus2d."""
    inter: StrategyKind = StrategyKind.RING
    """Algorithm across nodes: ring | tree | halving_doubling | torus2d."""


class PsModel(Strict):
    servers: PosInt = 1
    """Parameter-server shards."""
    placement: PsPlacement = PsPlacement.COLOCATED
    """colocated (on worker nodes) | dedicated (extra hosts with the first group's NIC)."""


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
    """ring | tree | halving_doubling | hierarchical | torus2d | ps."""
    backend: Backend = Backend.TEXTBOOK
    """textbook | gloo | nccl: which library's real algorithms to model."""
    hierarchical: HierarchicalModel = HierarchicalModel()
    """hierarchical: {intra, inter} algorithms."""
    ps: PsModel = PsModel()
    """ps: {servers, placement}."""
    bucket_size: Size = 25e6
    """Gradient bucket size, e.g. '25 MB'."""
    fusion_cycle: Duration = 0.0
    """Horovod-style tensor fusion cycle, e.g. '5 ms'; '0 s' launches when a bucket fills (added key)."""
    overlap: StrictBool = True
    """Overlap gradient communication with backward compute."""
    compression: CompressionModel = CompressionModel()
    """{method, ratio, rank, error_feedback}."""


# ----------------------------------------------------------------------------- failures / run


class FailureEventModel(Strict):
    at: Duration
    """When, from the start of training, e.g. '2 h'."""
    kind: FailureKind
    """node_down | gpu_down | link_down | link_degrade | straggler."""
    target: Annotated[str, Field(strict=True)]
    """'node:3', 'gpu:12' or 'link:leaf0-spine1'."""

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        if not re.fullmatch(r"(node|gpu|link):\S+", v):
            raise _fail(f"got {v!r}; expected 'node:N', 'gpu:N' or 'link:NAME'")
        return v
    factor: Fraction | None = None
    """link_degrade: remaining fraction of bandwidth, 0 < f <= 1."""
    slowdown: PosFloat | None = None
    """straggler: compute time multiplier (>= 1)."""
    duration: PositiveDuration | None = None
    """How long it lasts. Default: until repaired (or for good)."""


class RandomFailuresModel(Strict):
    gpu_mtbf: PositiveDuration | None = None
    """Mean time between failures of one GPU, e.g. '50000 h'."""
    node_mtbf: PositiveDuration | None = None
    """Mean time between failures of one node."""
    link_mtbf: PositiveDuration | None = None
    """Mean time between failures of one link."""
    repair: Duration = 1800.0
    """Time to repair a failed part."""


class RecoveryModel(Strict):
    policy: RecoveryPolicy = RecoveryPolicy.CHECKPOINT_RESTART
    """checkpoint_restart | elastic | spares."""
    checkpoint_interval: PositiveDuration = 1800.0
    """Time between checkpoints."""
    checkpoint_write: Duration = 60.0
    """Time to write one checkpoint."""
    restart: Duration = 300.0
    """Time to restart after a failure."""


class FailuresModel(Strict):
    events: list[FailureEventModel] = []
    """Scheduled failures."""
    random: RandomFailuresModel | None = None
    """MTBF-sampled failures."""
    recovery: RecoveryModel = RecoveryModel()
    """How training recovers."""


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
