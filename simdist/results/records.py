"""What a simulation returns: plain frozen data matching DESIGN.md section 4.

`RunResult.to_dict()` is the public JSON object; keys may be added, never renamed.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class CollectiveRow:
    """One nccl-tests-style line: algbw = size / time, busbw = algbw x the op's bus factor."""

    op: str
    size_bytes: float
    time_s: float
    algbw_GBps: float
    busbw_GBps: float
    algorithm: str = ""


@dataclass(frozen=True)
class LinkUtilization:
    link: str
    utilization: float


@dataclass(frozen=True)
class Breakdown:
    """Seconds per iteration spent in each activity (they overlap, so they need not sum)."""

    compute: float = 0.0
    communication: float = 0.0
    exposed_communication: float = 0.0
    compression: float = 0.0
    optimizer: float = 0.0
    dp_communication: float | None = None  # sharded data parallelism (ZeRO / FSDP): the dp group's collectives

    def to_dict(self) -> dict[str, float]:
        """The JSON object: the terms a run has (the optional ones, None, are left out)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class MemoryUsage:
    per_gpu_bytes: float
    fits: bool
    capacity_bytes: float = 0.0
    parts_bytes: dict[str, float] = field(default_factory=dict)  # weights, gradients, optimizer, activations, ...


@dataclass(frozen=True)
class Throughput:
    samples_per_s: float
    tokens_per_s: float | None = None


@dataclass(frozen=True)
class StepRecord:
    """One event on one track, for iterations.csv and the Chrome trace."""

    track: str  # "gpu:3", "comm:3", "link:leaf0-spine1"
    name: str  # forward | backward | bucket3 | optimizer ...
    start_s: float
    end_s: float
    iteration: int = -1


@dataclass(frozen=True)
class RunResult:
    scenario: str
    simdist_version: str
    fidelity: str
    gpus: int
    iteration_time_s: float | None = None
    throughput: Throughput | None = None
    scaling_efficiency: float | None = None
    breakdown_s: Breakdown | None = None
    memory: MemoryUsage | None = None
    links: tuple[LinkUtilization, ...] = ()
    goodput: dict[str, Any] | None = None
    collectives: tuple[CollectiveRow, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # added keys (per-strategy detail, staleness...)
    iterations: tuple[float, ...] = ()  # per-iteration times (for iterations.csv), not in the JSON
    records: tuple[StepRecord, ...] = ()  # timeline (for trace.json), not in the JSON

    def to_dict(self) -> dict[str, Any]:
        """The public JSON object of DESIGN.md section 4 (deterministic: no wall-clock figures)."""
        out: dict[str, Any] = {
            "scenario": self.scenario,
            "simdist_version": self.simdist_version,
            "fidelity": self.fidelity,
            "gpus": self.gpus,
            "iteration_time_s": self.iteration_time_s,
            "throughput": asdict(self.throughput) if self.throughput else None,
            "scaling_efficiency": self.scaling_efficiency,
            "breakdown_s": self.breakdown_s.to_dict() if self.breakdown_s else None,
            "memory": asdict(self.memory) if self.memory else None,
            "links": [asdict(x) for x in self.links],
            "goodput": self.goodput,
            "collectives": [asdict(r) for r in self.collectives] if self.collectives is not None else None,
        }
        out.update(self.extra)
        return out
