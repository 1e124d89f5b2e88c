"""What a simulation returns: plain frozen data matching DESIGN.md section 4.

`RunResult.to_dict()` is the public JSON object; keys may be added, never renamed.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


class Record:
    """A typed part of the JSON result, written as its object: its fields in order, the optional ones (default
    None) left out when None, records inside as theirs, tuples as lists."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if v is None and f.default is None:
                continue
            if isinstance(v, tuple):
                v = [x.to_dict() if hasattr(x, "to_dict") else (list(x) if isinstance(x, tuple) else x) for x in v]
            elif hasattr(v, "to_dict"):
                v = v.to_dict()
            out[f.name] = v
        return out


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
class Breakdown(Record):
    """Seconds per iteration spent in each activity (they overlap, so they need not sum)."""

    compute: float = 0.0
    communication: float = 0.0
    exposed_communication: float = 0.0
    compression: float = 0.0
    optimizer: float = 0.0
    dp_communication: float | None = None  # sharded data parallelism (ZeRO / FSDP): the dp group's collectives
    grad_copy: float | None = None  # PyTorch DDP: its copies of the reduced buckets into .grad (compute stream)


@dataclass(frozen=True)
class MpBreakdown(Breakdown):
    """Breakdown of a model-parallel iteration, averaged over the pipeline stages: `pipeline_bubble` is the
    time a stage's GPU idles inside the pipeline (waiting for inputs), `tp_communication` its tensor-parallel
    collectives, `dp_communication` its gradient all_reduces or ZeRO collectives (of both, the part the
    compute stream does not hide is in `exposed_communication`), `pp_communication` the time transfers to or
    from it are in flight."""

    pipeline_bubble: float = 0.0
    tp_communication: float = 0.0
    dp_communication: float = 0.0
    pp_communication: float = 0.0


@dataclass(frozen=True)
class NodeGroupRow(Record):
    """One node group of a data-parallel run: its GPUs, micro-batch (`batches`: every one a split gives its
    ranks), step time (its own unslowed compute per iteration) and `idle_s`, the time per iteration its compute
    waits for the slowest group; `precision` and `precision_ran` only where its GPU runs the workload's
    precision as another one."""

    group: int
    gpu: str
    gpus: int
    batch_per_gpu: int
    batches: tuple[int, ...]
    step_s: float
    idle_s: float
    rank_classes: int
    precision: str | None = None
    precision_ran: str | None = None


@dataclass(frozen=True)
class ShardingSummary(Record):
    """ZeRO / FSDP over the dp group: the stage, its units, and what each rank sends per iteration."""

    zero: int
    units: int
    largest_unit_params: float
    recompute: str
    ring_send_bytes_per_rank: float
    reduce_scatter_every_micro_batch: bool


@dataclass(frozen=True)
class StrategySummary(Record):
    """The run's strategy: every parallelism's common keys; `zero` a model-parallel run's ZeRO stage,
    `compression_ran` a data-parallel run's codec as it ran per bucket, `sharding` a ZeRO / FSDP run's."""

    name: str
    model: str
    backend: str
    buckets: int
    bucket_size_bytes: float
    overlap: bool
    compression: str
    global_batch: int
    batch_per_gpu: int
    grad_accumulation: int
    batch_split: str
    rank_classes: int
    zero: int | None = None
    compression_ran: dict[str, Any] | None = None
    sharding: ShardingSummary | None = None


@dataclass(frozen=True)
class PhaseRow(Record):
    """One steady phase of a phased run: its iterations, how it synchronised and split the batch, its rate."""

    phase: str
    first_iteration: int
    iterations: int
    sync: str
    batch_split: str
    iteration_time_s: float
    samples_per_s: float
    time_s: float


@dataclass(frozen=True)
class PhasesSummary(Record):
    """A phased run (sync hybrid, batch_split dynamic): the iteration-weighted whole and its phases; a hybrid
    run's switch (iteration and share of the run), a dynamic split's re-split period."""

    iterations: int
    time_s: float
    iteration_time_s: float
    samples_per_s: float
    phases: tuple[PhaseRow, ...]
    switch_iteration: int | None = None
    switch_fraction: float | None = None
    rebalance_every: int | None = None


