"""Scenario -> what the harness runs: the emulated layout and the Case(s) measuring the same thing.

Everything is derived from existing scenario keys (no harness-only keys):
* cluster: one emulated host per GPU. 1 GPU per node: hosts = nodes, fat_tree/leaf_spine racks of
  `nodes_per_leaf` with uplink = nodes_per_leaf x NIC / oversubscription. Several GPUs per node
  (single_switch only): a node is a rack, its GPUs are hosts on the rack bridge at the intra_node
  rate, and the node's NIC (rate x count) is the rack uplink. Dedicated PS servers are extra hosts.
* workload.benchmark {op, sizes} with strategy ring/tree/hierarchical/ps -> one collective/PS case;
  a model workload -> one DDP case (an MLP of identical Linear layers; the compression method and its
  ratio / rank / error_feedback -> the DDP communication hook of validation/hooks.py).
* ring and tree run the library's all_reduce. With `backend: textbook` the case pins NCCL_ALGO to
  Ring or Tree (on GPUs NCCL then runs what simdist models; gloo has no tree, so a textbook tree
  is refused on gloo launchers); with `backend: nccl` or `gloo` the library chooses, as simdist does.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace

from simdist.errors import ScenarioError
from simdist.scenario import CompressionMethod, PsPlacement, Scenario, StrategyKind
from simdist.validation.cases import Case, CaseKind
from simdist.validation.emulab.layout import EmulabLayout

_OPS = {"all_reduce": CaseKind.ALL_REDUCE, "reduce_scatter": CaseKind.REDUCE_SCATTER,
        "all_gather": CaseKind.ALL_GATHER}
DEFAULT_POWERSGD_RANK = 4


@dataclass(frozen=True)
class HarnessPlan:
    """The emulated cluster and the cases that measure one scenario file; `metric` names what is compared."""

    layout: EmulabLayout
    cases: tuple[Case, ...]
    metric: str  # "time_s" (collective per size) | "iteration_time_s" (training step)


def _uniform(scenario: Scenario) -> tuple[float, int, object]:
    groups = scenario.cluster.node_groups
    keys = {(g.nic.link.bandwidth_Bps * g.nic.count, g.gpus_per_node, g.intra_node.gpu_link.bandwidth_Bps)
            for g in groups}
    if len(keys) != 1:
        raise ScenarioError.bad_value("cluster.nodes", len(groups), "one uniform node group (the emulated cluster is uniform)")
    g = groups[0]
    return g.nic.link.bandwidth_Bps * g.nic.count * 8, g.gpus_per_node, g


def layout_for(scenario: Scenario, rate_scale: float = 1.0, prefix: str = "sdt") -> EmulabLayout:
    """The EmulabLayout emulating `scenario.cluster` with every rate multiplied by `rate_scale`."""
    if not rate_scale > 0:
        raise ScenarioError.bad_value("--rate-scale", rate_scale, "a positive factor")
    nic_bps, per_node, group = _uniform(scenario)
    comm = scenario.communication
    if comm.strategy is StrategyKind.PS and comm.ps_placement is PsPlacement.HOST:
        raise ScenarioError.bad_value("communication.ps.placement", "host",
                                      "colocated or dedicated (the harness runs one process per GPU or server host)")
    extra = comm.ps_servers if (comm.strategy is StrategyKind.PS and comm.ps_placement is PsPlacement.DEDICATED) else 0
    fabric = scenario.cluster.fabric
    kind = str(fabric.topology)
    nodes = scenario.cluster.num_nodes
    if per_node > 1:
        if kind != "single_switch" or extra:
            raise ScenarioError.bad_value("cluster.fabric.topology", kind,
                                          "single_switch (and no dedicated servers) when nodes have several GPUs")
        host_bps = group.intra_node.gpu_link.bandwidth_Bps * 8  # type: ignore[attr-defined]
        return EmulabLayout(nodes * per_node, host_bps * rate_scale, nodes_per_leaf=per_node,
                            uplink_rate_bps=nic_bps * rate_scale, prefix=prefix)
    hosts = nodes + extra
    if kind == "single_switch":
        return EmulabLayout(hosts, nic_bps * rate_scale, prefix=prefix)
    if kind in ("fat_tree", "leaf_spine"):
        if fabric.nodes_per_leaf is None:
            raise ScenarioError.bad_value("cluster.fabric.nodes_per_leaf", None, "an explicit nodes_per_leaf to emulate racks")
        if extra:
            raise ScenarioError.bad_value("communication.ps.placement", "dedicated", "colocated servers on racked fabrics")
        return EmulabLayout(hosts, nic_bps * rate_scale, nodes_per_leaf=fabric.nodes_per_leaf,
                            oversubscription=fabric.oversubscription, prefix=prefix)
    raise ScenarioError.bad_value("cluster.fabric.topology", kind, "single_switch, fat_tree or leaf_spine")


def _mlp_shape(scenario: Scenario) -> tuple[int, int]:
    """(hidden, depth) of a model made of identical square Linear layers (what the DDP case trains)."""
    model = scenario.workload.model
    assert model is not None
    linear = [layer for layer in model.layers if layer.params > 0]
    shapes = {layer.grad_shapes for layer in linear}
    if len(shapes) != 1:
        raise ScenarioError.bad_value("workload.model", model.name, "an MLP of identical Linear(h, h) layers")
    shape = shapes.pop()
    if len(shape) != 2 or len(shape[0]) != 2 or shape[0][0] != shape[0][1] or shape[1] != (shape[0][0],):
        raise ScenarioError.bad_value("workload.model", model.name, "Linear(h, h) layers with bias")
    return shape[0][0], len(linear)


def _nccl_algo(scenario: Scenario) -> str:
    """The NCCL_ALGO that makes NCCL run what simdist models: pinned for a textbook ring or tree."""
    comm = scenario.communication
    if comm.backend.value != "textbook":
        return ""  # NCCL's tuner / gloo's ring: simdist's nccl and gloo backends model that choice
    return {StrategyKind.RING: "Ring", StrategyKind.TREE: "Tree"}.get(comm.strategy, "")


def cases_for(scenario: Scenario, name: str, warmup: int = 1, reps: int = 3) -> tuple[Case, ...]:
    """The harness cases measuring `scenario` (sizes, strategy, servers, hook), labelled `name`."""
    comm = scenario.communication
    wl = scenario.workload
    strategy = comm.strategy
    if wl.benchmark is not None:
        op = wl.benchmark.op.value
        sizes = tuple(float(s) for s in wl.benchmark.sizes_bytes)
        if strategy is StrategyKind.PS:
            if op != "all_reduce":
                raise ScenarioError.bad_value("workload.benchmark.op", op, "all_reduce with strategy ps")
            return (Case(CaseKind.PS, sizes, warmup, reps, servers=comm.ps_servers,
                         placement=comm.ps_placement.value, name=name),)
        if strategy is StrategyKind.HIERARCHICAL:
            if op != "all_reduce":
                raise ScenarioError.bad_value("workload.benchmark.op", op, "all_reduce with strategy hierarchical")
            per_node = scenario.cluster.node_groups[0].gpus_per_node
            scheme = "leader" if comm.backend.value == "gloo" else "rs_ag"  # what simdist models for each backend
            return (Case(CaseKind.HIERARCHICAL, sizes, warmup, reps, local_size=per_node, scheme=scheme, name=name),)
        if op not in _OPS or strategy not in (StrategyKind.RING, StrategyKind.TREE) \
                or (strategy is StrategyKind.TREE and op != "all_reduce"):
            raise ScenarioError.bad_value("communication.strategy", f"{strategy}/{op}",
                                          "ring (all_reduce, reduce_scatter, all_gather), tree (all_reduce), "
                                          "hierarchical or ps")
        return (Case(_OPS[op], sizes, warmup, reps, nccl_algo=_nccl_algo(scenario), name=name),)
    if strategy not in (StrategyKind.RING, StrategyKind.TREE):
        raise ScenarioError.bad_value("communication.strategy", strategy.value, "ring or tree for a model workload (DDP)")
    method = comm.compression.method  # every method has a DDP hook (DdpHook is CompressionMethod)
    hidden, depth = _mlp_shape(scenario)
    batch = wl.batch_per_gpu or 32
    if comm.bucketing.value != "ddp":
        raise ScenarioError.bad_value("communication.bucketing", comm.bucketing.value, "ddp for a DDP case")
    grad_bytes = depth * (hidden * hidden + hidden) * 4
    bucket_mb = comm.bucket_size_bytes / 2**20 if comm.bucket_size_bytes < grad_bytes else 0.0
    if bucket_mb and method is CompressionMethod.POWERSGD:
        raise ScenarioError.bad_value("communication.bucket_size", comm.bucket_size_bytes,
                                      f"at least the model's {grad_bytes} gradient bytes with powersgd (one bucket: "
                                      "with several, the PowerSGD hook deadlocks on gloo)")
    return (Case(CaseKind.DDP, warmup=warmup, reps=reps, hook=method, hidden=hidden, depth=depth,
                 batch=batch, powersgd_rank=comm.compression.rank or DEFAULT_POWERSGD_RANK, bucket_mb=bucket_mb,
                 ratio=comm.compression.ratio or 0.0, error_feedback=comm.compression.error_feedback,
                 nccl_algo=_nccl_algo(scenario), name=name),)


def plan_for(scenario: Scenario, name: str, rate_scale: float = 1.0, warmup: int = 1, reps: int = 3) -> HarnessPlan:
    cases = cases_for(scenario, name, warmup, reps)
    metric = "iteration_time_s" if scenario.workload.benchmark is None else "time_s"
    return HarnessPlan(layout_for(scenario, rate_scale), cases, metric)


def scale_rates(scenario: Scenario, factor: float) -> Scenario:
    """`scenario` with every link bandwidth (NIC, intra-node, fabric) multiplied by `factor` (for --rate-scale)."""
    if factor == 1.0:
        return scenario

    def link(spec):  # LinkSpec | None
        return None if spec is None else replace(spec, bandwidth_Bps=spec.bandwidth_Bps * factor)

    groups = tuple(replace(g, nic=replace(g.nic, link=link(g.nic.link)),
                           intra_node=replace(g.intra_node, gpu_link=link(g.intra_node.gpu_link),
                                              pcie_link=link(g.intra_node.pcie_link),
                                              socket_link=link(g.intra_node.socket_link)))
                   for g in scenario.cluster.node_groups)
    cluster = dataclasses.replace(scenario.cluster, node_groups=groups,
                                  fabric=replace(scenario.cluster.fabric, link=link(scenario.cluster.fabric.link)))
    return replace(scenario, cluster=cluster)
