"""Every rule about a resolved scenario, in one place: `rules(scenario) -> list[Issue]`.

The schema (io/schema*.py) and the resolvers (io/resolve*.py) check each key and what the catalogs and the
cluster allow; these rules check what the engine runs: sync modes with strategies, parallelism, ZeRO / FSDP,
failure runs, replicas, and keys the run would not read. `load_scenario`, `load_data` (sweeps, plans, the
API) and `check_file` all end here, so `simdist check` refuses exactly what `simdist run` refuses, every
problem at once. Below io/ the code raises only InfeasibleError (valid but cannot run) or asserts.
"""
from __future__ import annotations

from simdist.errors import Issue
from simdist.io.rules_ddp import grad_bucket_view_issues
from simdist.io.rules_finetune import finetune_issues
from simdist.io.rules_parallel import model_parallel_issues
from simdist.io.rules_precision import precision_issues
from simdist.io.rules_relevance import relevance_issues
from simdist.io.rules_training import bad_value, training_issues
from simdist.io.rules_tpu import tpu_issues
from simdist.scenario import FailureKind, PsPlacement, Scenario, StrategyKind, SyncMode
from simdist.strategies.stragglers import needs_timeline

# failure events that change link capacities: the goodput timeline runs them on the BSP engine only
LINK_EVENTS = (FailureKind.LINK_DEGRADE, FailureKind.LINK_DOWN, FailureKind.SWITCH_DOWN)


def stochastic_elements(scenario: Scenario) -> list[str]:
    """The scenario keys that make a run random: MTBF-sampled failures and network jitter."""
    f = scenario.failures
    out = []
    if f is not None and f.random is not None:
        out.append("failures.random")
    if f is not None:
        out += [f"failures.events.{i}" for i, e in enumerate(f.events) if e.kind == "network_jitter"]
    return out


def replica_issues(scenario: Scenario) -> list[Issue]:
    """`run.replicas > 1` repeats a run over random draws: refused when nothing in the scenario is random."""
    n = scenario.run.replicas
    if n > 1 and not stochastic_elements(scenario):
        return [bad_value("run.replicas", n, "1: replicas need a stochastic element (e.g. failures.random), and "
                                             "this scenario has none, so every replica is the same")]
    return []


def host_socket_count(scenario: Scenario) -> int:
    """CPU sockets in the built topology: a node has its intra_node's sockets where it has a PCIe tree."""
    return sum(g.count * max(1, g.intra_node.sockets) for g in scenario.cluster.node_groups
               if g.intra_node.pcie_link is not None)


def ps_placement_issues(scenario: Scenario) -> list[Issue]:
    """Parameter servers in host memory (placement host) take one CPU socket each."""
    comm = scenario.communication
    if comm.strategy != StrategyKind.PS or comm.ps_placement != PsPlacement.HOST:
        return []
    total = host_socket_count(scenario)
    if comm.ps_servers > total:
        return [bad_value("communication.ps.servers", comm.ps_servers, f"at most the worker nodes' {total} CPU "
                          "sockets for placement host (a node's sockets are in the topology where its intra_node "
                          "has a pcie_link)")]
    return []


def failure_run_issues(scenario: Scenario) -> list[Issue]:
    """A failure run (failures beyond static stragglers, or any with run.duration) is a goodput timeline: it needs
    a training workload, run.duration and a steady sync mode; link faults need bsp."""
    if not needs_timeline(scenario):
        return []
    t = scenario.training
    out = []
    if scenario.workload.model is None:
        out.append(bad_value("failures", "a benchmark workload", "a training workload (goodput needs one)"))
    if t.sync == SyncMode.HYBRID:
        out.append(bad_value("training.sync", "hybrid", "bsp, asp, ssp or local_sgd in a failure run over "
                             "run.duration (hybrid's switch point is an iteration of run.iterations)"))
    if scenario.run.duration_s is None:
        out.append(Issue("run.duration", "failure runs need run.duration (the simulated wall time, e.g. '14 d')"))
    if t.sync not in (SyncMode.BSP, SyncMode.HYBRID) and any(e.kind in LINK_EVENTS for e in scenario.failures.events):
        out.append(bad_value("training.sync", t.sync.value, "bsp for link_degrade, link_down and fabric switch "
                             "failures (other sync modes do not take link changes yet)"))
    return out


def rules(scenario: Scenario) -> list[Issue]:
    """Every problem the run of `scenario` would refuse, each with its YAML path ([] when it runs)."""
    timeline = needs_timeline(scenario)
    return (replica_issues(scenario) + ps_placement_issues(scenario) + failure_run_issues(scenario)
            + relevance_issues(scenario, timeline) + training_issues(scenario, timeline)
            + model_parallel_issues(scenario) + precision_issues(scenario) + finetune_issues(scenario)
            + tpu_issues(scenario) + grad_bucket_view_issues(scenario))