@dataclass(frozen=True)
class SyncSummary(Record):
    """How a data-parallel run synchronised: its mode, every worker's samples/s, each worker's bytes into the
    exchange per iteration, the stragglers, observed staleness (`staleness_bound`: ssp's), the parameter
    servers' load (null without them); `local_steps` local SGD's period, `aggregate_samples_per_s` the
    asynchronous modes' sum, `hybrid` a hybrid run's phases."""

    mode: str
    per_worker_samples_per_s: list[float]
    min_worker_samples_per_s: float
    max_worker_samples_per_s: float
    wire_bytes_per_iteration: float
    stragglers: dict[str, float]
    staleness: dict[str, float]
    servers: list[dict[str, Any]] | None
    local_steps: int | None = None
    aggregate_samples_per_s: float | None = None
    staleness_bound: int | None = None
    hybrid: PhasesSummary | None = None


@dataclass(frozen=True)
class Cost(Record):
    """What the cluster costs per hour (every GPU at its price): a benchmark result's whole cost."""

    price_per_hour_usd: float


@dataclass(frozen=True)
class TrainingCost(Cost):
    """A training result's cost: per sample and token (per useful one under failures, by the goodput ratio;
    null where the run has none), and each GPU kind's price with its basis and date."""

    per_sample_usd: float | None
    per_token_usd: float | None
    per_useful_sample_usd: float | None
    per_useful_token_usd: float | None
    gpu_price_per_hour_usd: dict[str, float]
    gpu_price_source: dict[str, dict[str, str]]


@dataclass(frozen=True)
class FailureModel(Record):
    """A failure scenario's analytical figures beside the simulation (failures.montecarlo.model_summary): the
    component and job failure rates, the job MTBF between interruptions, the checkpoint costs, the Young/Daly
    interval and the first-order closed-form ratio (null where it does not apply)."""

    policy: str
    component_mtbf_s: dict[str, float]
    default_rates: bool
    distribution: str | None
    job_failures_per_day: float
    job_mtbf_s: float | None
    job_failures_per_day_by_component: dict[str, float]
    job_reroutes_per_day: float
    job_mtbf_counts: str
    checkpoint_interval_s: float
    checkpoint_blocking_s: float
    recovery_s: float
    young_daly_interval_s: float | None
    closed_form_ratio: float | None


GOODPUT_FIGURES = ("ratio", "useful_s", "wall_s", "lost_work_s", "checkpoint_s", "restart_s", "downtime_s", "degraded_s",
                   "failures", "restarts", "rejoins", "checkpoints", "correlated_failures", "maintenance",
                   "group_out_s", "samples_per_s", "tokens_per_s", "cost_per_sample_usd", "cost_per_token_usd")


