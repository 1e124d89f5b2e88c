"""Graph builder and sync policy for asynchronous (asp) and stale-synchronous (ssp) parameter servers.

Each worker is its own rank class and loops on its own: forward/backward at its own speed; each
bucket, when ready, is encoded and pushed shard by shard to every server (a `SendRecv`; its own
shard stays local when the server is colocated with it), the server applies that worker's update
(`HostWork`, `server_delay_s`) and the worker pulls the updated shard back (a `SendRecv`), then
decodes; the shards of one collective move concurrently, collectives and buckets one after another.
No barrier: under `ssp` with bound s a worker starts iteration i only when the slowest worker has
finished iteration i - s - 1 (s = 0 is BSP); `asp` has no bound. All workers share one network
model, so in `simulate` concurrent pushes contend on the servers' links max-min fairly. In
`estimate` (no flows) every push and pull is timed as if all workers exchanged that shard at once
(the BSP PS step): exact for equal-speed workers in lockstep, pessimistic when they drift apart.

Reads follow SSP's guarantee (Ho et al. 2013): under bound s, the pull that ends iteration i waits
until every worker's iteration-(i - s) update of that shard is applied, so s = 0 reads what BSP
reads; asp pulls right after its own update. Staleness of an update = the number of updates applied
to that shard between this worker's last pull of it and the application of its push that were
computed from a different version than the one it read (updates computed from the same version are
siblings, as in BSP's sum): equal-speed asp workers see N - 1, ssp with s = 0 sees 0.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generator

from simdist.collectives.schedule import CollectiveOp, Schedule, Step, Transfer
from simdist.graph.builder import GraphBuilder
from simdist.graph.tasks import Compute, Graph, HostWork, RankClass, SendRecv, Stream
from simdist.strategies.data_parallel import backward_segments, forward_tasks, launch_offset
from simdist.strategies.plan import IterationPlan


def worker_payload_bytes(op: CollectiveOp, size_bytes: float, n_workers: int) -> float:
    """One worker's share of a codec collective (nccl-tests sizes): all_gather's total / N, else the size."""
    return size_bytes / n_workers if op == CollectiveOp.ALL_GATHER else size_bytes


class PsExchange:
    """Push and pull schedules of one worker's shard, cached so the network's step cache hits."""

    def __init__(self, ranks: tuple[int, ...], contended: bool) -> None:
        self.ranks = ranks
        self.contended = contended
        self._cache: dict[tuple, Schedule] = {}

    def schedule(self, kind: str, worker: int, server: int, shard_bytes: float) -> Schedule:
        """'push' (worker -> server) or 'pull' (server -> worker); contended: every worker's at once."""
        key = (kind, worker if not self.contended else -1, server, shard_bytes)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        senders = [w for w in self.ranks if w != server] if self.contended else [worker]
        pairs = [(w, server) if kind == "push" else (server, w) for w in senders]
        step = Step(tuple(Transfer(a, b, shard_bytes) for a, b in pairs), lockstep=False,
                    label=f"{kind} {'all' if self.contended else worker} <-> server {server}")
        out = Schedule(CollectiveOp.ALL_REDUCE, f"ps_{kind}", shard_bytes, ((step,),))
        self._cache[key] = out
        return out

    def of(self, task: SendRecv) -> Schedule:
        worker, server = (task.src, task.dst) if task.kind == "push" else (task.dst, task.src)
        return self.schedule(task.kind, worker, server, task.size_bytes)


def worker_graphs(plan: IterationPlan, endpoints: tuple[int, ...], servers: tuple[int, ...],
                  grouped: bool = False) -> list[Graph]:
    """The workers' graphs, class index = position in the list. Asynchronous workers are never in lockstep
    on a shared network, so each is its own class; `grouped` (estimate: every push and pull is timed as
    all workers' at once, so identical workers stay identical) keeps a plan class together, except the
    ranks that host a server (their own shard stays local)."""
    members: list[tuple] = []
    for cc in plan.classes:
        ranks = cc.rank_class.ranks
        if grouped:
            hosts = [r for r in ranks if endpoints[r] in servers]
            rest = tuple(r for r in ranks if endpoints[r] not in servers)
            members += [(cc, rest)] if rest else []
            members += [(cc, (r,)) for r in hosts]
        else:
            members += [(cc, (r,)) for r in ranks]
    members.sort(key=lambda m: m[1][0])
    out = []
    for i, (cc, ranks) in enumerate(members):
        rc = RankClass(i, ranks, cc.rank_class.node_group, cc.rank_class.gpu, cc.rank_class.batch,
                       cc.rank_class.slowdown)
        out.append(_worker_graph(plan, cc, rc, endpoints[ranks[0]], servers))
    return out


