"""The common language between collective algorithms and network models.

An algorithm turns (op, size, group) into a `Schedule`: independent `chains` that run concurrently,
each a sequence of `Step`s. A step is a set of concurrent point-to-point `Transfer`s between
endpoints (GPU ids, then dedicated server hosts after the GPUs), optionally repeated. Network
models only ever see schedules, never algorithm names, so every algorithm runs on every model.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np


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


class TransferArray(Sequence):
    """Transfers held as three read-only arrays (src, dst, size_bytes) instead of one `Transfer` object
    each: what a ring step of a large cluster is (one transfer per GPU). It reads as a tuple of
    `Transfer`s (len, indexing, iteration, equality with an equal tuple), and network models read its
    arrays directly, so a 131,072-GPU ring step costs three arrays, not 131,072 objects."""

    __slots__ = ("src", "dst", "size_bytes", "_digests")

    def __init__(self, src, dst, size_bytes) -> None:
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        size = np.broadcast_to(np.asarray(size_bytes, dtype=np.float64), src.shape)
        if src.ndim != 1 or dst.shape != src.shape:
            raise ValueError(f"TransferArray needs 1-d src and dst of equal length, got {src.shape} and {dst.shape}")
        for a in (src, dst, size):
            if a.flags.writeable:
                a.flags.writeable = False
        self.src, self.dst, self.size_bytes = src, dst, size
        self._digests = None

    @classmethod
    def concat(cls, parts: "Sequence[TransferArray]") -> "TransferArray":
        """The parts' transfers one after another (as tuple concatenation would give them)."""
        if len(parts) == 1:
            return parts[0]
        return cls(np.concatenate([p.src for p in parts]), np.concatenate([p.dst for p in parts]),
                   np.concatenate([p.size_bytes for p in parts]))

    def scaled(self, factor: float) -> "TransferArray":
        """Every size multiplied by `factor` (one float multiply each, as t.size_bytes * factor)."""
        return TransferArray(self.src, self.dst, self.size_bytes * factor)

    def pairs(self) -> "list[tuple[int, int]]":
        """(src, dst) of every transfer, as Python ints."""
        return list(zip(self.src.tolist(), self.dst.tolist()))

    def __len__(self) -> int:
        return int(self.src.size)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return TransferArray(self.src[i], self.dst[i], self.size_bytes[i])
        return Transfer(int(self.src[i]), int(self.dst[i]), float(self.size_bytes[i]))

    def __iter__(self):
        return map(Transfer, self.src.tolist(), self.dst.tolist(), self.size_bytes.tolist())

    def __eq__(self, other) -> bool:
        if isinstance(other, TransferArray):
            return (other is self or (len(other) == len(self) and np.array_equal(self.src, other.src)
                                      and np.array_equal(self.dst, other.dst)
                                      and np.array_equal(self.size_bytes, other.size_bytes)))
        if isinstance(other, tuple):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        """From the arrays' digest (equal arrays, equal hash; a tuple of equal Transfers hashes otherwise,
        which only costs a cache miss where both kinds meet)."""
        from hashlib import blake2b

        return int.from_bytes(blake2b(self.triples().tobytes(), digest_size=8).digest(), "little", signed=True)

    def __add__(self, other):
        if isinstance(other, TransferArray):
            return TransferArray.concat([self, other])
        if isinstance(other, tuple):
            return tuple(self) + other
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, tuple):
            return other + tuple(self)
        return NotImplemented

    def __reduce__(self):
        return (TransferArray, (np.array(self.src), np.array(self.dst), np.array(self.size_bytes)))

    def __repr__(self) -> str:
        return f"TransferArray(n={len(self)}, first={self[0] if len(self) else None})"

    def triples(self) -> np.ndarray:
        """The (n, 3) float array of (src, dst, size_bytes) rows."""
        return np.column_stack((self.src.astype(np.float64), self.dst.astype(np.float64), self.size_bytes))


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
    `streams`: the TCP streams behind each transfer's connection (gloo and textbook rings 1; NCCL 2, its
    duplicated channels): on a link with a per-stream cap (LinkSpec.stream_cap_Bps) a transfer moves at
    most streams x that cap.
    `hop_latency_s`: when set, what each repetition's hop costs instead of the routed paths' latency (NCCL's own
    per-hop latencies under backend nccl on kernel-bypass fabrics: protocols.apply_protocol).
    `shared_thread`: one CPU thread per rank moves all of its socket traffic, sent and received (NCCL's proxy
    thread when its socket transport spawns no helper threads, net_socket.cc): a transfer over a stream-capped
    link gets `streams` stream caps divided by the most such transfers either of its ranks has in the step.
    """

    transfers: tuple[Transfer, ...]
    repeat: int = 1
    lockstep: bool = True
    delay_s: float = 0.0
    reduce_bytes: float = 0.0
    label: str = ""
    pipelined: bool = False
    streams: int = 1
    hop_latency_s: float | None = None
    shared_thread: bool = False

    def __hash__(self) -> int:
        """Computed once: network models look steps up by value, and a ring step of a large cluster
        holds one transfer per GPU."""
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.transfers, self.repeat, self.lockstep, self.delay_s, self.reduce_bytes,
                           self.label, self.pipelined, self.streams, self.hop_latency_s, self.shared_thread))
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

    def with_streams(self, streams: int, shared_thread: bool = False) -> "Schedule":
        """The same schedule with every connection running `streams` TCP streams (Step.streams), their ranks'
        socket transfers sharing one thread each where `shared_thread` (Step.shared_thread)."""
        return replace(self, chains=tuple(tuple(replace(s, streams=streams, shared_thread=shared_thread)
                                                for s in chain) for chain in self.chains))


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
