"""What a worker launch measures: a list of Case records, parsed from JSON or `kind:key=value,...` strings.

Plain data with no torch import, so the driver can build, split and describe cases cheaply.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from enum import StrEnum

from simdist.errors import ScenarioError
from simdist.scenario import CompressionMethod
from simdist.units import parse_size


class CaseKind(StrEnum):
    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    HIERARCHICAL = "hierarchical"  # intra-node reduce-scatter, inter-node all_reduce, intra-node all_gather
    PS = "ps"  # parameter server: push shards to servers, then pull them back
    DDP = "ddp"  # DistributedDataParallel training steps of a synthetic MLP
    P2P = "p2p"  # send/recv between pairs of ranks: ping-pong (latency) and one-way streams (bandwidth)
    CODEC = "codec"  # DDP steps on one-rank groups with every hook: the hooks' encode/decode cost, no network


class P2pMode(StrEnum):
    AUTO = "auto"  # ping-pong below STREAM_MIN_BYTES, one-way stream from there on
    PINGPONG = "pingpong"  # a sends, b sends back; the point is half the round trip
    STREAM = "stream"  # a sends, b receives; the point is the time until both are done


STREAM_MIN_BYTES = 1e6
NCCL_ALGOS = ("", "Ring", "Tree")  # "" = NCCL's tuner chooses (what simdist's `backend: nccl` models)
# ping-pong sizes far below tbf's 256 KB burst (latency), streams well above it (bandwidth)
P2P_SIZES = (1e3, 4e3, 4e6, 8e6, 16e6)


# DDP communication hooks, one per simdist compression method (validation/hooks.py: torch's own for none,
# fp16, PowerSGD and, on CUDA, bf16; hooks with simdist's wire bytes for the rest).
DdpHook = CompressionMethod


RATIO_HOOKS = (DdpHook.TOPK, DdpHook.RANDOMK)
PROBE_RATIO = 0.01  # the codec probe's top-k / random-k ratio


COLLECTIVE_KINDS = (CaseKind.ALL_REDUCE, CaseKind.REDUCE_SCATTER, CaseKind.ALL_GATHER, CaseKind.HIERARCHICAL)


@dataclass(frozen=True)
class Case:
    """One measurement: `kind` at each of `sizes_bytes` (per-rank buffer, fp32), `reps` timed after `warmup`.

    ps: `servers`, `placement` (colocated | dedicated). hierarchical: `local_size` ranks per group
    (0 = LOCAL_WORLD_SIZE). p2p: `pairs` "a-b/..." timed one pair at a time, `mode`, `local_size` ranks
    per rack (0 = one switch), which names each pair's class (same_switch | cross_uplink). ddp: an MLP of
    `depth` x Linear(hidden, hidden), `batch` samples, `hook`. codec: the same MLP, every hook, no network.
    """

    kind: CaseKind
    sizes_bytes: tuple[float, ...] = (16e6,)
    warmup: int = 1
    reps: int = 5
    servers: int = 1
    placement: str = "colocated"
    local_size: int = 0
    hook: DdpHook = DdpHook.NONE
    hidden: int = 1024
    depth: int = 8
    batch: int = 32
    powersgd_rank: int = 4
    bucket_mb: float = 0.0  # ddp: DDP's bucket_cap_mb (MiB); 0 = one bucket holding every gradient
    ratio: float = 0.0  # ddp with topk / randomk: fraction of elements kept
    error_feedback: bool = True  # ddp with onebit / topk / randomk / powersgd
    scheme: str = "rs_ag"  # hierarchical: rs_ag (reduce-scatter/all_reduce/all_gather) | leader (reduce/all_reduce/broadcast)
    mode: str = "auto"  # p2p: auto | pingpong | stream
    pairs: str = ""  # p2p: "0-1/0-2" (sender-receiver rank pairs); "" = 0-1
    nccl_algo: str = ""  # NCCL_ALGO of the launch on GPUs (Ring | Tree); "" = NCCL's own choice
    name: str = ""

    def __post_init__(self) -> None:
        if self.reps < 1 or self.warmup < 0:
            raise ScenarioError.bad_value("case.reps", (self.warmup, self.reps), "reps >= 1 and warmup >= 0")
        if self.placement not in ("colocated", "dedicated"):
            raise ScenarioError.bad_value("case.placement", self.placement, "colocated or dedicated")
        if self.scheme not in ("rs_ag", "leader"):
            raise ScenarioError.bad_value("case.scheme", self.scheme, "rs_ag or leader")
        if self.kind is CaseKind.DDP and self.hook in RATIO_HOOKS and not 0 < self.ratio <= 1:
            raise ScenarioError.bad_value("case.ratio", self.ratio, f"a kept fraction in (0, 1] for hook {self.hook}")
        if not self.bucket_mb >= 0:
            raise ScenarioError.bad_value("case.bucket_mb", self.bucket_mb, "a bucket cap in MiB >= 0 (0: one bucket)")
        if self.kind is CaseKind.DDP and self.hook is DdpHook.POWERSGD and self.bucket_mb:
            raise ScenarioError.bad_value("case.bucket_mb", self.bucket_mb, "0 with the PowerSGD hook: with several "
                                          "buckets its callbacks deadlock on gloo (notes, pitfall 6)")
        if self.nccl_algo not in NCCL_ALGOS:
            raise ScenarioError.bad_value("case.nccl_algo", self.nccl_algo, f"one of {list(NCCL_ALGOS)}")
        if self.mode not in tuple(P2pMode):
            raise ScenarioError.bad_value("case.mode", self.mode, f"one of {[m.value for m in P2pMode]}")
        if self.kind is CaseKind.P2P:
            self.pair_list  # noqa: B018  (checks the spelling)
        if self.servers < 1:
            raise ScenarioError.bad_value("case.servers", self.servers, "at least 1 server")
        if (self.kind is CaseKind.CODEC or self.kind is CaseKind.DDP and self.hook is DdpHook.POWERSGD) and self.warmup < 2:
            # PowerSGD compresses only from its 2nd iteration on (start_powerSGD_iter=2).
            object.__setattr__(self, "warmup", 2)

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.kind is CaseKind.PS:
            return f"ps-{self.servers}{self.placement[0]}"
        if self.kind is CaseKind.DDP:
            return f"ddp-{self.hook}"
        return str(self.kind)

    @property
    def pair_list(self) -> tuple[tuple[int, int], ...]:
        """p2p pairs as (sender, receiver) ranks."""
        out = []
        for item in filter(None, (self.pairs or "0-1").split("/")):
            a, dash, b = item.partition("-")
            if not (dash and a.strip().isdigit() and b.strip().isdigit()) or int(a) == int(b):
                raise ScenarioError.bad_value("case.pairs", self.pairs, "pairs of distinct ranks like '0-1/0-2'")
            out.append((int(a), int(b)))
        return tuple(out)

    def pair_class(self, a: int, b: int) -> str:
        """same_switch, or cross_uplink when `local_size` racks put the two ranks apart."""
        return "cross_uplink" if self.local_size and a // self.local_size != b // self.local_size else "same_switch"

    def p2p_mode(self, size_bytes: float) -> P2pMode:
        if self.mode != P2pMode.AUTO:
            return P2pMode(self.mode)
        return P2pMode.PINGPONG if size_bytes < STREAM_MIN_BYTES else P2pMode.STREAM

    @property
    def ddp_params(self) -> int:
        """Parameters of the synthetic MLP (weights and biases)."""
        return self.depth * (self.hidden * self.hidden + self.hidden)

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["kind"], d["hook"], d["sizes_bytes"] = str(self.kind), str(self.hook), list(self.sizes_bytes)
        return d


_INT_FIELDS = {f.name for f in fields(Case) if f.type in ("int", int)}
_FLOAT_FIELDS = {f.name for f in fields(Case) if f.type in ("float", float)}
_BOOL_FIELDS = {f.name for f in fields(Case) if f.type in ("bool", bool)}


def case_from_dict(d: dict[str, object], path: str = "case") -> Case:
    """A Case from JSON-like data; sizes may be numbers (bytes) or unit strings ('16 MB')."""
    known = {f.name for f in fields(Case)}
    unknown = set(d) - known
    if unknown:
        raise ScenarioError.bad_value(f"{path}", sorted(unknown), f"keys among {sorted(known)}")
    if "kind" not in d:
        raise ScenarioError.bad_value(f"{path}.kind", None, f"one of {[k.value for k in CaseKind]}")
    try:
        kind = CaseKind(str(d["kind"]))
    except ValueError:
        raise ScenarioError.bad_value(f"{path}.kind", d["kind"], f"one of {[k.value for k in CaseKind]}") from None
    kw: dict[str, object] = {"kind": kind}
    for key, val in d.items():
        if key == "kind":
            continue
        if key == "sizes_bytes":
            vals = val if isinstance(val, (list, tuple)) else [val]
            kw[key] = tuple(float(v) if isinstance(v, (int, float)) else parse_size(str(v), f"{path}.sizes_bytes")
                            for v in vals)
        elif key == "hook":
            try:
                kw[key] = DdpHook(str(val))
            except ValueError:
                raise ScenarioError.bad_value(f"{path}.hook", val, f"one of {[h.value for h in DdpHook]}") from None
        elif key in _INT_FIELDS:
            kw[key] = int(val)  # type: ignore[arg-type]
        elif key in _FLOAT_FIELDS:
            kw[key] = float(val)  # type: ignore[arg-type]
        elif key in _BOOL_FIELDS:
            if str(val).lower() not in ("true", "false", "1", "0"):
                raise ScenarioError.bad_value(f"{path}.{key}", val, "true or false")
            kw[key] = str(val).lower() in ("true", "1")
        else:
            kw[key] = val
    return Case(**kw)  # type: ignore[arg-type]


def parse_case(text: str) -> Case:
    """`all_reduce:sizes=4MB/16MB,reps=5` or `ps:servers=1,sizes=16MB` or `ddp:hook=fp16`."""
    kind, _, rest = text.partition(":")
    d: dict[str, object] = {"kind": kind.strip()}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, val = item.partition("=")
        if not eq:
            raise ScenarioError.bad_value(f"case '{text}'", item, "key=value")
        key = {"sizes": "sizes_bytes", "size": "sizes_bytes"}.get(key.strip(), key.strip())
        d[key] = val.split("/") if key == "sizes_bytes" else val.strip()
    return case_from_dict(d, path=f"case '{text}'")


def p2p_case(hosts: int, nodes_per_leaf: int | None = None, sizes_bytes: tuple[float, ...] = P2P_SIZES,
             warmup: int = 1, reps: int = 3, ranks_per_host: int = 1, name: str = "p2p") -> Case:
    """One pair per pair class of the layout: hosts 0-1 on one switch, and 0 to the first host of the
    next rack across the rack uplink when there are racks (one rank per host unless `ranks_per_host`)."""
    if hosts < 2:
        raise ScenarioError.bad_value("hosts", hosts, "at least 2 hosts for point-to-point pairs")
    pairs = []
    if nodes_per_leaf is None or nodes_per_leaf >= 2:
        pairs.append((0, ranks_per_host))
    if nodes_per_leaf is not None and hosts > nodes_per_leaf:
        pairs.append((0, nodes_per_leaf * ranks_per_host))
    return Case(CaseKind.P2P, tuple(sizes_bytes), warmup, reps, local_size=(nodes_per_leaf or 0) * ranks_per_host,
                pairs="/".join(f"{a}-{b}" for a, b in pairs), name=name)


def codec_case(hidden: int = 1024, depth: int = 8, powersgd_rank: int = 4, reps: int = 5,
               name: str = "codec") -> Case:
    """The codec probe: local DDP steps of an MLP with each hook (top-k and random-k at PROBE_RATIO). Batch 1,
    so that the hooks' encode/decode is not lost in the jitter of the forward/backward pass. `simdist
    calibrate` uses it only for a method no DDP step timed in-step: outside the 4-rank step it mistimes
    the hooks (validation/hook_timing.py).
    """
    return Case(CaseKind.CODEC, warmup=2, reps=reps, hidden=hidden, depth=depth, batch=1,
                powersgd_rank=powersgd_rank, name=name)


def split_launches(cases: list[Case]) -> list[list[Case]]:
    """Group cases into launches: the non-DDP cases of each NCCL_ALGO together (NCCL reads it when the
    communicator is created), each DDP case alone (pitfall 6)."""
    plain: dict[str, list[Case]] = {}
    for c in cases:
        if c.kind is not CaseKind.DDP:
            plain.setdefault(c.nccl_algo, []).append(c)
    ddp = [[c] for c in cases if c.kind is CaseKind.DDP]
    return list(plain.values()) + ddp
