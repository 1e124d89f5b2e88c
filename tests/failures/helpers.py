"""Small building blocks for the failure tests: a job, a constant or shrink-aware step time, costs."""
from __future__ import annotations

from simdist.failures.targets import FailureTargets
from simdist.failures.state import ClusterState, JobSpec, Tally, gpus_in, samples_per_step


def job(nodes: int = 4, gpus: int = 8, duration_s: float = 36000.0, groups: int = 0) -> JobSpec:
    size = nodes // groups if groups else 0
    return JobSpec(duration_s=duration_s, gpus_per_node=(gpus,) * nodes, global_batch=nodes * gpus * 4,
                   batch_per_gpu=4, state_bytes=1e9, node_bandwidth_Bps=1e10,
                   groups=tuple(tuple(range(g * size, (g + 1) * size)) for g in range(groups)))


def compute_bound(j: JobSpec, healthy_step_s: float = 1.0):
    """Iteration time proportional to the per-GPU batch (pure compute): shrinking raises per-GPU work."""
    def step_time(state: ClusterState) -> float:
        per_gpu = samples_per_step(j, state) / gpus_in(j, state)
        return healthy_step_s * per_gpu / j.batch_per_gpu
    return step_time


def facts(nodes: int, gpus_per_node: int = 8, leaves: int = 1) -> FailureTargets:
    per_leaf = nodes // leaves
    return FailureTargets(nodes=nodes, gpus=nodes * gpus_per_node,
                       node_of_gpu=tuple(n for n in range(nodes) for _ in range(gpus_per_node)), nics=nodes,
                       nic_node=tuple(range(nodes)), switches=tuple(f"leaf{i}" for i in range(leaves)),
                       leaves={f"leaf{i}": tuple(range(i * per_leaf, (i + 1) * per_leaf)) for i in range(leaves)},
                       fabric_links=(), edges=frozenset())


def budget(t: Tally) -> float:
    return t.useful_s + t.degraded_s + t.lost_work_s + t.checkpoint_s + t.restart_s + t.downtime_s