def _worker_graph(plan: IterationPlan, cc, rc: RankClass, ep: int, servers: tuple[int, ...]) -> Graph:
    b = GraphBuilder()
    fwd = forward_tasks(b, plan, cc)
    segments = backward_segments(b, plan, cc, (fwd,))
    tail = [segments[cc.bwd_s]]
    comm_tail: list[int] = []
    for j, bc in enumerate(plan.buckets):
        ready = cc.ready_s[j]
        dep = segments[min(ready, cc.bwd_s)]
        name = f"bucket{bc.bucket.index}"
        launch = launch_offset(plan, ready)
        if launch > ready:
            dep = b.add(Compute, f"{name} fusion cycle", (dep,), None, duration_s=launch - ready, kind="wait")
        deps = [dep] + comm_tail
        if cc.encode_s[j]:
            deps = [b.add(Compute, f"{name} encode", deps, Stream.COMM, duration_s=cc.encode_s[j], kind="encode")]
        for c, (op, size) in enumerate(bc.collectives):
            shard = worker_payload_bytes(op, size, plan.dp) / len(servers)
            pulls = []
            for sv in servers:
                key = (j, c, sv)
                push = b.add(SendRecv, f"{name} push#{c} -> server {sv}", deps, None, src=ep, dst=sv,
                             size_bytes=shard, kind="push", shard=key)
                upd = b.add(HostWork, f"{name} update#{c} on server {sv}", (push,), None, host=sv,
                            duration_s=bc.server_delay_s, shard=key)
                pulls.append(b.add(SendRecv, f"{name} pull#{c} <- server {sv}", (upd,), None, src=sv, dst=ep,
                                   size_bytes=shard, kind="pull", shard=key))
            deps = pulls
        if cc.decode_s[j]:
            deps = [b.add(Compute, f"{name} decode", deps, Stream.COMM, duration_s=cc.decode_s[j], kind="decode")]
        comm_tail = list(deps)
    if cc.optimizer_s:
        b.add(Compute, "optimizer", tail + comm_tail, Stream.COMPUTE, duration_s=cc.optimizer_s, kind="optimizer")
    return b.build(rc)


@dataclass
class PsPolicy:
    """The SSP bound on iterations, shard versions for reads and staleness, and the servers' byte counts.
    `sizes[c]` workers run as class c (1 each when every worker is simulated on its own): they apply their
    updates one after another at the same instant, each reading right after its own when allowed."""

    env: object
    sizes: list[int]
    bound: int | None = None  # None: asp
    staleness: list[int] = field(default_factory=list)
    server_in_bytes: dict[int, float] = field(default_factory=dict)
    server_out_bytes: dict[int, float] = field(default_factory=dict)
    bases: dict[tuple, int] = field(default_factory=dict)  # per shard: updates applied so far (its version)
    same_base: dict[tuple, dict[int, int]] = field(default_factory=dict)  # per shard: version -> updates computed from it
    applied: dict[tuple, list[int]] = field(default_factory=dict)  # per shard: updates applied per class
    changed: dict[tuple, object] = field(default_factory=dict)  # per shard: fires when its slowest class advances
    read: dict[tuple, int] = field(default_factory=dict)  # (class, member, shard) -> version it last pulled
    read_now: dict[tuple, bool] = field(default_factory=dict)  # reads taken right after the class's own update

    def __post_init__(self) -> None:
        self.done = [0] * len(self.sizes)
        self.progress = self.env.event()

    def before_iteration(self, env, graph: Graph, it: int) -> Generator:
        while self.bound is not None and min(self.done) < it - self.bound:
            yield self.progress

    def after_iteration(self, graph: Graph, it: int) -> None:
        before = min(self.done)
        self.done[graph.rank_class.index] += 1
        if min(self.done) > before:
            old, self.progress = self.progress, self.env.event()
            old.succeed()

    def before(self, env, graph: Graph, task, it: int) -> Generator:
        if isinstance(task, SendRecv) and task.kind == "pull":
            c, key = graph.rank_class.index, task.shard
            if self.read_now.pop((c, key), False):
                return
            while not self._readable(c, key):
                if key not in self.changed:
                    self.changed[key] = env.event()
                yield self.changed[key]
            for k in range(self.sizes[c]):
                self.read[(c, k, key)] = self.bases[key]
        return
        yield  # a generator even when it never waits

    def after(self, graph: Graph, task, it: int) -> None:
        c = graph.rank_class.index
        if isinstance(task, HostWork):
            self._apply(c, task.shard)
        elif isinstance(task, SendRecv) and task.src != task.dst:
            moved = task.size_bytes * self.sizes[c]
            if task.kind == "push":
                self.server_in_bytes[task.dst] = self.server_in_bytes.get(task.dst, 0.0) + moved
            else:
                self.server_out_bytes[task.src] = self.server_out_bytes.get(task.src, 0.0) + moved

    def _apply(self, c: int, key: tuple) -> None:
        """Apply the class's updates to a shard, recording each one's staleness (none for a first update):
        the updates applied since its read that were computed from another version."""
        applied = self.applied.setdefault(key, [0] * len(self.sizes))
        same = self.same_base.setdefault(key, {})
        before = min(applied)
        applied[c] += 1
        readable = self._readable(c, key)
        # under bound 0 a member may read only once its siblings' updates are in too (they land right after)
        at_once = readable and (self.bound is None or self.bound > 0 or self.sizes[c] == 1)
        for k in range(self.sizes[c]):
            version = self.bases.get(key, 0)
            base = self.read.get((c, k, key))
            if base is not None:  # every update computed from `base` came after version `base` existed
                self.staleness.append((version - base) - same.get(base, 0))
            b = 0 if base is None else base
            same[b] = same.get(b, 0) + 1
            self.bases[key] = version + 1
            if at_once:  # the read happens at once, before any other worker's update lands
                self.read[(c, k, key)] = version + 1
        if readable:
            if not at_once:
                for k in range(self.sizes[c]):
                    self.read[(c, k, key)] = self.bases[key]
            self.read_now[(c, key)] = True
        if min(applied) > before and key in self.changed:
            self.changed.pop(key).succeed()

    def _readable(self, c: int, key: tuple) -> bool:
        """ssp: c may read once every class's update of its iteration - bound is in (s = 0: all of them)."""
        if self.bound is None:
            return True
        return min(self.applied[key]) >= self.applied[key][c] - self.bound
