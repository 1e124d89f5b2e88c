"""The job-level goodput timeline: failures, checkpoints and recovery policies over a long run.

Events (incidents, repairs, slowdowns, maintenance, the end of a recovery) are processed in time order;
between two events the iteration time is constant (the engine's `step_time(state)`), so training is
advanced arithmetically and no iteration is simulated one by one. Work is counted in healthy-cluster
seconds: `useful_s` is the committed samples divided by the healthy throughput, so that
useful + degraded + lost_work + checkpoint + restart + downtime = wall time exactly.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import replace
from typing import Any, Callable

from simdist.failures.incidents import Incident, Slowdown
from simdist.failures.recovery import RESPONSES
from simdist.failures.state import (DOWN, RECOVER, RUN, WAIT, ClusterState, Costs, JobSpec, StepTime, Tally,
                                    samples_per_step)
from simdist.scenario import RecoveryPolicy

_EPS = 1e-9


class Timeline:
    """One run's state between events, the event queue, and the handlers of each event kind (EVENTS)."""

    def __init__(self, job: JobSpec, policy: RecoveryPolicy, costs: Costs, step_time: StepTime,
                 record: bool = False, cut_off=None) -> None:
        self.job, self.policy, self.costs, self.step_time = job, policy, costs, step_time
        self.cut_off = cut_off  # dead edges -> the nodes they cut off (FailureTargets.cut_off); None: not checked
        self.record = record
        self.tally = Tally(wall_s=job.duration_s)
        self.now_s = 0.0
        self.mode = RUN
        self.heap: list = []
        self.seq = 0
        self.token = 0  # invalidates a pending READY / DOWN_END
        self.persist_token = 0
        self.nodes_out: set[int] = set()
        self.groups_out: set[int] = set()
        self.down: set[int] = set()
        self.covered: set[int] = set()  # nodes replaced by a spare, returning to the pool after repair
        self.free_spares = costs.spares
        self.backup_missing: set[int] = set()  # in_memory: nodes whose shard has no live copy on a peer
        self.active: list[Slowdown] = []
        self.work_s = 0.0  # all work computed, kept or not (healthy seconds)
        # uncommitted work (healthy seconds): in no checkpoint yet; in an asynchronous checkpoint still being
        # written; (in_memory) only in a peer's memory, not yet in a persistent checkpoint
        self.unsaved_s = self.persisting_s = self.in_peer_memory_s = 0.0
        self.since_checkpoint_s = 0.0  # compute since the last checkpoint
        self.since_persistent_s = 0.0  # in_memory: compute since the last persistent checkpoint
        self.since_step_s = 0.0  # compute since the last step boundary we know of (partial-step losses)
        self.writing_until_s: float | None = None
        self.writing_kind = ""
        self.down_checkpoint_until_s = 0.0
        self._rates: dict[ClusterState, tuple[float, float]] = {}
        self.balanced: tuple[tuple[int, float], ...] = ()  # dynamic split: the stragglers it is balanced for
        self.rebalance_target: tuple | None = None
        self.rebalance_token = 0
        healthy = ClusterState(keep_global_batch=policy is not RecoveryPolicy.REPLICA_GROUPS,
                               balanced_for=() if job.rebalance_every else None)
        self.healthy_rate = samples_per_step(job, healthy) / step_time(healthy)  # samples/s
        if not self.healthy_rate > 0 or not math.isfinite(self.healthy_rate):
            raise ValueError("the healthy cluster cannot train (step time is not finite)")
        self.node_of_gpu = [i for i, k in enumerate(job.gpus_per_node) for _ in range(k)]
        self.group_of = {n: g for g, nodes in enumerate(job.groups) for n in nodes}
        self.update_state()

    # ---------------------------------------------------------------- state and rates
    def _state(self) -> ClusterState:
        strag: dict[int, float] = {}
        links = []
        for s in self.active:
            for g, x in s.stragglers:
                strag[g] = strag.get(g, 1.0) * x
            links.extend(s.links)
        out = set(self.nodes_out)
        if self.policy is RecoveryPolicy.REPLICA_GROUPS:
            out = {n for g in self.groups_out for n in self.job.groups[g]}
        node_of = self.node_of_gpu
        balanced = (tuple((g, x) for g, x in self.balanced if node_of[g] not in out) if self.job.rebalance_every
                    else None)
        return ClusterState(frozenset(out), tuple(sorted((g, x) for g, x in strag.items() if node_of[g] not in out)),
                            tuple(sorted(links)), self.policy is not RecoveryPolicy.REPLICA_GROUPS, balanced)

    def update_state(self) -> None:
        state = self._state()
        if state not in self._rates:
            samples = samples_per_step(self.job, state)
            step = self.step_time(state) if samples else math.inf
            self._rates[state] = (samples, step)
        samples, step = self._rates[state]
        self.step_s = step + sum(s.delay_s for s in self.active)
        self.rate = (samples / self.step_s) / self.healthy_rate if math.isfinite(self.step_s) else 0.0
        self.since_step_s = 0.0
        if self.job.rebalance_every:
            self._schedule_rebalance(state)

    def _schedule_rebalance(self, state: ClusterState) -> None:
        """Dynamic split: a split that no longer matches the stragglers is re-computed from the step times
        of the next `rebalance_every` iterations, i.e. that many iterations at the lagging step time later."""
        if state.stragglers == state.balanced_for:
            if self.rebalance_target is not None:
                self.rebalance_token += 1  # the change was undone before the re-split: nothing to do
                self.rebalance_target = None
            return
        if self.rebalance_target == state.stragglers or not math.isfinite(self.step_s):
            return
        self.rebalance_token += 1
        self.rebalance_target = state.stragglers
        self.push(self.now_s + self.job.rebalance_every * self.step_s, "rebalance", state.stragglers,
                  token=self.rebalance_token)

    def on_rebalance(self, stragglers, token: int) -> None:
        if token != self.rebalance_token:
            return
        self.rebalance_target = None
        self.balanced = stragglers
        self.tally.rebalances += 1
        self.update_state()

    # ---------------------------------------------------------------- event queue
    def push(self, time_s: float, kind: str, payload=None, token: int = 0) -> None:
        """Queue an event of `kind` (a key of EVENTS) at `time_s`; `token` lets a later change void it."""
        order = EVENTS[kind][0]
        heapq.heappush(self.heap, (time_s, order, self.seq, kind, payload, token))
        self.seq += 1

    def run(self) -> Tally:
        end = self.job.duration_s
        while self.heap and self.heap[0][0] < end:
            self.advance(self.heap[0][0])  # stops early at any event pushed meanwhile (an async commit)
            time_s, _, _, kind, payload, token = heapq.heappop(self.heap)
            EVENTS[kind][1](self, payload, token)
        self.advance(end)
        self.tally.useful_s = self.work_s - self.tally.lost_work_s
        self.tally.samples = self.tally.useful_s * self.healthy_rate
        return self.tally

    # ---------------------------------------------------------------- advancing time
    def _record(self, what: str, start: float, end: float) -> None:
        """Record a stretch of the timeline (merged with the previous one when it continues it)."""
        if not self.record or end <= start:
            return
        segs = self.tally.segments
        if segs and segs[-1][0] == what and abs(segs[-1][2] - start) <= _EPS:
            segs[-1] = (what, segs[-1][1], end)
        else:
            segs.append((what, start, end))

    def _train_name(self) -> str:
        return "train" if self.rate >= 1 - 1e-12 else f"train at {self.rate:.0%}"

    def advance(self, t_to: float) -> None:
        while self.now_s < t_to - _EPS:
            if self.heap and self.heap[0][0] < t_to:
                t_to = max(self.now_s, self.heap[0][0])
                continue
            dt_all = t_to - self.now_s
            if self.mode == RUN:
                self._run_until(t_to)
                continue
            if self.mode == DOWN and self.now_s < self.down_checkpoint_until_s:
                dt = min(t_to, self.down_checkpoint_until_s) - self.now_s
                self.tally.checkpoint_s += dt
                self._record("checkpoint", self.now_s, self.now_s + dt)
            else:
                dt = dt_all
                if self.mode == RECOVER:
                    self.tally.restart_s += dt
                    self._record("restart", self.now_s, self.now_s + dt)
                else:
                    self.tally.downtime_s += dt
                    self._record("maintenance" if self.mode == DOWN else "wait for repair", self.now_s, self.now_s + dt)
            self.tally.group_out_s += dt * len(self.groups_out)
            self.now_s += dt
        self.now_s = max(self.now_s, t_to)

    def _run_until(self, t_to: float) -> None:
        k = self.costs
        if self.writing_until_s is not None:
            end = min(self.writing_until_s, t_to)
            self.tally.checkpoint_s += end - self.now_s
            self._record("checkpoint", self.now_s, end)
            self.tally.group_out_s += (end - self.now_s) * len(self.groups_out)
            self.now_s = end
            if end >= self.writing_until_s - _EPS:
                self._write_done()
            return
        cycle = k.interval_s + k.write_s
        if (self.since_checkpoint_s == 0.0 and k.persist_s == 0.0 and self.policy is not RecoveryPolicy.IN_MEMORY
                and t_to - self.now_s > cycle):  # whole compute + checkpoint cycles: skip them arithmetically
            n = math.floor((t_to - self.now_s) / cycle)
            self._compute(n * k.interval_s)
            self.since_checkpoint_s = self.since_persistent_s = 0.0
            self.tally.checkpoint_s += n * k.write_s
            self.tally.group_out_s += n * k.write_s * len(self.groups_out)
            self.tally.checkpoints += n
            self.unsaved_s = 0.0
            self._record(f"{self._train_name()} + checkpoints", self.now_s, self.now_s + n * cycle)
            self.now_s += n * cycle
            return
        end = min(t_to, self.now_s + k.interval_s - self.since_checkpoint_s)
        self._record(self._train_name(), self.now_s, end)
        self._compute(end - self.now_s)
        self.now_s = end
        if self.since_checkpoint_s >= k.interval_s - _EPS:
            self._write_start()

    def _compute(self, dt: float) -> None:
        work = dt * self.rate
        self.unsaved_s += work
        self.work_s += work
        self.tally.degraded_s += dt - work
        self.tally.group_out_s += dt * len(self.groups_out)
        self.since_checkpoint_s += dt
        self.since_persistent_s += dt
        self.since_step_s += dt

    # ---------------------------------------------------------------- checkpoints
    def _write_start(self) -> None:
        k = self.costs
        if self.policy is RecoveryPolicy.IN_MEMORY and self.since_persistent_s < k.persistent_interval_s - _EPS:
            self.writing_kind, cost = "memory", k.memory_copy_s
        else:
            self.writing_kind, cost = "persistent", k.write_s
        self.since_checkpoint_s = 0.0
        self.writing_until_s = self.now_s + cost
        if cost <= 0:
            self._write_done()

    def _write_done(self) -> None:
        self.writing_until_s = None
        self.tally.checkpoints += 1
        if self.writing_kind == "memory":
            self.in_peer_memory_s += self.unsaved_s
            self.unsaved_s = 0.0
            self.backup_missing.clear()
        elif self.costs.persist_s > 0:  # async: the snapshot is taken; it commits when the write ends
            self.persisting_s += self.unsaved_s
            self.unsaved_s = 0.0
            self.persist_token += 1
            self.push(self.now_s + self.costs.persist_s, "persist", token=self.persist_token)
        else:
            self.unsaved_s = self.in_peer_memory_s = 0.0
            self.since_persistent_s = 0.0
            self.backup_missing.clear()

    def on_persist(self, _payload, token: int) -> None:
        if token == self.persist_token:
            self.persisting_s = 0.0

    def rollback(self, to_persistent: bool) -> None:
        lost = self.unsaved_s + self.persisting_s + (self.in_peer_memory_s if to_persistent else 0.0)
        self.tally.lost_work_s += lost
        self.unsaved_s = self.persisting_s = 0.0
        if to_persistent:
            self.in_peer_memory_s = 0.0
            self.since_persistent_s = 0.0
        self.persist_token += 1
        self.writing_until_s = None
        self.since_checkpoint_s = 0.0

    def lose_partial_step(self, share: float) -> None:
        """The iteration in flight when a rank fails is lost (for `share` of the batch)."""
        if not math.isfinite(self.step_s) or self.step_s <= 0:
            return
        lost = min(self.unsaved_s, (self.since_step_s % self.step_s) * self.rate * share)
        self.unsaved_s -= lost
        self.tally.lost_work_s += lost

    # ---------------------------------------------------------------- recovery
    def recover(self, seconds: float) -> None:
        self.token += 1
        self.mode = RECOVER
        self.writing_until_s = None
        self.push(self.now_s + seconds, "ready", token=self.token)

    def on_ready(self, _payload, token: int) -> None:
        if token != self.token:
            return
        self.update_state()
        self.mode = RUN if self.rate > 0 else WAIT

    def on_incident(self, inc: Incident, _token: int) -> None:
        t = self.tally
        if self.record:
            t.segments.append((f"failure: {inc.kind} {','.join(map(str, inc.nodes[:4]))}", self.now_s, self.now_s))
        t.failures += 1
        t.failures_by_kind[inc.kind] = t.failures_by_kind.get(inc.kind, 0) + 1
        if inc.links and not inc.nodes and self.cut_off is not None:  # with the links already dead, a partition?
            dead = tuple(sorted({(u, v) for s in self.active for u, v, x in s.links if x == 0.0} | set(inc.links)))
            cut = self.cut_off(dead)
            if cut:  # the nodes come back when this fault is repaired (the earlier ones alone did not cut them)
                inc = replace(inc, nodes=cut)
        if inc.links and not inc.nodes:  # every rank still reachable: the fabric reroutes, the job runs on
            at_zero = tuple((u, v, 0.0) for u, v in inc.links)
            s = Slowdown(self.now_s, self.now_s + inc.repair_s, inc.kind, links=at_zero)
            self.on_slow_start(s, 0)
            if math.isfinite(s.end_s):
                self.push(s.end_s, "slow_end", s)
            return
        fresh = [n for n in inc.nodes if n not in self.down]
        for n in fresh:
            self.down.add(n)
            self.push(self.now_s + inc.repair_s, "repair", n)
        if self.mode == DOWN:  # maintenance window: the restart after it covers this failure
            if self.policy is RecoveryPolicy.ELASTIC:
                self.nodes_out |= set(inc.nodes)
            return
        RESPONSES[self.policy](self, inc)

    def on_group_back(self, g: int, _token: int) -> None:
        self.groups_out.discard(g)
        self.tally.rejoins += 1
        self.update_state()
        if self.mode == WAIT and self.rate > 0:
            self.mode = RUN

    def on_repair(self, n: int, _token: int) -> None:
        self.down.discard(n)
        if n in self.covered:
            self.covered.discard(n)
            self.free_spares += 1
        if self.policy is RecoveryPolicy.ELASTIC and n in self.nodes_out:
            self.nodes_out.discard(n)
            self.tally.rejoins += 1
            if self.mode in (RUN, WAIT):  # re-form the group with the repaired node
                self.recover(self.costs.restart_s)

    # ---------------------------------------------------------------- slowdowns and maintenance
    def on_slow_start(self, s: Slowdown, _token: int) -> None:
        self.active.append(s)
        self.update_state()

    def on_slow_end(self, s: Slowdown, _token: int) -> None:
        self.active.remove(s)
        self.update_state()

    def on_maintenance(self, duration_s: float, _token: int) -> None:
        self.tally.maintenance += 1
        ckpt = 0.0
        if self.mode == RUN:  # planned: save everything first, so no work is lost
            ckpt = self.costs.write_s + self.costs.persist_s
            self.unsaved_s = self.persisting_s = self.in_peer_memory_s = 0.0
            self.since_checkpoint_s = self.since_persistent_s = 0.0
            self.persist_token += 1
        self.writing_until_s = None
        self.token += 1
        self.mode = DOWN
        self.down_checkpoint_until_s = self.now_s + ckpt
        self.push(self.now_s + ckpt + duration_s, "down_end", token=self.token)

    def on_down_end(self, _payload, token: int) -> None:
        if token == self.token:
            self.recover(self.costs.restart_s)


