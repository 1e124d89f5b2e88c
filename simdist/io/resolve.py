"""Validated schema model -> simdist.scenario.Scenario (frozen dataclasses, SI units), with cross-field checks.

Every rule that spans keys (dp x tp x pp = GPUs, batch divisibility, PS server count, failure
targets, iterations vs duration) is checked here and reported with the YAML path it concerns; all
issues are collected before one ScenarioError is raised.
"""
from __future__ import annotations

from pathlib import Path

import simdist.io.calibration as calibration_profiles
from simdist.collectives.fabric import intra_node_has_nvls
from simdist.compute import TENSOR_CORE_PRECISIONS
from simdist.errors import Issue, ScenarioError
from simdist.io.resolve_cluster import resolve_cluster
from simdist.io.resolve_workload import resolve_workload
from simdist.io.resolve_failures import resolve_failures
from simdist.io.rules_finetune import finetune_model
from simdist.io.rules_nccl import ddp_average_issues, nccl_choice_issues, nccl_socket_issues
from simdist.io.rules_precision import run_option_issues, with_run_options
from simdist.io.rules_recompute import recompute_module_issues
from simdist.io.schema import RunModel, ScenarioModel
from simdist.scenario import (
    Backend, BatchSplit, Bucketing, CommunicationSpec, CpCommType, DdpAverage, CompressionMethod, CompressionSpec,
    Fidelity, GradClipping, GradProcessing, LossScaling, Optimizer, OptimizerKernels, ParallelismSpec,
    PipelineSchedule, PsAggregation, PsPlacement, PsServer, Recompute,
    RunSpec, Scenario, StrategyKind, SyncMode, TrainingSpec, WorkloadSpec,
)

_SUB_ALGORITHMS = {StrategyKind.RING, StrategyKind.TREE, StrategyKind.HALVING_DOUBLING}  # collectives.flat builders


def _training(m: ScenarioModel, gpus: int | None, issues: list[Issue]) -> TrainingSpec:
    t = m.training
    par = t.parallelism
    dp = par.dp
    model_ranks = par.tp * par.cp * par.pp  # ranks of one data-parallel replica
    cp_x = f" x cp {par.cp}" if par.cp > 1 else ""
    if gpus is not None:
        if dp is None:
            if gpus % model_ranks:
                issues.append(Issue("training.parallelism", f"tp x pp{' x cp' if cp_x else ''} = {model_ranks} does "
                                                            f"not divide the {gpus} GPUs of the cluster"))
            else:
                dp = gpus // model_ranks
        elif dp * model_ranks != gpus:
            issues.append(Issue("training.parallelism", f"dp x tp x pp = {dp} x {par.tp} x {par.pp}{cp_x} = "
                                                        f"{dp * model_ranks}; expected the cluster's {gpus} GPUs"))
    w = m.workload
    if dp is not None and w.model is not None:
        per_step = dp * t.grad_accumulation
        if w.global_batch is not None and w.global_batch % per_step:
            issues.append(Issue("workload.global_batch", f"got {w.global_batch}; expected a multiple of dp x "
                                                         f"grad_accumulation = {dp} x {t.grad_accumulation}"))
    _model_parallel_keys(t, dp, issues)
    switch_it, switch_frac = _phase_keys(t, m.run, issues)
    return TrainingSpec(
        parallelism=ParallelismSpec(dp=dp, tp=par.tp, pp=par.pp, cp=par.cp, zero=par.zero, ep=par.ep,
                                    etp=par.tp if par.etp is None else par.etp),
        micro_batch=t.micro_batch, cp_comm_type=CpCommType(t.cp_comm_type or CpCommType.P2P),
        moe_load_imbalance=float(t.moe_load_imbalance),
        schedule=PipelineSchedule(t.schedule), sync=SyncMode(t.sync), staleness=t.staleness,
        local_steps=t.local_steps, grad_accumulation=t.grad_accumulation, batch_split=BatchSplit(t.batch_split),
        optimizer=Optimizer(t.optimizer), optimizer_kernels=OptimizerKernels(t.optimizer_kernels),
        grad_clipping=GradClipping(t.grad_clipping), loss_scaling=LossScaling(t.loss_scaling),
        grad_processing=GradProcessing(t.grad_processing),
        convergence_factor=t.convergence_factor,
        placement_order=t.placement_order, sequence_parallel=t.sequence_parallel,
        tp_comm_overlap=t.tp_comm_overlap, fp8_param_gather=t.fp8_param_gather,
        recompute=Recompute(t.recompute), recompute_every=t.recompute_every,
        recompute_modules=tuple(t.recompute_modules or ()),
        virtual_stages=t.virtual_stages,
        hybrid_switch_iteration=switch_it, hybrid_switch_fraction=switch_frac,
        rebalance_every=t.rebalance_every if t.rebalance_every is not None else TrainingSpec().rebalance_every,
    )


