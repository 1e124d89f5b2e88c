"""What a scenario may say about how the frameworks call NCCL: its algorithm choice: communication.nccl_algo / nccl_proto (NCCL_ALGO and
NCCL_PROTO) and communication.strategy with backend nccl.

With backend nccl the algorithm of a flat collective is NCCL's tuner's (collectives/nccl.py): `strategy: ring`,
the default, leaves it that choice, and the way to pin one is NCCL's own, nccl_algo. A strategy NCCL has no such
switch for (tree, halving_doubling) would be ignored, so it is refused with the key to use instead; nccl_algo and
nccl_proto are read only by the nccl backend's tuner, so they are refused with other backends and with the
composite strategies (hierarchical, torus2d, ps) that do not go through it.
"""
from __future__ import annotations

from simdist.collectives.nccl_env import check_list
from simdist.errors import Issue
from simdist.scenario import Backend, StrategyKind

_COMPOSITE = {StrategyKind.HIERARCHICAL, StrategyKind.TORUS2D, StrategyKind.TORUS3D, StrategyKind.PS}
_NCCL_NAMES = {StrategyKind.TREE: "Tree", StrategyKind.RING: "Ring"}


def nccl_choice_issues(c) -> list[Issue]:
    """Refusals for the communication model `c` (schema.CommunicationModel)."""
    issues: list[Issue] = []
    backend, strategy = Backend(c.backend), StrategyKind(c.strategy)
    nccl = backend is Backend.NCCL
    if nccl and strategy in (StrategyKind.TREE, StrategyKind.HALVING_DOUBLING):
        pin = (f"; to pin NCCL's {_NCCL_NAMES[strategy]} as NCCL_ALGO does, set communication.nccl_algo: "
               f"{_NCCL_NAMES[strategy]} with strategy ring" if strategy in _NCCL_NAMES else
               " (NCCL has no halving-doubling; use backend textbook or gloo for it)")
        issues.append(Issue("communication.strategy", f"got '{strategy}' with backend nccl, whose tuner chooses the "
                                                      f"algorithm itself{pin}"))
    for key, kind in (("nccl_algo", "algo"), ("nccl_proto", "proto")):
        value = getattr(c, key)
        if value is None:
            continue
        if not nccl:
            issues.append(Issue(f"communication.{key}", f"got {value!r} with backend '{backend}'; it is NCCL's "
                                                        f"NCCL_{kind.upper()}, read only with backend nccl"))
        elif strategy in _COMPOSITE:
            issues.append(Issue(f"communication.{key}", f"got {value!r} with strategy '{strategy}', which does not "
                                                        "go through NCCL's tuner; read only with strategy ring"))
        problem = check_list(value, kind)
        if problem is not None:
            issues.append(Issue(f"communication.{key}", f"NCCL would refuse it: {problem}"))
    return issues


def nccl_socket_issues(c, cluster) -> list[Issue]:
    """communication.nccl_socket_threads is read by NCCL's socket transport only: backend nccl over a tcp NIC."""
    if c.nccl_socket_threads is None:
        return []
    key, value = "communication.nccl_socket_threads", c.nccl_socket_threads
    if Backend(c.backend) is not Backend.NCCL:
        return [Issue(key, f"got {value} with backend '{c.backend}'; it is NCCL's NCCL_SOCKET_NTHREADS, read only "
                           "with backend nccl")]
    if cluster is not None and not any(g.nic.link.transport == "tcp" for g in cluster.node_groups):
        return [Issue(key, f"got {value}, but no node has a tcp NIC: NCCL's socket transport never runs (drop the "
                           "key)")]
    return []


def ddp_average_issues(m) -> list[Issue]:
    """communication.ddp_average per_bucket is DDP's reducer's division of each bucket: read only where the reducer
    runs its own all-reduce on DDP buckets (bucketing ddp, an all-reduce strategy, no compression hook) in training."""
    c = m.communication
    if str(c.ddp_average) != "per_bucket":
        return []
    why = None
    if m.workload.benchmark is not None:
        why = "a benchmark has no gradient buckets"
    elif str(c.bucketing) != "ddp":
        why = f"bucketing '{c.bucketing}' is not DDP's reducer"
    elif StrategyKind(c.strategy) is StrategyKind.PS:
        why = "parameter servers are not DDP's reducer"
    elif str(c.compression.method) != "none":
        why = "a compression comm hook replaces the reducer's all-reduce and skips its division"
    if why is None:
        return []
    return [Issue("communication.ddp_average", f"got 'per_bucket', but {why}; remove it")]