# kind -> (order among events at the same instant, handler(timeline, payload, token)). An incident comes after
# every other event of its instant, so a repair, a slowdown's end or a finished restart at that time counts first.
EVENTS: dict[str, tuple[int, Callable[[Timeline, Any, int], None]]] = {
    "incident": (1, Timeline.on_incident),
    "repair": (0, Timeline.on_repair),
    "ready": (0, Timeline.on_ready),
    "group_back": (0, Timeline.on_group_back),
    "persist": (0, Timeline.on_persist),
    "slow_start": (0, Timeline.on_slow_start),
    "slow_end": (0, Timeline.on_slow_end),
    "maintenance": (0, Timeline.on_maintenance),
    "down_end": (0, Timeline.on_down_end),
    "rebalance": (0, Timeline.on_rebalance),
}


def run_timeline(job: JobSpec, policy: RecoveryPolicy, costs: Costs, step_time: StepTime,
                 incidents: list[Incident], slowdowns: list[Slowdown] = (),
                 maintenance: list[tuple[float, float]] = (), record: bool = False, cut_off=None) -> Tally:
    """One realisation of the run: where its wall time went (and, with `record`, its segments). `cut_off`
    (dead edges -> nodes cut off) lets a fabric fault that partitions the fabric only together with faults
    already active stop the job as a partition does."""
    j = Timeline(job, RecoveryPolicy(policy), costs, step_time, record, cut_off)
    for inc in incidents:
        j.push(inc.time_s, "incident", inc)
    for s in slowdowns:
        j.push(s.start_s, "slow_start", s)
        if math.isfinite(s.end_s):
            j.push(s.end_s, "slow_end", s)
    for at, d in maintenance:
        j.push(at, "maintenance", d)
    return j.run()