def _phase_keys(t, r, issues: list[Issue]) -> tuple[int | None, float | None]:
    """training.hybrid_switch (with sync hybrid only: an iteration below run.iterations, or a share strictly
    between 0 and 100 %) and training.rebalance_every (with batch_split dynamic only)."""
    hybrid = SyncMode(t.sync) is SyncMode.HYBRID
    if t.rebalance_every is not None and BatchSplit(t.batch_split) is not BatchSplit.DYNAMIC:
        issues.append(Issue("training.rebalance_every", f"got {t.rebalance_every}; read only with "
                                                        "training.batch_split: dynamic"))
    v = t.hybrid_switch
    if v is None:
        if hybrid:
            issues.append(Issue("training.hybrid_switch", "sync hybrid needs the switch point: an iteration "
                                                          "(e.g. 1000) or a share of run.iterations (e.g. '30%')"))
        return None, None
    if not hybrid:
        issues.append(Issue("training.hybrid_switch", f"got {v!r}; read only with training.sync: hybrid"))
        return None, None
    if isinstance(v, str):
        frac = float(v.strip().rstrip("%")) / 100.0
        if not 0.0 < frac < 1.0:
            issues.append(Issue("training.hybrid_switch", f"got {v!r}; expected a share strictly between 0 % "
                                                          "and 100 %"))
            return None, None
        return None, frac
    if r.duration is None and v >= r.iterations:
        issues.append(Issue("training.hybrid_switch", f"got {v}; expected an iteration below run.iterations "
                                                      f"({r.iterations}), else the run never synchronises"))
        return None, None
    return v, None


def _model_parallel_keys(t, dp: int | None, issues: list[Issue]) -> None:
    """The model-parallel keys must change something in the layout they are given, else they are refused."""
    par = t.parallelism
    if t.sequence_parallel and par.tp == 1:
        issues.append(Issue("training.sequence_parallel", "got true; sequence parallelism splits the tensor-"
                                                          "parallel regions, so it needs training.parallelism.tp > 1"))
    if t.tp_comm_overlap and not t.sequence_parallel:
        issues.append(Issue("training.tp_comm_overlap", "got true; the chunked all_gather / reduce_scatter it "
                                                        "overlaps with the GEMMs are sequence parallelism's (as "
                                                        "Megatron-LM's --tp-comm-overlap), so it needs "
                                                        "training.sequence_parallel: true"))
    if t.placement_order is not None and dp is not None and sum(x > 1 for x in (dp, par.tp, par.pp, par.cp)) < 2:
        issues.append(Issue("training.placement_order", f"got {t.placement_order!r}; the order only matters when "
                                                        f"two of dp, tp, pp exceed 1 (dp {dp}, tp {par.tp}, pp {par.pp})"))
    elif t.placement_order is not None and par.cp > 1 and "cp" not in t.placement_order.split(","):
        issues.append(Issue("training.placement_order", f"got {t.placement_order!r}; with training.parallelism.cp "
                                                        f"{par.cp} the order names cp too, e.g. 'tp,cp,dp,pp'"))
    if t.cp_comm_type is not None and par.cp == 1:
        issues.append(Issue("training.cp_comm_type", f"got {t.cp_comm_type!r}; read only with "
                                                     "training.parallelism.cp > 1"))
    if Recompute(t.recompute) is not Recompute.NONE and max(par.tp, par.pp, par.cp, par.ep) == 1 and par.zero == 0:
        issues.append(Issue("training.recompute", f"got '{t.recompute}'; recomputation is modelled for model-parallel "
                                                  "layouts only (tp, pp, cp, ep or zero); expected none"))
    if t.recompute_every != 1 and Recompute(t.recompute) is not Recompute.FULL:
        issues.append(Issue("training.recompute_every", f"got {t.recompute_every}; it chooses which blocks "
                                                        "training.recompute: full checkpoints; expected 1 otherwise"))
    issues += recompute_module_issues(t)
    for key, on in (("training.recompute", Recompute(t.recompute) is Recompute.SELECTIVE_OP),
                    ("training.recompute_every", t.recompute_every != 1)):
        if on and (par.tp > 1 or par.pp > 1):
            issues.append(Issue(key, "modelled for ZeRO / FSDP data parallelism (torchtitan's FSDP2 activation "
                                     "checkpointing), not with tp or pp > 1"))
    interleaved = PipelineSchedule(t.schedule) is PipelineSchedule.INTERLEAVED
    if t.virtual_stages > 1 and not (interleaved and par.pp > 1):
        issues.append(Issue("training.virtual_stages", f"got {t.virtual_stages}; model chunks need schedule "
                                                       "interleaved and training.parallelism.pp > 1"))
    if interleaved and par.pp > 1 and t.virtual_stages < 2:
        issues.append(Issue("training.virtual_stages", "got 1; schedule interleaved needs >= 2 chunks per "
                                                       "pipeline rank"))


