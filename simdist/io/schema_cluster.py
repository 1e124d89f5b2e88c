"""The cluster part of the strict scenario schema (DESIGN.md section 3) and the shared schema machinery.

`Strict` is the base of every section (unknown keys are errors; attribute docstrings describe the
keys, read by io.reference); `key_or` builds "catalog key or inline mapping" fields whose catalog keys are checked
against the catalogs passed in pydantic's validation context (`{"gpu_keys": [...], ...}`).
"""
import re
from enum import StrEnum
from typing import Annotated, Any, Callable, Literal, Union

from pydantic import (
    AfterValidator, BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, ValidationInfo, field_validator,
)
from pydantic_core import PydanticCustomError

from simdist.hardware.specs import RoutingKind, TopologyKind
from simdist.io.fields import (
    SIMDIST_ERROR, Bandwidth, Duration, Efficiency, Flops, Key, PosFloat, PosInt, Size, StrictBool, no_bool,
    unknown_key_message,
)

DEFAULT_INTRA_NODE = "pcie-gen4"  # node interior when a node group gives none (docs/scenario.md)
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


class Strict(BaseModel):
    """Base of every scenario section: unknown keys are errors, values are not coerced silently.
    Attribute docstrings describe the keys; io.reference reads them when it documents the schema."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def fail(message: str) -> PydanticCustomError:
    return PydanticCustomError(SIMDIST_ERROR, "{message}", {"message": message})


def check_key(value: Any, info: ValidationInfo, family: str, what: str) -> Any:
    """A catalog key must exist when the context lists the catalog's keys."""
    keys = (info.context or {}).get(family)
    if isinstance(value, str) and keys is not None and value not in keys:
        raise fail(unknown_key_message(value, list(keys), what))
    return value


def shape(kinds: dict[str, Callable[[Any], bool]]) -> Callable[[Any], str | None]:
    """A callable discriminator: the tag of the first predicate the raw value satisfies."""

    def pick(value: Any) -> str | None:
        for tag, test in kinds.items():
            if test(value):
                return tag
        return None

    return pick


def is_str(v: Any) -> bool:
    return isinstance(v, str)


def is_map(v: Any) -> bool:
    return isinstance(v, (dict, BaseModel))