@dataclass(frozen=True)
class Goodput(Record):
    """A failure run's figures, each the mean over `replicas` timelines (`ci95`: every figure's 95 % interval,
    written as `<name>_ci95` after it, with more than one replica), the failure model beside them and the
    cluster states the engine simulated (docs/failures.md)."""

    ratio: float  # useful training time / wall time
    useful_s: float
    wall_s: float
    lost_work_s: float
    checkpoint_s: float
    restart_s: float
    downtime_s: float
    degraded_s: float
    failures: float
    restarts: float
    rejoins: float
    checkpoints: float
    correlated_failures: float
    maintenance: float
    group_out_s: float
    samples_per_s: float
    tokens_per_s: float | None
    cost_per_sample_usd: float | None
    cost_per_token_usd: float | None
    ci95: dict[str, list[float] | None]  # figure -> [low, high]; empty with one replica
    failures_by_kind: dict[str, float]
    replicas: int
    fabric_faults: str
    rebalances: float | None = None  # batch_split dynamic
    rebalance_every: int | None = None
    model: FailureModel | None = None
    healthy_iteration_time_s: float | None = None
    states_simulated: int | None = None
    states_grouped: int | None = None
    unrunnable_states: dict[str, str] | None = None  # state -> why it cannot train

    def to_dict(self) -> dict[str, Any]:
        """docs/results.md's `goodput` object: each figure followed by its `_ci95` pair, then the rest."""
        out: dict[str, Any] = {}
        for name in GOODPUT_FIGURES:
            out[name] = getattr(self, name)
            if name in self.ci95:
                out[f"{name}_ci95"] = self.ci95[name]
        if self.rebalance_every is not None:
            out |= {"rebalances": self.rebalances, "rebalance_every": self.rebalance_every}
        out |= {"failures_by_kind": self.failures_by_kind, "replicas": self.replicas, "fabric_faults": self.fabric_faults}
        if self.model is not None:
            out |= self.model.to_dict()
        for name in ("healthy_iteration_time_s", "states_simulated", "states_grouped", "unrunnable_states"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


@dataclass(frozen=True)
class StageRow(Record):
    """One pipeline stage: its chunks' layers, parameters per GPU and per-iteration seconds of each activity."""

    stage: int
    layers: tuple[tuple[int, ...], ...]
    params_per_gpu: float
    compute_s: float
    optimizer_s: float
    tp_s: float
    tp_exposed_s: float
    dp_s: float
    dp_exposed_s: float
    pp_s: float
    bubble_s: float
    comm_s: float


@dataclass(frozen=True)
class ParallelismSummary(Record):
    """A dp x tp x pp (x cp) run's layout, schedule, chunking, pipeline transfer sizes and stages; `cp` and
    `cp_comm_type` only with context parallelism; `ep`, `etp`, `edp` (expert-data-parallel ranks) and
    `moe_load_imbalance` only for a mixture-of-experts model."""

    dp: int
    tp: int
    pp: int
    placement_order: str
    schedule: str
    virtual_stages: int
    micro_batch: int
    micro_batches: int
    sequence_parallel: bool
    tp_comm_overlap: bool
    zero: int
    recompute: str
    p2p_bytes: float
    p2p_gather_bytes: float
    warnings: tuple[str, ...]
    stages: tuple[StageRow, ...]
    cp: int | None = None
    cp_comm_type: str | None = None
    ep: int | None = None
    etp: int | None = None
    edp: int | None = None
    moe_load_imbalance: float | None = None


@dataclass(frozen=True)
class BenchmarkSummary(Record):
    """What a benchmark run swept: the collective, its ranks and the communication strategy and backend."""

    op: str
    ranks: int
    strategy: str
    backend: str


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
    goodput: Goodput | None = None  # a failure run's
    collectives: tuple[CollectiveRow, ...] | None = None
    strategy: StrategySummary | None = None  # a training run's
    parallelism: ParallelismSummary | None = None  # a model-parallel run's
    node_groups: tuple[NodeGroupRow, ...] | None = None  # a data-parallel run's
    sync: SyncSummary | None = None  # a data-parallel run's
    cost: Cost | None = None  # every run's, priced where it is made (engine/state.py with_cost)
    extra: dict[str, Any] = field(default_factory=dict)  # added keys (mfu, links_used, ...)
    benchmark: BenchmarkSummary | None = None  # a benchmark run's (written after `extra`)
    phases: PhasesSummary | None = None  # a phased run's (engine/composite.py run_phased; written after `extra`)
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
            "goodput": self.goodput.to_dict() if self.goodput else None,
            "collectives": [asdict(r) for r in self.collectives] if self.collectives is not None else None,
        }
        self._write_records(out, RECORD_KEYS[:_BEFORE_EXTRA])
        out.update(self.extra)
        self._write_records(out, RECORD_KEYS[_BEFORE_EXTRA:])
        return out

    def _write_records(self, out: dict[str, Any], keys: tuple[str, ...]) -> None:
        """The typed records among `keys` that the run has, as their JSON objects (lists for row tuples)."""
        for key in keys:
            value = getattr(self, key)
            if value is not None:
                out[key] = [x.to_dict() for x in value] if isinstance(value, tuple) else value.to_dict()


# RunResult's typed records (top-level JSON keys); the first _BEFORE_EXTRA go before `extra`, the rest after it
RECORD_KEYS = ("strategy", "parallelism", "node_groups", "sync", "cost", "benchmark", "phases")
_BEFORE_EXTRA = 5