_ASYNC_SYNCS = ("asp", "ssp", "hybrid")  # workers (or hybrid's first phase) push single GPUs' gradients


def _ps_servers(m: ScenarioModel) -> int:
    """communication.ps.servers, or one per worker node when unset (BytePS's and MXNet's dist kvstore's layout: a
    server process on every machine, or as many server machines as worker machines with placement dedicated).
    Without a parameter server the unset key resolves to the spec's default, so it is never reported as set."""
    c = m.communication
    if c.ps.servers is not None:
        return c.ps.servers
    if StrategyKind(c.strategy) is not StrategyKind.PS:
        return CommunicationSpec().ps_servers
    return sum(g.count for g in m.cluster.nodes)


def _ps_aggregation(m: ScenarioModel, cluster) -> PsAggregation:
    """communication.ps.aggregation, or node when unset (each node's GPUs reduce first and the node pushes once, as
    BytePS and MXNet's device+dist kvstore do) where that can run: gpu for asynchronous workers and for node groups
    with different GPUs per node. Without a parameter server the unset key resolves to the spec's default."""
    c = m.communication
    if c.ps.aggregation is not None:
        return PsAggregation(c.ps.aggregation)
    if StrategyKind(c.strategy) is not StrategyKind.PS or str(m.training.sync) in _ASYNC_SYNCS or cluster is None:
        return CommunicationSpec().ps_aggregation
    uniform = len({g.gpus_per_node for g in cluster.node_groups}) == 1
    return PsAggregation.NODE if uniform else PsAggregation.GPU


def _communication(m: ScenarioModel, gpus: int | None, issues: list[Issue], servers: int,
                   aggregation: PsAggregation) -> CommunicationSpec:
    c = m.communication
    strategy = StrategyKind(c.strategy)
    if strategy is StrategyKind.HIERARCHICAL:
        for level in ("intra", "inter"):
            algo = StrategyKind(getattr(c.hierarchical, level))
            if algo not in _SUB_ALGORITHMS:
                issues.append(Issue(f"communication.hierarchical.{level}", f"got '{algo}'; expected one of "
                                    f"{', '.join(sorted(a.value for a in _SUB_ALGORITHMS))}"))
    if (strategy is StrategyKind.PS and aggregation is PsAggregation.NODE
            and str(m.training.sync) in ("asp", "ssp")):
        issues.append(Issue("communication.ps.aggregation", f"got 'node' with training.sync '{m.training.sync}'; "
                                                            "asynchronous workers are single GPUs (use gpu)"))
    if c.ps.partition is not None and str(m.training.sync) in ("asp", "ssp"):
        issues.append(Issue("communication.ps.partition", f"got {c.ps.partition:g} B with training.sync "
                                                          f"'{m.training.sync}'; partitioned pipelining is modelled "
                                                          "for bsp only (asynchronous workers exchange whole shards)"))
    if (strategy is StrategyKind.PS and PsPlacement(c.ps.placement) is PsPlacement.COLOCATED
            and gpus is not None and servers > gpus):
        issues.append(Issue("communication.ps.servers", f"got {servers}; colocated servers cannot "
                                                        f"outnumber the {gpus} GPUs"))
    if (strategy is StrategyKind.PS and PsPlacement(c.ps.placement) is PsPlacement.HOST
            and PsServer(c.ps.server) is not PsServer.CPU):
        issues.append(Issue("communication.ps.server", f"got '{c.ps.server}' with placement 'host'; servers in the "
                                                       "nodes' host memory update on the CPU: expected cpu"))
    if c.collnet and Backend(c.backend) is not Backend.NCCL:
        issues.append(Issue("communication.collnet", f"got true with backend '{c.backend}'; CollNet is NCCL's "
                                                     "(NCCL_COLLNET_ENABLE): expected backend nccl"))
    if c.collnet and not m.cluster.fabric.sharp:
        issues.append(Issue("communication.collnet", "got true, but the fabric's switches do not run SHARP; expected "
                                                     "cluster.fabric.sharp: true (InfiniBand switches with in-network "
                                                     "reduction and the CollNet plugin), or collnet: false"))
    if "nvls" in c.model_fields_set and Backend(c.backend) is not Backend.NCCL:
        issues.append(Issue("communication.nvls", f"got {str(c.nvls).lower()} with backend '{c.backend}'; NVLS is "
                                                  "NCCL's in-switch reduction, read only with backend nccl"))
    issues.extend(nccl_choice_issues(c))
    if m.cluster.fabric.sharp and not c.collnet:
        issues.append(Issue("cluster.fabric.sharp", "got true; read only with communication.collnet: true (NCCL "
                                                    "leaves CollNet off by default, NCCL_COLLNET_ENABLE=0, and "
                                                    "never uses the switches' reduction then)"))
    comp = c.compression
    return CommunicationSpec(
        strategy=strategy, backend=Backend(c.backend), hierarchical_intra=StrategyKind(c.hierarchical.intra),
        hierarchical_inter=StrategyKind(c.hierarchical.inter), ps_servers=servers,
        ps_placement=PsPlacement(c.ps.placement), ps_aggregation=aggregation,
        ps_server=PsServer(c.ps.server), ps_partition_bytes=c.ps.partition, bucket_size_bytes=c.bucket_size,
        first_bucket_bytes=c.first_bucket_size, bucketing=Bucketing(c.bucketing), fusion_cycle_s=c.fusion_cycle,
        ddp_average=DdpAverage(c.ddp_average), gradient_as_bucket_view=c.gradient_as_bucket_view,
        overlap=c.overlap, collnet=c.collnet, nvls=c.nvls, nccl_algo=c.nccl_algo, nccl_proto=c.nccl_proto,
        nccl_socket_threads=c.nccl_socket_threads,
        compression=CompressionSpec(CompressionMethod(comp.method), comp.ratio, comp.rank, comp.error_feedback),
    )


