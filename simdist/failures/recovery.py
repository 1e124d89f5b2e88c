"""How each recovery policy answers an incident that stops ranks: what work is lost, how long until the
job runs again, and which nodes or replica groups it runs without meanwhile.

Each answer is a function of the timeline (failures.timeline.Timeline, passed in) and the incident; the
timeline picks it from RESPONSES by the scenario's `failures.recovery.policy`.
"""
from __future__ import annotations

from typing import Callable

from simdist.failures.incidents import Incident
from simdist.failures.state import RUN, WAIT
from simdist.scenario import RecoveryPolicy


def checkpoint_restart(job, inc: Incident) -> None:
    """Roll back to the last persistent checkpoint and restart the whole job after detection."""
    if job.mode == RUN:
        job.rollback(to_persistent=True)
    job.tally.restarts += 1
    job.recover(job.costs.detection_s + job.costs.restart_s)


def spares(job, inc: Incident) -> None:
    """As checkpoint_restart, but failed nodes are swapped for hot spares (a shorter delay) while any are free."""
    if job.mode == RUN:
        job.rollback(to_persistent=True)
    job.tally.restarts += 1
    need = [n for n in inc.nodes if n not in job.covered]
    if inc.nodes and job.free_spares >= len(need):
        job.free_spares -= len(need)
        job.covered |= set(need)
        job.recover(job.costs.detection_s + job.costs.spare_delay_s)
    else:  # no spare left (or a fabric fault): the scheduler's slow path
        job.recover(job.costs.detection_s + job.costs.restart_s)


def in_memory(job, inc: Incident) -> None:
    """Restore from the peer's in-memory copy; when a node and its peer (or a node whose copy is missing)
    fail together, from the persistent checkpoint."""
    n_nodes = job.job.nodes
    hit = set(inc.nodes)
    correlated = any((n + 1) % n_nodes in hit or n in job.backup_missing for n in inc.nodes) and n_nodes > 1
    if job.mode == RUN:
        job.rollback(to_persistent=correlated)
    if correlated:
        job.tally.correlated += 1
    job.backup_missing |= {(n - 1) % n_nodes for n in inc.nodes}  # the copies the failed nodes held
    job.tally.restarts += 1
    k = job.costs
    job.recover(k.detection_s + k.restart_s + (k.load_s if correlated else k.restore_s))


def elastic(job, inc: Incident) -> None:
    """Drop the failed nodes and re-form the group without them (only the iteration in flight is lost)."""
    if job.mode == RUN:
        job.lose_partial_step(1.0)
    job.nodes_out |= set(inc.nodes)
    if len(job.nodes_out) >= job.job.nodes:  # nobody holds the model any more
        job.rollback(to_persistent=True)
    job.tally.restarts += 1
    job.recover(job.costs.detection_s + job.costs.restart_s)


def replica_groups(job, inc: Incident) -> None:
    """The failed nodes' replica groups leave and rejoin after a restart and a weight copy; the others train on."""
    k = job.costs
    if not inc.nodes:  # a fabric fault aborts every group's collectives: a short whole-job restart
        if job.mode == RUN:
            job.lose_partial_step(1.0)
        job.tally.restarts += 1
        job.recover(k.detection_s + k.restart_s)
        return
    hit = {job.group_of[n] for n in inc.nodes} - job.groups_out
    if job.mode == RUN:
        job.lose_partial_step(len(hit) / len(job.job.groups))
    for g in sorted(hit):
        job.groups_out.add(g)
        job.push(job.now_s + k.detection_s + k.restart_s + k.weight_copy_s, "group_back", g)
    job.update_state()
    if len(job.groups_out) == len(job.job.groups):
        job.rollback(to_persistent=True)
        job.mode = WAIT
    job.tally.restarts += len(hit)


RESPONSES: dict[RecoveryPolicy, Callable[..., None]] = {
    RecoveryPolicy.CHECKPOINT_RESTART: checkpoint_restart,
    RecoveryPolicy.SPARES: spares,
    RecoveryPolicy.IN_MEMORY: in_memory,
    RecoveryPolicy.ELASTIC: elastic,
    RecoveryPolicy.REPLICA_GROUPS: replica_groups,
}
