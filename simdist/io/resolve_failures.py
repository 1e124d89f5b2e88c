"""failures: schema model -> FailuresSpec, with every target checked against the built cluster.

Targets use the names of `simdist topo`: gpu:K and node:K are indices; switch:NAME and link:U-V are
vertex names of the topology (leaf0, spine1, node3/nic0). A key that the chosen event kind or recovery
policy does not use is refused rather than ignored.
"""
from __future__ import annotations

import simdist.engine.context_cache as context_cache
import simdist.failures.targets as targets
from simdist.errors import Issue, ScenarioError
from simdist.hardware.specs import ClusterSpec
from simdist.io.schema_failures import FailuresModel
from simdist.scenario import (
    FailureDistribution, FailureEventSpec, FailureKind, FailuresSpec, MaintenanceSpec, RandomFailuresSpec,
    RecoveryPolicy, RecoverySpec,
)

_PREFIXES = {
    FailureKind.GPU_DOWN: ("gpu",), FailureKind.NODE_DOWN: ("node",), FailureKind.RACK_DOWN: ("switch",),
    FailureKind.SWITCH_DOWN: ("switch",), FailureKind.LINK_DOWN: ("link",), FailureKind.LINK_DEGRADE: ("link",),
    FailureKind.STRAGGLER: ("gpu", "node"), FailureKind.NETWORK_JITTER: (),
}
_KIND_KEYS = {"factor": FailureKind.LINK_DEGRADE, "slowdown": FailureKind.STRAGGLER,
              "delay": FailureKind.NETWORK_JITTER, "sigma": FailureKind.NETWORK_JITTER}
_POLICY_KEYS = {  # recovery keys only some policies use
    "persistent_interval": (RecoveryPolicy.IN_MEMORY,),
    "spares": (RecoveryPolicy.SPARES,), "spare_delay": (RecoveryPolicy.SPARES,),
    "replica_groups": (RecoveryPolicy.REPLICA_GROUPS,),
}
def _facts(cluster: ClusterSpec | None):
    if cluster is None:
        return None

    try:
        return targets.failure_targets(context_cache.shared_topology(cluster))  # the run's own, built once
    except ScenarioError:
        return None  # the cluster's own issues are reported elsewhere


def _check_target(kind: FailureKind, target: str, facts, path: str, issues: list[Issue]) -> None:
    prefixes = _PREFIXES[kind]
    if not prefixes:
        if target:
            issues.append(Issue(f"{path}.target", f"got {target!r}; {kind} affects the whole job (omit target)"))
        return
    prefix, _, rest = target.partition(":")
    if prefix not in prefixes:
        want = " or ".join({"gpu": "gpu:N", "node": "node:N", "switch": "switch:NAME", "link": "link:U-V"}[p]
                           for p in prefixes)
        issues.append(Issue(f"{path}.target", f"got {target!r}; {kind} expects a {want} target"))
        return
    if prefix in ("gpu", "node"):
        if not rest.isdigit():
            issues.append(Issue(f"{path}.target", f"got {target!r}; expected {prefix}:N with N an index"))
            return
        if facts is not None:
            limit = facts.gpus if prefix == "gpu" else facts.nodes
            if int(rest) >= limit:
                issues.append(Issue(f"{path}.target", f"got {target!r}; the cluster has {limit} {prefix}s "
                                                      f"(0..{limit - 1})"))
        return
    if facts is None:
        return
    if prefix == "link":
        if facts.link_ends(rest) is None:
            some = ", ".join(facts.fabric_links[:3]) or "none"
            issues.append(Issue(f"{path}.target", f"got {target!r}; no such link in the topology (links are "
                                                  f"U-V between vertices, e.g. {some})"))
        return
    if rest not in facts.switches:
        issues.append(Issue(f"{path}.target", f"got {target!r}; no such switch (the topology has "
                                              f"{', '.join(facts.switches[:6])}{', ...' if len(facts.switches) > 6 else ''})"))
    elif kind is FailureKind.RACK_DOWN and rest not in facts.leaves:
        issues.append(Issue(f"{path}.target", f"got {target!r}; {rest} has no nodes under it (rack_down takes a "
                                              f"leaf and its rack; use switch_down for a spine/core switch)"))


_DOWN = (FailureKind.GPU_DOWN, FailureKind.NODE_DOWN, FailureKind.RACK_DOWN, FailureKind.SWITCH_DOWN)
_REPAIR_POLICIES = (RecoveryPolicy.ELASTIC, RecoveryPolicy.SPARES)  # the ones that wait for a repaired node