def _run(r: RunModel, issues: list[Issue]) -> RunSpec:
    if r.duration is not None and "iterations" in r.model_fields_set:
        issues.append(Issue("run.duration", "give `iterations` or `duration`, not both"))
    if r.duration is None and r.warmup >= r.iterations:
        issues.append(Issue("run.warmup", f"got {r.warmup}; expected fewer than run.iterations ({r.iterations})"))
    return RunSpec(iterations=r.iterations, duration_s=r.duration, warmup=r.warmup, seed=r.seed,
                   replicas=r.replicas, fidelity=Fidelity(r.fidelity))


def _calibration(value: str | None, base_dir: Path, issues: list[Issue]) -> str | None:
    if value is None:
        return None
    p = Path(value).expanduser()
    p = p if p.is_absolute() else base_dir / p
    if not p.is_file():
        issues.append(Issue("calibration", f"got {value!r}; no such file ({p})"))
    return str(p)


_PER_NODE_STRATEGIES = {StrategyKind.HIERARCHICAL, StrategyKind.TORUS2D}  # a row/level per node: equal sizes


def _check_uniform_nodes(strategy: StrategyKind, cluster, issues: list[Issue], aggregation: str = "gpu") -> None:
    """hierarchical and torus2d arrange ranks node by node, so every node must hold the same number of GPUs
    (as must a node-aggregated PS)."""
    if cluster is None:
        return
    sizes = sorted({g.gpus_per_node for g in cluster.node_groups})
    if strategy is StrategyKind.PS and aggregation == "node" and len(sizes) > 1:
        issues.append(Issue("communication.ps.aggregation", f"got 'node'; it needs the same number of GPUs on "
                                                            f"every node, but the node groups have {sizes}"))
    if strategy not in _PER_NODE_STRATEGIES:
        return
    if len(sizes) > 1:
        issues.append(Issue("communication.strategy", f"got '{strategy}'; it needs the same number of GPUs on every "
                                                      f"node, but the node groups have {sizes} (use ring, tree, "
                                                      f"halving_doubling or ps)"))


def _check_nvls_nodes(c, cluster, issues: list[Issue]) -> None:
    """`communication.nvls: false` turns NVLS off; on nodes that cannot run it, it would change nothing."""
    if "nvls" not in c.model_fields_set or c.nvls or cluster is None or Backend(c.backend) is not Backend.NCCL:
        return
    if not any(intra_node_has_nvls(g.intra_node, g.gpus_per_node) for g in cluster.node_groups):
        issues.append(Issue("communication.nvls", "got false, but no node has more than two GPUs on a third-generation "
                                                  "(NVLink4) or later NVSwitch, where NCCL runs NVLS; nothing to turn "
                                                  "off (drop the key)"))


