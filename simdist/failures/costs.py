"""Checkpoint and recovery costs of a scenario, and the JobSpec the timeline needs.

A checkpoint holds fp32 master weights and fp32 optimizer states (4 + 4 x states bytes per parameter;
the low-precision copy is derived from the master). A persistent write takes `checkpoint_write`, or
state bytes / `storage_bandwidth` (aggregate). Asynchronous checkpoints block only for the snapshot of
each GPU's shard (state bytes / GPUs) to host memory at `snapshot_bandwidth`; in-memory checkpoints
block for the copy of each node's shard (state bytes / nodes) to its peer over the node's NICs, and
restore the same way. A rejoining replica group copies the whole state from a peer over one node's NICs.
"""
from __future__ import annotations

import math

from simdist.compute import OPTIMIZER_STATES
from simdist.failures.targets import FailureTargets
from simdist.failures.state import Costs, JobSpec
from simdist.scenario import BatchSplit, RecoveryPolicy, Scenario
from simdist.workload.lora import trainable_param_count

DEFAULT_WRITE_S = 60.0


def state_bytes(scenario: Scenario) -> float:
    """Bytes of one checkpoint: fp32 master weights + fp32 optimizer states of the trained parameters (under LoRA
    the adapters': a PEFT checkpoint leaves the frozen base, which is read back from its own files)."""
    model = scenario.workload.model
    assert model is not None
    return trainable_param_count(model) * 4.0 * (1 + OPTIMIZER_STATES[scenario.training.optimizer.value])


def node_bandwidth_Bps(scenario: Scenario) -> float:
    """The slowest node group's NIC bandwidth (all NICs together, achieved)."""
    return min(g.nic.count * g.nic.link.effective_Bps for g in scenario.cluster.node_groups)


def persistent_write_s(scenario: Scenario) -> float:
    """checkpoint_write, or state bytes / storage_bandwidth."""
    rec = scenario.failures.recovery
    if rec.storage_bandwidth_Bps is not None:
        return state_bytes(scenario) / rec.storage_bandwidth_Bps
    return DEFAULT_WRITE_S if rec.checkpoint_write_s is None else rec.checkpoint_write_s


def recovery_costs(scenario: Scenario) -> Costs:
    rec = scenario.failures.recovery
    nbytes = state_bytes(scenario)
    write = persistent_write_s(scenario)
    gpus, nodes = scenario.cluster.num_gpus, scenario.cluster.num_nodes
    node_bw = node_bandwidth_Bps(scenario)
    blocking, persist = write, 0.0
    if rec.checkpoint_async:
        blocking, persist = nbytes / gpus / rec.snapshot_bandwidth_Bps, write
    shard_copy = nbytes / nodes / min(node_bw, rec.snapshot_bandwidth_Bps * gpus / nodes)
    persistent_interval = math.inf
    if rec.policy is RecoveryPolicy.IN_MEMORY:
        persistent_interval = rec.persistent_interval_s or 4 * rec.checkpoint_interval_s
    return Costs(interval_s=rec.checkpoint_interval_s, write_s=blocking, persist_s=persist,
                 detection_s=rec.detection_s, restart_s=rec.restart_s, memory_copy_s=shard_copy,
                 restore_s=shard_copy, persistent_interval_s=persistent_interval, load_s=write,
                 spares=rec.spares, spare_delay_s=rec.spare_delay_s, weight_copy_s=nbytes / node_bw)


def replica_groups(scenario: Scenario, nodes: int) -> tuple[tuple[int, ...], ...]:
    """Contiguous blocks of nodes, one per data-parallel replica group."""
    g = scenario.failures.recovery.replica_groups or nodes
    size = nodes // g
    return tuple(tuple(range(i * size, (i + 1) * size)) for i in range(g))


def job_spec(scenario: Scenario, duration_s: float, global_batch: int, batch_per_gpu: int, micro_steps: int,
             facts: FailureTargets, gpus_per_replica: int = 1) -> JobSpec:
    gpn = tuple(g.gpus_per_node for g in scenario.cluster.node_groups for _ in range(g.count))
    price = sum(g.gpu.price_per_hour_usd * g.count * g.gpus_per_node for g in scenario.cluster.node_groups)
    policy = scenario.failures.recovery.policy
    groups = replica_groups(scenario, len(gpn)) if policy is RecoveryPolicy.REPLICA_GROUPS else ()
    return JobSpec(duration_s=duration_s, gpus_per_node=gpn, global_batch=global_batch, batch_per_gpu=batch_per_gpu,
                   micro_steps=micro_steps, state_bytes=state_bytes(scenario),
                   node_bandwidth_Bps=node_bandwidth_Bps(scenario),
                   tokens_per_sample=scenario.workload.model.tokens_per_sample, gpu_price_per_hour_usd=price,
                   groups=groups, rebalance_every=scenario.training.rebalance_every
                   if scenario.training.batch_split is BatchSplit.DYNAMIC else 0, gpus_per_replica=gpus_per_replica)