def _events(f: FailuresModel, facts, issues: list[Issue]) -> tuple[FailureEventSpec, ...]:
    out = []
    policy = RecoveryPolicy(f.recovery.policy)
    for i, e in enumerate(f.events):
        path = f"failures.events.{i}"
        kind = FailureKind(e.kind)
        if not e.target and _PREFIXES[kind]:
            issues.append(Issue(f"{path}.target", f"required key is missing ({kind} needs a target)"))
        else:
            _check_target(kind, e.target, facts, path, issues)
        for key, owner in _KIND_KEYS.items():
            if key in e.model_fields_set and kind is not owner:
                issues.append(Issue(f"{path}.{key}", f"{kind} does not use '{key}' (only {owner} does); remove it"))
        spine = (kind is FailureKind.SWITCH_DOWN and facts is not None and facts.switches
                 and e.target.partition(":")[2] not in facts.leaves)  # rerouted: its duration matters
        if kind in _DOWN and not spine and e.duration is not None and policy not in _REPAIR_POLICIES:
            issues.append(Issue(f"{path}.duration", f"policy {policy} replaces a failed node at once, so how long "
                                                    f"it stays down changes nothing (only elastic and spares wait "
                                                    f"for the repair); remove it"))
        if kind is FailureKind.LINK_DEGRADE and e.factor is None:
            issues.append(Issue(f"{path}.factor", "required key is missing (link_degrade needs the remaining fraction)"))
        if kind is FailureKind.STRAGGLER:
            if e.slowdown is None:
                issues.append(Issue(f"{path}.slowdown", "required key is missing (straggler needs a slowdown)"))
            elif e.slowdown < 1:
                issues.append(Issue(f"{path}.slowdown", f"got {e.slowdown}; expected a multiplier >= 1"))
        if kind is FailureKind.NETWORK_JITTER and e.delay is None:
            issues.append(Issue(f"{path}.delay", "required key is missing (network_jitter needs the median per-step delay)"))
        out.append(FailureEventSpec(e.at, kind, e.target, e.factor, e.slowdown, e.duration, e.delay, e.sigma))
    return tuple(out)


def _random(f: FailuresModel, issues: list[Issue]) -> RandomFailuresSpec | None:
    r = f.random
    if r is None:
        return None
    dist = FailureDistribution(r.distribution)
    if "weibull_shape" in r.model_fields_set and dist is not FailureDistribution.WEIBULL:
        issues.append(Issue("failures.random.weibull_shape", "only the weibull distribution has a shape; "
                                                             "set distribution: weibull or remove it"))
    if "lemon_factor" in r.model_fields_set and r.lemon_fraction == 0:
        issues.append(Issue("failures.random.lemon_factor", "no lemon nodes (lemon_fraction is 0); set "
                                                            "lemon_fraction or remove it"))
    given = (r.gpu_mtbf, r.node_mtbf, r.nic_mtbf, r.link_mtbf, r.switch_mtbf)
    return RandomFailuresSpec(*given, distribution=dist, weibull_shape=r.weibull_shape, repair_s=r.repair,
                              repair_sigma=r.repair_sigma, lemon_fraction=r.lemon_fraction,
                              lemon_factor=r.lemon_factor, defaults=all(x is None for x in given))


def _recovery(f: FailuresModel, nodes: int | None, issues: list[Issue]) -> RecoverySpec:
    rec = f.recovery
    policy = RecoveryPolicy(rec.policy)
    for key, owners in _POLICY_KEYS.items():
        if key in rec.model_fields_set and policy not in owners:
            issues.append(Issue(f"failures.recovery.{key}", f"policy {policy} does not use '{key}' (only "
                                                            f"{', '.join(owners)} does); remove it"))
    if rec.checkpoint_write is not None and rec.storage_bandwidth is not None:
        issues.append(Issue("failures.recovery.storage_bandwidth", "give checkpoint_write or storage_bandwidth, not both"))
    if "snapshot_bandwidth" in rec.model_fields_set and not (rec.checkpoint_async or policy is RecoveryPolicy.IN_MEMORY):
        issues.append(Issue("failures.recovery.snapshot_bandwidth", "only async and in_memory checkpoints copy to "
                                                                    "host memory; remove it"))
    if rec.checkpoint_async and policy is RecoveryPolicy.IN_MEMORY:
        issues.append(Issue("failures.recovery.checkpoint_async", "in_memory copies to peers' memory already; "
                                                                  "remove checkpoint_async"))
    write = rec.checkpoint_write if rec.storage_bandwidth is None else None
    if rec.checkpoint_async and write is not None and rec.checkpoint_interval < write:
        issues.append(Issue("failures.recovery.checkpoint_interval", f"got {rec.checkpoint_interval} s; an async "
                            f"checkpoint must finish writing ({write} s) before the next one starts"))
    if policy is RecoveryPolicy.REPLICA_GROUPS and rec.replica_groups is not None and nodes is not None:
        if rec.replica_groups > nodes or nodes % rec.replica_groups:
            issues.append(Issue("failures.recovery.replica_groups", f"got {rec.replica_groups}; expected a divisor "
                                                                    f"of the {nodes} nodes"))
    if rec.storage_bandwidth is None and write is None:
        write = 60.0
    return RecoverySpec(policy=policy, checkpoint_interval_s=rec.checkpoint_interval, checkpoint_write_s=write,
                        storage_bandwidth_Bps=rec.storage_bandwidth, checkpoint_async=rec.checkpoint_async,
                        snapshot_bandwidth_Bps=rec.snapshot_bandwidth, detection_s=rec.detection,
                        restart_s=rec.restart, persistent_interval_s=rec.persistent_interval, spares=rec.spares,
                        spare_delay_s=rec.spare_delay, replica_groups=rec.replica_groups)


def resolve_failures(f: FailuresModel | None, cluster: ClusterSpec | None, issues: list[Issue]) -> FailuresSpec | None:
    if f is None:
        return None
    needs_topology = any(e.target.startswith(("link:", "switch:")) for e in f.events)
    facts = _facts(cluster) if needs_topology else None
    if facts is None and cluster is not None and not needs_topology:
        facts = targets.FailureTargets(cluster.num_nodes, cluster.num_gpus, (), 0, (), (), {}, (), frozenset())
    events = _events(f, facts, issues)
    random = _random(f, issues)
    m = f.maintenance
    maintenance = None if m is None else MaintenanceSpec(m.interval, m.duration, m.first)
    recovery = _recovery(f, cluster.num_nodes if cluster is not None else None, issues)
    return FailuresSpec(events, random, recovery, maintenance)
