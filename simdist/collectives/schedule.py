"""The common language between collective algorithms and network models.

An algorithm turns (op, size, group) into a `Schedule`: independent `chains` that run concurrently,
each a sequence of `Step`s. A step is a set of concurrent point-to-point `Transfer`s between
endpoints (GPU ids, then dedicated server hosts after the GPUs), optionally repeated. Network
models only ever see schedules, never algorithm names, so every algorithm runs on every model.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CollectiveOp(StrEnum):
    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_TO_ALL = "all_to_all"


@dataclass(frozen=True)
class Transfer:
    """`size_bytes` sent from endpoint `src` to endpoint `dst`."""

    src: int
    dst: int
    size_bytes: float


@dataclass(frozen=True)
class Step:
    """Concurrent transfers, done `repeat` times back to back.

    lockstep=True: the transfers move at the pace of the slowest (a pipelined ring: every hop waits
    for its predecessor), so they share one rate; all must then have the same size.
    lockstep=False: independent flows; the step ends when the last one ends.
    pipelined=True: the transfers form a ring whose every repetition moves data one hop further
    (NCCL/gloo ring steps); the latency paid over `repeat` repetitions is that of `repeat`
    consecutive hops, so each repetition costs the MEAN path latency of the transfers, not the
    max (a 512-GPU ring crosses nodes on 1 hop in 8). Otherwise each repetition costs the max.
    `delay_s` is non-network time after the transfers, once per step (e.g. a server's update);
    `reduce_bytes` is what each receiver reduces per repetition (for models that charge reduction).
    """

    transfers: tuple[Transfer, ...]
    repeat: int = 1
    lockstep: bool = True
    delay_s: float = 0.0
    reduce_bytes: float = 0.0
    label: str = ""
    pipelined: bool = False

    def __hash__(self) -> int:
        """Computed once: network models look steps up by value, and a ring step of a large cluster
        holds one transfer per GPU."""
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.transfers, self.repeat, self.lockstep, self.delay_s, self.reduce_bytes,
                           self.label, self.pipelined))
            object.__setattr__(self, "_hash", cached)
        return cached


@dataclass(frozen=True)
class Schedule:
    """What one collective call does on the wire: chains run concurrently, steps in a chain in order."""

    op: CollectiveOp
    algorithm: str
    size_bytes: float  # the op's nominal size (nccl-tests convention: per-rank buffer of all_reduce)
    chains: tuple[tuple[Step, ...], ...]
    protocol: str = ""  # the NCCL protocol it runs under (LL, LL128, Simple); "" = none modelled

    def wire_bytes(self) -> float:
        """Total bytes put on the wire by all transfers (each counted once, not per hop)."""
        return sum(t.size_bytes * s.repeat for chain in self.chains for s in chain for t in s.transfers)


@dataclass(frozen=True)
class Group:
    """The endpoints a collective runs over, in ring order, and the same endpoints grouped by node."""

    ranks: tuple[int, ...]
    nodes: tuple[tuple[int, ...], ...]

    @property
    def size(self) -> int:
        return len(self.ranks)

    @classmethod
    def flat(cls, ranks: "tuple[int, ...] | list[int]", per_node: int) -> "Group":
        """Consecutive ranks, `per_node` to a node."""
        ranks = tuple(ranks)
        return cls(ranks, tuple(ranks[i : i + per_node] for i in range(0, len(ranks), per_node)))