def key_or(model: type, expected: str) -> Any:
    """A field that is either a catalog key (string) or an inline mapping validated by `model`."""
    return Annotated[
        Union[Annotated[Key, Tag(TAG_PREFIX + "key")], Annotated[model, Tag(TAG_PREFIX + "inline")]],
        Discriminator(shape({TAG_PREFIX + "key": is_str, TAG_PREFIX + "inline": is_map}),
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
        return check_key(v, info, "link_keys", "link")


class NicModel(LinkModel):
    """The NICs of every node in a group: `count` NICs of one link class."""

    transport: NicTransport | None = None  # type: ignore[assignment]
    """rdma | tcp (default rdma): picks the default latency and efficiency."""
    count: PosInt = 1
    """NICs per node."""
    gpudirect: StrictBool | None = None
    """GPUDirect RDMA: the NIC reads and writes GPU memory itself. false: transfers are staged through host memory over PCIe. Default: true for rdma, false for tcp (which cannot be true)."""
    flow_cap: Bandwidth | None = None
    """The most one connection (one flow: a ring neighbour, a worker-server pair) moves through this NIC per direction, e.g. '5 Gb/s' (AWS's single-flow limit outside a cluster placement group) or a measured `iperf -P 1` rate. Flows share the NIC max-min fairly under this cap each. Default: none."""
    stream_cap: Bandwidth | None = None
    """tcp only: the most one TCP stream moves per direction (one core's kernel path at each end); a connection of k streams (gloo and textbook rings 1, NCCL 2) moves at most k x this. Default: transport tcp's 25 Gb/s (links.yaml; ESnet's single-stream range on a 100G host is 15-35 Gb/s), none where the NIC's line rate is no faster."""


class IntraNodeModel(LinkModel):
    """An inline node interior: every GPU on one switch (NVSwitch-like) with this per-GPU link."""

    base: Key | None = None
    """Start from this intra_node catalog entry (e.g. 'nvswitch-a100'); the link keys here override its GPU link."""
    layout: Literal["switch"] = "switch"
    """switch (the only inline layout; use catalog keys for cube_mesh, nvlink_pairs, full_mesh, pcie)."""

    @field_validator("base")
    @classmethod
    def _known_base(cls, v: Any, info: ValidationInfo) -> Any:
        return check_key(v, info, "intra_node_keys", "intra_node")


DType = Literal["fp32", "tf32", "fp16", "bf16", "fp8", "mxfp8", "nvfp4"]  # the last two: Blackwell block scaling
CollectiveOp = Literal["default", "all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all"]
_PRICE_MONTH = re.compile(r"(19|20)\d\d-(0[1-9]|1[0-2])")


def _price_month(value: str) -> str:
    if value != "unknown" and not _PRICE_MONTH.fullmatch(value):
        raise fail(f"got {value!r}; expected the month the price was read, 'YYYY-MM', or 'unknown'")
    return value


Text = Annotated[str, Field(strict=True, min_length=1, pattern=r"\S")]
PriceMonth = Annotated[str, Field(strict=True), AfterValidator(_price_month)]
Dollars = Annotated[float, BeforeValidator(no_bool), Field(strict=True, ge=0, allow_inf_nan=False)]
Slowdown = Annotated[float, BeforeValidator(no_bool), Field(strict=True, ge=0, le=10, allow_inf_nan=False)]


def per_key_or_one(value_type: Any, key_type: Any, expected: str) -> Any:
    """A field that is one value for every key or a mapping {key: value} (a GPU's efficiency per dtype)."""
    return Annotated[
        Union[Annotated[value_type, Tag(TAG_PREFIX + "one")], Annotated[dict[key_type, value_type],
                                                                         Tag(TAG_PREFIX + "per_key")]],
        Discriminator(shape({TAG_PREFIX + "per_key": is_map, TAG_PREFIX + "one": lambda v: not is_map(v)}),
                      custom_error_type=SIMDIST_ERROR, custom_error_message=expected),
    ]


class GpuFigures(Strict):
    """The figures of a GPU that a run reads, as the GPU catalog (gpus.yaml) gives them; every key optional here.
    The catalog's documentation-only keys (tdp_w, source, efficiency_source, interference_source) are catalog
    entries' alone: a scenario's inline GPU would accept them and change nothing."""

    name: Text | None = None
    """Display name. Default: the base's, or 'custom'."""
    vendor: Text | None = None
    """nvidia | amd | ... (shown in tables). Default: the base's, or none."""
    peak_flops: dict[DType, Flops] | None = None
    """Peak dense FLOP/s per dtype, e.g. {fp16: '312 TFLOP/s', fp32: '19.5 TFLOP/s'}; with `base`, added to
    (or replacing) the base's dtypes. Required unless `base` is given, with fp32 among them (the optimizer step runs
    in fp32, and a float dtype the GPU has no units for runs as fp32)."""
    memory: Size | None = None
    """Device memory, e.g. '80 GiB'. Required unless `base` is given."""
    memory_bandwidth: Bandwidth | None = None
    """Device memory bandwidth, e.g. '2 TB/s'. Required unless `base` is given."""
    price_per_hour_usd: Dollars | None = None
    """Price of one GPU-hour in US dollars (>= 0); a price given here is the scenario's own (basis 'given').
    Default: the base's, or 0."""
    price_basis: Text | None = None
    """Where the price comes from (a cloud list price, a quote)."""
    price_date: PriceMonth | None = None
    """The month the price was read, 'YYYY-MM', or 'unknown'."""
    compute_efficiency: per_key_or_one(Efficiency, DType, "expected a fraction 0 < e <= 1 or a mapping "
                                                          "{dtype: fraction}") | None = None
    """Achieved fraction of peak on dense GEMMs: one fraction for every dtype of peak_flops, or {dtype: fraction}.
    Default: the base's, or none (the workload's default efficiency)."""
    comm_interference: per_key_or_one(Slowdown, CollectiveOp, "expected a slowdown fraction in [0, 10] or a "
                                                                "mapping {collective op or default: slowdown}") | None = None
    """Compute slowdown while a collective of its rank runs (0.19 = 19 % slower): one figure, or per collective op
    {default, all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all: s}, each in [0, 10].
    Default: the base's, or none."""
    pcie_p2p: StrictBool | None = None
    """GPU peer-to-peer over PCIe; false (GeForce parts) stages GPU-GPU traffic through host memory.
    Default: the base's, or true."""


class GpuOverrideModel(GpuFigures):
    """An inline GPU from a catalog entry: `base` plus the figures that differ (e.g. a price, an fp8 peak)."""

    base: Key | None = None
    """Start from this GPU catalog entry (e.g. 'a100-sxm4-80gb'); the keys given beside it override its figures.
    Without it, peak_flops, memory and memory_bandwidth are required."""

    @field_validator("base")
    @classmethod
    def _known_base(cls, v: Any, info: ValidationInfo) -> Any:
        return check_key(v, info, "gpu_keys", "GPU")


def _with_fp32(peak: dict[str, float]) -> dict[str, float]:
    """A GPU's own peak_flops name fp32: the optimizer step runs in fp32, and every other float dtype falls back to it."""
    if "fp32" not in peak:
        raise fail(f"got {', '.join(peak) or 'no dtypes'}; expected fp32 among them (the optimizer step runs in fp32, "
                   "and a dtype the GPU has no units for runs as fp32)")
    return peak


class GpuModel(GpuFigures):
    """An inline GPU without a catalog base: peak FLOP/s (fp32 among them), memory and memory bandwidth are required."""

    peak_flops: Annotated[dict[DType, Flops], AfterValidator(_with_fp32)]  # type: ignore[assignment]
    """Peak dense FLOP/s per dtype, fp32 among them, e.g. {fp32: '19.5 TFLOP/s', fp16: '312 TFLOP/s'}."""
    memory: Size  # type: ignore[assignment]
    """Device memory, e.g. '80 GiB'."""
    memory_bandwidth: Bandwidth  # type: ignore[assignment]
    """Device memory bandwidth, e.g. '2 TB/s'."""


class CatalogGpuModel(GpuFigures):
    """A GPU catalog entry (gpus.yaml): the inline figures, each documented figure required."""

    name: Text  # type: ignore[assignment]
    """Display name, e.g. 'A100 SXM4 80GB'."""
    vendor: Text  # type: ignore[assignment]
    """nvidia | amd | ..."""
    peak_flops: Annotated[dict[DType, Flops], AfterValidator(_with_fp32)]  # type: ignore[assignment]
    """Peak dense FLOP/s per dtype, fp32 among them."""
    memory: Size  # type: ignore[assignment]
    """Device memory."""
    memory_bandwidth: Bandwidth  # type: ignore[assignment]
    """Device memory bandwidth."""
    tdp_w: PosFloat | None = None
    """Board power in watts (shown by `simdist catalog gpus`); absent where the vendor publishes none (TPU v5p)."""
    price_per_hour_usd: Dollars  # type: ignore[assignment]
    """Indicative price of one GPU-hour in US dollars."""
    price_basis: Text  # type: ignore[assignment]
    """Where the price comes from."""
    price_date: PriceMonth  # type: ignore[assignment]
    """The month the price was read, 'YYYY-MM', or 'unknown'."""
    compute_efficiency: per_key_or_one(Efficiency, DType, "expected a fraction 0 < e <= 1 or a mapping "  # type: ignore[valid-type]
                                                          "{dtype: fraction}")
    """Achieved fraction of peak on dense GEMMs, per dtype."""
    source: Text
    """Where the figures come from (datasheet, paper)."""
    efficiency_source: Text | None = None
    """Where compute_efficiency comes from (added to the source)."""
    interference_source: Text | None = None
    """Where comm_interference comes from (added to the source)."""


def has_base(value: Any) -> bool:
    """An inline GPU that names a catalog base (read as GpuOverrideModel)."""
    return isinstance(value, GpuOverrideModel) or isinstance(value, dict) and value.get("base") is not None


LinkField = key_or(LinkModel, "expected a link catalog key or a mapping {bandwidth, latency, efficiency}")
NicField = key_or(NicModel, "expected a link catalog key or a mapping {bandwidth, latency, count, transport}")
IntraNodeField = key_or(IntraNodeModel, "expected an intra_node catalog key or a mapping {bandwidth, latency}")
GpuField = Annotated[
    Union[Annotated[Key, Tag(TAG_PREFIX + "key")], Annotated[GpuOverrideModel, Tag(TAG_PREFIX + "based")],
          Annotated[GpuModel, Tag(TAG_PREFIX + "inline")]],
    Discriminator(shape({TAG_PREFIX + "key": is_str,
                         TAG_PREFIX + "based": has_base,
                         TAG_PREFIX + "inline": is_map}),
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
    intra_node: IntraNodeField | None = None
    """Catalog key (e.g. 'nvswitch-a100') or inline {bandwidth, latency, efficiency}. Default: the catalog
    interior 'pcie-gen4' (a PCIe server; a 1-GPU node uses only its GPU-to-NIC hop), named in the cluster summary."""
    nic: NicField
    """Link catalog key or inline {bandwidth, latency, count, transport, efficiency}."""

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, v: Any, info: ValidationInfo) -> Any:
        return check_key(v, info, "gpu_keys", "GPU")

    @field_validator("intra_node")
    @classmethod
    def _known_intra(cls, v: Any, info: ValidationInfo) -> Any:
        return check_key(v, info, "intra_node_keys", "intra_node")

    @field_validator("nic")
    @classmethod
    def _known_nic(cls, v: Any, info: ValidationInfo) -> Any:
        return check_key(v, info, "link_keys", "link")


class FabricModel(Strict):
    """How nodes are joined."""

    topology: TopologyKind = TopologyKind.SINGLE_SWITCH
    """single_switch | fat_tree | leaf_spine | ring | torus2d | torus3d | custom."""
    nodes_per_leaf: PosInt | None = None
    """fat_tree / leaf_spine: nodes under one leaf switch. Default: chosen by the builder."""
    oversubscription: PosFloat = 1.0
    """Leaf downlink / uplink capacity (fewer uplinks at the fabric link speed); at least 0.01."""
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
    routing: RoutingKind = RoutingKind.AUTO
    """auto | dmodk | ecmp | spray: equal-cost path choice. auto: dmodk (InfiniBand subnet manager,
    destination-based) when every NIC is rdma, else ecmp (per-flow hash); spray: ecmp with each
    connection split over 4 hashed paths (NCCL queue pairs). dmodk needs a switched fabric (added key)."""
    sharp: StrictBool = False
    """The InfiniBand switches reduce in-network (SHARP: Quantum HDR SHARPv2, Quantum-2 NDR SHARPv3) and the
    CollNet plugin is installed; read only with communication.collnet: true. Needs a switched topology and rdma NICs
    (added key)."""

    @field_validator("link")
    @classmethod
    def _known_link(cls, v: Any, info: ValidationInfo) -> Any:
        return check_key(v, info, "link_keys", "link")


class ClusterModel(Strict):
    """Node groups plus the fabric between them."""

    nodes: Annotated[list[NodeGroupModel], Field(min_length=1)]
    """Node groups; several groups make a heterogeneous cluster."""
    fabric: FabricModel = FabricModel()
    """The network between nodes. Default: one switch, NIC-speed links."""
