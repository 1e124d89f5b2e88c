"""The `failures` section of the scenario schema: scheduled events, random failures, maintenance, recovery.

Strict like the rest of the schema; rules that need the cluster (targets exist, keys the chosen
policy uses) live in resolve_failures.py.
"""
import re
from typing import Annotated

from pydantic import Field, field_validator

from simdist.io.fields import (
    Bandwidth, Duration, Fraction, NonNegInt, PosFloat, PosInt, PositiveDuration, StrictBool,
)
from simdist.io.schema_cluster import Strict, fail
from simdist.scenario import FailureDistribution, FailureKind, RecoveryPolicy  # noqa: F401 - re-exported

_TARGET = re.compile(r"(gpu|node|link|switch):\S+")
NonNegFloat = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]


class FailureEventModel(Strict):
    at: Duration
    """When, from the start of training, e.g. '2 h'."""
    kind: FailureKind
    """gpu_down | node_down | link_down | switch_down | rack_down | link_degrade | straggler | network_jitter."""
    target: Annotated[str, Field(strict=True)] = ""
    """'gpu:K', 'node:K', 'link:U-V' or 'switch:NAME' as `simdist topo` names them (rack_down: the leaf switch); none for network_jitter."""
    factor: Fraction | None = None
    """link_degrade: remaining fraction of bandwidth, 0 < f <= 1."""
    slowdown: PosFloat | None = None
    """straggler: compute time multiplier (>= 1)."""
    duration: PositiveDuration | None = None
    """How long it lasts. Down kinds (elastic, spares only): until repaired, default failures.random.repair; slowdowns: default for good."""
    delay: PositiveDuration | None = None
    """network_jitter: median extra time per step, e.g. '5 ms' (the mean is delay x exp(sigma^2 / 2))."""
    sigma: NonNegFloat = 0.0
    """network_jitter: lognormal shape of the per-step delay (0: every step is delayed by exactly `delay`)."""

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        if v and not _TARGET.fullmatch(v):
            raise fail(f"got {v!r}; expected 'node:N', 'gpu:N', 'link:U-V' or 'switch:NAME'")
        return v


class RandomFailuresModel(Strict):
    gpu_mtbf: PositiveDuration | None = None
    """Mean time between failures of one GPU, e.g. '80000 h'. When no *_mtbf is given, all take the defaults of docs/failures.md."""
    node_mtbf: PositiveDuration | None = None
    """Mean time between failures of one node's host (CPU, memory, PCIe, software, mounts)."""
    nic_mtbf: PositiveDuration | None = None
    """Mean time between failures of one NIC (or its cable to the leaf)."""
    link_mtbf: PositiveDuration | None = None
    """Mean time between failures of one fabric link (switch to switch)."""
    switch_mtbf: PositiveDuration | None = None
    """Mean time between failures of one fabric switch (a leaf's failure takes its rack)."""
    distribution: FailureDistribution = FailureDistribution.EXPONENTIAL
    """exponential | weibull: law of one component's time between failures."""
    weibull_shape: PosFloat = 0.7
    """weibull: shape k (< 1 = decreasing hazard, as cluster studies find)."""
    repair: Duration = 1800.0
    """Mean time to repair a failed part (elastic rejoin, spares back in the pool)."""
    repair_sigma: NonNegFloat = 0.0
    """Lognormal shape of repair times (0: every repair takes `repair`)."""
    lemon_fraction: Annotated[float, Field(strict=True, ge=0, le=1)] = 0.0
    """Share of nodes ('lemons') whose GPUs, host and NICs fail lemon_factor x more often."""
    lemon_factor: PosFloat = 10.0
    """How much more often a lemon node fails."""


class MaintenanceModel(Strict):
    interval: PositiveDuration
    """Time between planned interruptions, e.g. '24 h'."""
    duration: PositiveDuration
    """How long each stops the job, e.g. '15 min'."""
    first: Duration | None = None
    """When the first one happens. Default: one interval after the start."""


class RecoveryModel(Strict):
    policy: RecoveryPolicy = RecoveryPolicy.CHECKPOINT_RESTART
    """checkpoint_restart | in_memory | elastic | spares | replica_groups."""
    checkpoint_interval: PositiveDuration = 1800.0
    """Compute time between checkpoints (in_memory: between copies to peers' memory)."""
    checkpoint_write: Duration | None = None
    """Blocking time of one persistent checkpoint. Default: model + optimizer bytes / storage_bandwidth, else '60 s'."""
    storage_bandwidth: Bandwidth | None = None
    """Aggregate write bandwidth of the checkpoint store, e.g. '50 GB/s' (instead of checkpoint_write)."""
    checkpoint_async: StrictBool = False
    """Only the snapshot to host memory blocks; the write runs behind and commits when done."""
    snapshot_bandwidth: Bandwidth = 20e9
    """Device-to-host copy bandwidth per GPU for async snapshots and in-memory copies."""
    detection: Duration = 60.0
    """Time until a failure is noticed (heartbeat / collective timeout)."""
    restart: Duration = 300.0
    """Time to restart after detection (reschedule, relaunch, load the checkpoint)."""
    persistent_interval: PositiveDuration | None = None
    """in_memory: compute time between persistent checkpoints. Default: 4 x checkpoint_interval."""
    spares: NonNegInt = 0
    """spares: hot spare nodes."""
    spare_delay: Duration = 60.0
    """spares: time to swap a spare in (after detection)."""
    replica_groups: PosInt | None = None
    """replica_groups: data-parallel replica groups (must divide the nodes). Default: one per node."""


class FailuresModel(Strict):
    events: list[FailureEventModel] = []
    """Scheduled failures, slowdowns and jitter."""
    random: RandomFailuresModel | None = None
    """MTBF-sampled failures ({} = the documented default rates)."""
    maintenance: MaintenanceModel | None = None
    """Planned interruptions {interval, duration, first}."""
    recovery: RecoveryModel = RecoveryModel()
    """How training recovers."""
