"""Tasks of an execution graph (DESIGN.md section 2): compute, collectives, point-to-point, host work.

A task starts when every task in `deps` has finished and the previous task on its `stream` (CUDA
streams run in order, as NCCL runs the calls of one communicator) has finished; a task with
`stream=None` waits for its dependencies only. Ids are the task's index in its graph, so
dependencies always point backwards (the graph is topologically sorted by construction).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

from simdist.collectives.schedule import CollectiveOp, Group
from simdist.topology.gcpause import gc_paused


class Stream(StrEnum):
    """The resource a task occupies on its rank."""

    COMPUTE = "compute"  # the GPU's compute stream (forward, backward, optimizer)
    COMM = "comm"  # the communication stream (codec encode/decode, collectives, one at a time)
    TP = "tp"  # tensor-parallel collectives (the compute waits for each: on the critical path)
    P2P_SEND = "p2p_send"  # pipeline sends, in order, beside the data-parallel stream
    P2P_RECV = "p2p_recv"  # pipeline receives (posted ahead; a transfer starts when both ends are there)


STREAMS: dict[str, Stream] = {s.value: s for s in Stream}


@dataclass(frozen=True)
class ProcessGroup:
    """Ranks that run collectives together (`kind` dp now; tp, pp and sharding groups later), with their
    topology endpoints in rank order (`endpoints.nodes` splits them by node for hierarchical schemes)."""

    name: str
    kind: str
    ranks: tuple[int, ...]
    endpoints: Group

    @property
    def size(self) -> int:
        return len(self.ranks)


@dataclass(frozen=True)
class Task:
    """What every task has: its id (index in the graph), a name saying what it is, dependencies, stream."""

    id: int
    name: str
    deps: tuple[int, ...] = ()
    stream: Stream | None = None


@dataclass(frozen=True)
class Compute(Task):
    """GPU (or timer) work of a known duration: a forward or backward segment, the optimizer step, a codec's
    encode/decode (`kind` says which; 'wait' is a launch delay such as Horovod's fusion cycle)."""

    duration_s: float = 0.0
    kind: str = "forward"
    # estimate's fused tp chains: where the task waits on fixed-time calls, as (start, end) offsets at the full
    # rate; compute-communication interference slows only the rest (Executor._work)
    waits: tuple[tuple[float, float], ...] = ()

    def segment_at(self, done_s: float) -> tuple[float, bool]:
        """From `done_s` seconds into the task (at the full rate): where its current part ends, and whether that
        part is a fixed-time wait."""
        for start, end in self.waits:
            if done_s < start:
                return start, False
            if done_s < end:
                return end, True
        return self.duration_s, False


@dataclass(frozen=True)
class Collective(Task):
    """An op on a process group; run once for the whole group when every member rank has reached it.
    `key` matches the same collective in the graphs of other rank classes."""

    group: str = "dp"
    op: CollectiveOp = CollectiveOp.ALL_REDUCE
    size_bytes: float = 0.0
    server_delay_s: float = 0.0  # PS: the servers' update of their shard inside the schedule
    key: str = ""


@dataclass(frozen=True)
class SendRecv(Task):
    """A point-to-point transfer between two endpoints (a PS push or pull of one shard)."""

    src: int = 0
    dst: int = 0
    size_bytes: float = 0.0
    kind: str = "push"
    shard: tuple = ()  # what it carries (PS: bucket, collective, server), for the sync policy


@dataclass(frozen=True)
class HostWork(Task):
    """CPU work on a host, e.g. a parameter server applying one worker's update to its shard."""

    host: int = 0
    duration_s: float = 0.0
    shard: tuple = ()


@dataclass(frozen=True)
class RankClass:
    """Ranks with identical graphs, hardware and network position: simulated once, reported for all."""

    index: int
    ranks: tuple[int, ...]
    node_group: int  # index into cluster.node_groups
    gpu: str  # GPU catalog key
    batch: int  # samples per micro-step
    slowdown: float = 1.0  # straggler multiplier of its compute

    @property
    def representative(self) -> int:
        return self.ranks[0]


@dataclass(frozen=True)
class Graph:
    """One iteration of one rank class (a local-SGD round is one iteration of H local steps)."""

    rank_class: RankClass
    tasks: tuple[Task, ...]

    def __post_init__(self) -> None:
        for i, t in enumerate(self.tasks):
            if t.id != i:
                raise ValueError(f"task {t.name!r} has id {t.id}, expected its index {i}")
            if any(not 0 <= d < i for d in t.deps):
                raise ValueError(f"task {t.name!r} depends on a later or unknown task: {t.deps}")

    def prerequisites(self) -> tuple[list[list[int]], list[int], list[int]]:
        """Per task: the tasks waiting for it, how many it waits for (its dependencies and the previous task on
        its stream, which it cannot start before) and that previous task (-1: none). The executor and the fold
        both start a task when these have ended. Computed once per graph: callers must not change them."""
        return self._prerequisites

    @cached_property
    def _prerequisites(self) -> tuple[list[list[int]], list[int], list[int]]:
        with gc_paused():  # a list per task, all surviving (topology/gcpause.py)
            return self._lists()

    def _lists(self) -> tuple[list[list[int]], list[int], list[int]]:
        after: list[list[int]] = [[] for _ in self.tasks]
        waiting, prev_on = [0] * len(self.tasks), [-1] * len(self.tasks)
        last: dict[Stream, int] = {}
        for t in self.tasks:
            pre = set(t.deps)
            if t.stream is not None:
                if t.stream in last:
                    prev_on[t.id] = last[t.stream]
                    pre.add(last[t.stream])
                last[t.stream] = t.id
            waiting[t.id] = len(pre)
            for d in pre:
                after[d].append(t.id)
        return after, waiting, prev_on
