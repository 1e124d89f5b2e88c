"""What the goodput timeline is given and gives back: a cluster state as the engine sees it, the job's
parameters, the seconds each recovery step costs (Costs), and where the wall time went (Tally).

Between two events the iteration time is constant, so the timeline asks the engine once per distinct
state for `step_time(state)` (seconds per iteration; math.inf when the state cannot train, e.g. the
survivors do not hold the model) and skips the steady-state iterations arithmetically.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

# what the job does between two events: trains, recovers (detection and restart), is down for maintenance,
# or waits for a repair (no rank can train)
RUN, RECOVER, DOWN, WAIT = "run", "recover", "down", "wait"


@dataclass(frozen=True)
class ClusterState:
    """Which nodes the job runs without, which GPUs straggle, which links are degraded."""

    nodes_out: frozenset[int] = frozenset()
    stragglers: tuple[tuple[int, float], ...] = ()  # (gpu, compute-time multiplier), sorted
    degraded_links: tuple[tuple[str, str, float], ...] = ()  # (u, v, remaining fraction), sorted
    keep_global_batch: bool = True  # elastic rebalances the batch; replica groups keep the per-GPU batch
    balanced_for: tuple[tuple[int, float], ...] | None = None  # batch_split dynamic: the stragglers the split was
    # last balanced for (it lags `stragglers` by rebalance_every iterations after a change); None: not dynamic


StepTime = Callable[[ClusterState], float]


@dataclass(frozen=True)
class JobSpec:
    """What the timeline needs to know about the job (all figures of the healthy cluster)."""

    duration_s: float
    gpus_per_node: tuple[int, ...]
    global_batch: int  # samples per iteration (all GPUs, all micro-steps)
    batch_per_gpu: int  # samples per data-parallel replica (one GPU, or tp x pp GPUs) per micro-step
    state_bytes: float  # model + optimizer state of one replica (a checkpoint)
    node_bandwidth_Bps: float  # one node's NIC bandwidth (peer copies, in-memory restore)
    micro_steps: int = 1  # gradient accumulation
    tokens_per_sample: int | None = None
    gpu_price_per_hour_usd: float = 0.0  # summed over the job's GPUs
    groups: tuple[tuple[int, ...], ...] = field(default=())  # replica_groups: the nodes of each group
    rebalance_every: int = 0  # batch_split dynamic: iterations between re-splits (0: a fixed split)
    gpus_per_replica: int = 1  # tp x pp: the GPUs of one data-parallel replica, which split no batch among them

    @property
    def nodes(self) -> int:
        return len(self.gpus_per_node)


def samples_per_step(job: JobSpec, state: ClusterState) -> int:
    """Samples one iteration commits in `state`: the global batch re-split over the survivors (rounded up to
    a whole per-GPU batch) when rebalancing, else the per-GPU batch times the GPUs left."""
    return batch_per_gpu(job, state) * job.micro_steps * gpus_in(job, state) // job.gpus_per_replica


def gpus_in(job: JobSpec, state: ClusterState) -> int:
    return sum(n for i, n in enumerate(job.gpus_per_node) if i not in state.nodes_out)


def batch_per_gpu(job: JobSpec, state: ClusterState) -> int:
    """The micro-batch per data-parallel replica the engine simulates for `state` (0: no replica left)."""
    replicas = gpus_in(job, state) // job.gpus_per_replica
    if not replicas:
        return 0
    if state.keep_global_batch:
        return math.ceil(job.global_batch / (replicas * job.micro_steps))
    return job.batch_per_gpu


@dataclass(frozen=True)
class Costs:
    """Seconds each recovery step takes (resolved from the scenario by failures.costs)."""

    interval_s: float  # compute time between checkpoints (in_memory: between copies to peers)
    write_s: float  # blocking part of a persistent checkpoint
    persist_s: float = 0.0  # async: background write after the blocking snapshot (0: synchronous)
    detection_s: float = 0.0
    restart_s: float = 0.0
    memory_copy_s: float = 0.0  # in_memory: blocking copy of a node's shard to its peer
    restore_s: float = 0.0  # in_memory: restore of a shard from the peer
    persistent_interval_s: float = math.inf  # in_memory: compute time between persistent checkpoints
    load_s: float = 0.0  # in_memory: reading the persistent checkpoint back after a correlated failure
    spares: int = 0
    spare_delay_s: float = 0.0
    weight_copy_s: float = 0.0  # replica_groups: a rejoining group copies the state from a peer


@dataclass
class Tally:
    """Where the wall time went, and counts."""

    wall_s: float = 0.0
    useful_s: float = 0.0
    degraded_s: float = 0.0
    lost_work_s: float = 0.0
    checkpoint_s: float = 0.0
    restart_s: float = 0.0
    downtime_s: float = 0.0
    failures: int = 0
    restarts: int = 0
    rejoins: int = 0
    checkpoints: int = 0
    correlated: int = 0
    maintenance: int = 0
    group_out_s: float = 0.0
    rebalances: int = 0  # batch_split dynamic: re-splits after a straggler appeared or went
    samples: float = 0.0
    failures_by_kind: dict[str, int] = field(default_factory=dict)
    segments: list[tuple[str, float, float]] = field(default_factory=list)  # (what, start, end) when recorded