def _check_layout_units(w, model, cluster, issues: list[Issue]) -> None:
    """An explicit layout changes a convolution's price only on tensor cores (nchw: cuDNN's transposes) or, on CUDA
    cores, for a 3 x 3 stride-1 one (nhwc: no Winograd); which units run the precision is the GPU's (GpuSpec.runs_as:
    tf32 before Ampere is fp32). Where neither can happen on any node, the key would change nothing."""
    if w.memory_format == "native" or model is None or cluster is None:
        return
    convs = [layer for layer in model.layers if layer.kind == "conv"]
    if not convs:
        return  # refused with the workload
    p = str(w.precision)
    winograd = any(layer.winograd for layer in convs)
    if winograd or any(g.gpu.runs_as(p) in TENSOR_CORE_PRECISIONS for g in cluster.node_groups):
        return
    plain = sorted({f"{g.gpu.key} (as {g.gpu.runs_as(p)})" for g in cluster.node_groups})
    issues.append(Issue("workload.memory_format", f"got {w.memory_format!r} with precision {p} on {', '.join(plain)}: "
                                                  "its convolutions run on CUDA cores, where only a 3 x 3 stride-1 "
                                                  "convolution's price depends on the layout (Winograd in NCHW), and "
                                                  "the model has none (inline and torch-imported layers carry no "
                                                  "kernel geometry): remove the key"))


def _check_collnet_nodes(collnet: bool, cluster, issues: list[Issue]) -> None:
    """NCCL runs CollNet (Direct and Chain) with at most 8 GPUs a node (enqueue.cc: NCCL_MAX_DIRECT_ARITY + 1),
    and simdist's schedule with the same number on every node: anything else could never run it."""
    if not collnet or cluster is None:
        return
    sizes = sorted({g.gpus_per_node for g in cluster.node_groups})
    if len(sizes) > 1 or sizes[0] > 8:
        issues.append(Issue("communication.collnet", f"got true with {sizes} GPUs per node; CollNet needs the same "
                                                     "number of GPUs on every node, at most 8 (NCCL's limit)"))


def collect(m: ScenarioModel, base_dir: Path, default_name: str = "scenario") -> tuple[Scenario | None, list[Issue]]:
    """The Scenario and no issues, or None and every issue found."""
    issues: list[Issue] = []
    c = m.communication
    dedicated = c.strategy == StrategyKind.PS and c.ps.placement == PsPlacement.DEDICATED
    servers = _ps_servers(m)
    cluster = resolve_cluster(m.cluster, base_dir, issues, servers if dedicated else 0)
    aggregation = _ps_aggregation(m, cluster)
    workload: WorkloadSpec | None = finetune_model(m, resolve_workload(m.workload, issues), issues)
    gpus = cluster.num_gpus if cluster is not None else None
    training = _training(m, gpus, issues)
    communication = _communication(m, gpus, issues, servers, aggregation)
    _check_uniform_nodes(StrategyKind(c.strategy), cluster, issues, aggregation.value)
    _check_collnet_nodes(c.collnet, cluster, issues)
    _check_nvls_nodes(c, cluster, issues)
    issues.extend(nccl_socket_issues(c, cluster))
    issues.extend(ddp_average_issues(m))
    _check_layout_units(m.workload, workload.model if workload is not None else None, cluster, issues)
    failures = resolve_failures(m.failures, cluster, issues)
    run = _run(m.run, issues)
    calibration = _calibration(m.calibration, base_dir, issues)
    issues.extend(run_option_issues(m, cluster, workload.model if workload is not None else None))
    if issues or cluster is None or workload is None:
        return None, issues
    scenario = Scenario(name=m.name or default_name, cluster=cluster, workload=workload, training=training,
                        communication=communication, failures=failures, run=run, calibration=calibration)
    if calibration is not None:  # measured link and compute efficiencies replace the catalog defaults

        try:
            scenario = calibration_profiles.apply_profile(scenario, calibration_profiles.load_profile(calibration))
        except ScenarioError as err:
            return None, [Issue("calibration", str(i)) if not i.path else i for i in err.issues]
    return with_run_options(scenario, m), []  # fp8 recipe, FP8 attention, CUDA graphs: after any profile


def resolve(m: ScenarioModel, base_dir: Path | str = ".", default_name: str = "scenario") -> Scenario:
    """Scenario in SI units; relative paths resolve against `base_dir`. Raises ScenarioError with all issues."""
    scenario, issues = collect(m, Path(base_dir), default_name)
    if scenario is None:
        raise ScenarioError(issues or [Issue("", "the scenario could not be resolved")])
    return scenario
