"""What a worker launch measures: a list of Case records, parsed from JSON or `kind:key=value,...` strings.

Plain data with no torch import, so the driver can build, split and describe cases cheaply.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from enum import StrEnum

from simdist.errors import ScenarioError
from simdist.units import parse_size


class CaseKind(StrEnum):
    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    HIERARCHICAL = "hierarchical"  # intra-node reduce-scatter, inter-node all_reduce, intra-node all_gather
    PS = "ps"  # parameter server: push shards to servers, then pull them back
    DDP = "ddp"  # DistributedDataParallel training steps of a synthetic MLP


class DdpHook(StrEnum):
    NONE = "none"
    FP16 = "fp16"
    POWERSGD = "powersgd"


COLLECTIVE_KINDS = (CaseKind.ALL_REDUCE, CaseKind.REDUCE_SCATTER, CaseKind.ALL_GATHER, CaseKind.HIERARCHICAL)


@dataclass(frozen=True)
class Case:
    """One measurement: `kind` at each of `sizes_bytes` (per-rank buffer, fp32), `reps` timed after `warmup`.

    ps: `servers`, `placement` (colocated | dedicated). hierarchical: `local_size` ranks per group
    (0 = LOCAL_WORLD_SIZE). ddp: an MLP of `depth` x Linear(hidden, hidden), `batch` samples, `hook`.
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
    scheme: str = "rs_ag"  # hierarchical: rs_ag (reduce-scatter/all_reduce/all_gather) | leader (reduce/all_reduce/broadcast)
    name: str = ""

    def __post_init__(self) -> None:
        if self.reps < 1 or self.warmup < 0:
            raise ScenarioError.bad_value("case.reps", (self.warmup, self.reps), "reps >= 1 and warmup >= 0")
        if self.placement not in ("colocated", "dedicated"):
            raise ScenarioError.bad_value("case.placement", self.placement, "colocated or dedicated")
        if self.scheme not in ("rs_ag", "leader"):
            raise ScenarioError.bad_value("case.scheme", self.scheme, "rs_ag or leader")
        if self.servers < 1:
            raise ScenarioError.bad_value("case.servers", self.servers, "at least 1 server")
        if self.kind is CaseKind.DDP and self.hook is DdpHook.POWERSGD and self.warmup < 2:
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
    def ddp_params(self) -> int:
        """Parameters of the synthetic MLP (weights and biases)."""
        return self.depth * (self.hidden * self.hidden + self.hidden)

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["kind"], d["hook"], d["sizes_bytes"] = str(self.kind), str(self.hook), list(self.sizes_bytes)
        return d


_INT_FIELDS = {f.name for f in fields(Case) if f.type in ("int", int)}


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


def split_launches(cases: list[Case]) -> list[list[Case]]:
    """Group cases into launches: all non-DDP cases together, each DDP case alone (pitfall 6)."""
    plain = [c for c in cases if c.kind is not CaseKind.DDP]
    ddp = [[c] for c in cases if c.kind is CaseKind.DDP]
    return ([plain] if plain else []) + ddp

