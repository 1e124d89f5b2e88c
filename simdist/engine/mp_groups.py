"""Process groups and schedules of a dp x tp x cp x pp layout on the real topology endpoints (stage_groups).

Every tp (or dp) group of a stage runs the same collective at the same moment on the real cluster, so a
collective of the stage class on `tp.s<k>` (`dp.s<k>`) is the union of every such group's schedule: their
chains run concurrently and share whatever links they share. A pipeline transfer on `pp<a>><b>` is every
(dp, tp) pair's copy from stage a to stage b at once; a tp exchange step on `tp.s<k>.x` (tp_comm_overlap) is
every tp rank of the stage copying its piece to its ring successor at once (cp's K/V on `tp.s<k>.cpx` likewise).
One group's schedule is built (by the scenario's backend: NCCL's tuner, textbook or gloo) and moved onto the
others by the endpoint correspondence, which is exact on a symmetric cluster (congruent groups).
"""
from __future__ import annotations

from dataclasses import replace

from simdist.collectives.algorithms import supports
from simdist.collectives.backends import build_backend_schedule
from simdist.collectives.fabric import from_topology
from simdist.collectives.node_rings import group_node_orders
from simdist.collectives.schedule import Group, Schedule, Step, Transfer
from simdist.graph.tasks import ProcessGroup
from simdist.layout import Layout
from simdist.network.congruence import GroupClasses
from simdist.network.lockstep import lockstep_unions
from simdist.strategies.expert_layout import EP_KINDS, busy_link_time_s, stage_expert_groups, uneven_all_to_all
from simdist.strategies.pipeline_graph import (RING_EXCHANGE, boundary_pairs, pp_group, stage_groups,
                                               tp_exchange_group, tp_group)
from simdist.topology.routing import ring_channels

MAX_CACHED = 4096


def endpoint_group(topology, ranks) -> Group:
    """`ranks` (GPU = endpoint numbering) in order, split by node."""
    by_node: dict[int, list[int]] = {}
    for r in ranks:
        by_node.setdefault(topology.endpoint_node[r], []).append(r)
    return Group(tuple(ranks), tuple(tuple(v) for v in by_node.values()))


def _moved(schedule: Schedule, mapping: dict[int, int]) -> tuple:
    return tuple(tuple(replace(s, transfers=tuple(Transfer(mapping[t.src], mapping[t.dst], t.size_bytes)
                                                  for t in s.transfers)) for s in chain)
                 for chain in schedule.chains)


def group_schedule(ctx, group: Group, op, size_bytes: float, kind: str) -> Schedule:
    """One group's schedule by the scenario's backend (tp groups run rings: the strategy is dp's)."""
    comm = ctx.scenario.communication
    want = comm.strategy.value if kind == "dp" else "ring"
    requested = want if supports(op, want, group.size) else "ring"
    channels = ring_channels(ctx.topology, group.nodes)
    extra = ctx.nccl_tuning(from_topology(ctx.topology, group, collnet=comm.collnet, nvls_enabled=comm.nvls)) \
        if comm.backend.value == "nccl" else {}
    return build_backend_schedule(comm.backend.value, op, size_bytes, group, requested=requested,
                                  intra=comm.hierarchical_intra.value, inter=comm.hierarchical_inter.value,
                                  channels=channels, node_orders=group_node_orders(ctx.topology, group, channels),
                                  **extra)


class LayoutGroups:
    """The layout's groups by stage on one FabricContext, and the memoised union schedules of their calls."""

    def __init__(self, ctx, layout: Layout, plan) -> None:
        self.ctx, self.layout, self.plan = ctx, layout, plan
        self.axis_groups: dict[str, list[Group]] = {}
        self.groups: dict[str, ProcessGroup] = {}
        topo = ctx.topology
        pp_groups = layout.pp_groups()
        stage_ranks = [sorted(g[s] for g in pp_groups) for s in range(layout.pp)]
        for s in range(layout.pp):
            mine = set(stage_ranks[s])
            for axes, name, kind in stage_groups(s, layout.cp):
                subs = [endpoint_group(topo, g) for g in layout.joint_groups(axes) if g[0] in mine]
                self.axis_groups[name] = subs
                self.groups[name] = ProcessGroup(name, kind, tuple(stage_ranks[s]),
                                                 endpoint_group(topo, stage_ranks[s]))
            for name, kind, groups in (stage_expert_groups(layout, s, stage_ranks[s], plan.ep, plan.etp,
                                                           plan.expert_groups)
                                       if plan.moe_load is not None else ()):  # expert parallelism's groups
                self.axis_groups[name] = [endpoint_group(topo, g) for g in groups]
                self.groups[name] = ProcessGroup(name, kind, tuple(stage_ranks[s]),
                                                 endpoint_group(topo, stage_ranks[s]))
            if layout.tp > 1:  # always (the context caches a fabric per layout): used by tp_comm_overlap
                name = tp_exchange_group(s)
                self.axis_groups[name] = self.axis_groups[tp_group(s)]
                self.groups[name] = ProcessGroup(name, RING_EXCHANGE, tuple(stage_ranks[s]),
                                                 endpoint_group(topo, stage_ranks[s]))
        for a, b in boundary_pairs(plan) if layout.pp > 1 else ():
            name = pp_group(a, b)
            ranks = tuple(sorted(stage_ranks[a] + stage_ranks[b]))
            self.groups[name] = ProcessGroup(name, "pp", ranks, endpoint_group(topo, ranks))
            self.axis_groups[name] = [Group((g[a], g[b]), ((g[a],), (g[b],))) for g in pp_groups]
        self._cache: dict = {}
        self._classes: GroupClasses | None = None  # congruent names share a time (network/congruence.py)

    def schedule_of(self, task, graph) -> Schedule:
        key = (task.group, task.op, task.size_bytes)
        hit = self._cache.get(key)
        if hit is None:
            if len(self._cache) >= MAX_CACHED:
                self._cache.clear()
            hit = self._cache[key] = self._build(task.group, task.op, task.size_bytes)
        return hit

    def _build(self, name: str, op, size_bytes: float) -> Schedule:
        subs = self.axis_groups[name]
        if self.groups[name].kind == RING_EXCHANGE:  # every rank copies size_bytes to its ring successor
            chains = tuple((Step(tuple(Transfer(r, g.ranks[(k + 1) % g.size], float(size_bytes))
                                       for k, r in enumerate(g.ranks)), label="tp exchange"),) for g in subs)
            return Schedule(op, "ring exchange", float(size_bytes), chains)
        if self.groups[name].kind == "pp":
            chains = tuple((Step((Transfer(g.ranks[0], g.ranks[1], float(size_bytes)),), label="p2p"),)
                           for g in subs if g.ranks[0] != g.ranks[1])
            return Schedule(op, "p2p", float(size_bytes), chains)
        first = group_schedule(self.ctx, subs[0], op, size_bytes, self.groups[name].kind)
        if self.groups[name].kind in EP_KINDS:  # the dispatcher's all-to-all with the expert load's matrix
            first = uneven_all_to_all(first, subs[0], self.groups[name].kind, self.plan.moe_load)
        chains = list(first.chains)
        for g in subs[1:]:
            chains += _moved(first, dict(zip(subs[0].ranks, g.ranks)))
        return replace(first, chains=tuple(chains))

    def merge_lockstep(self, calls) -> None:
        """The union schedules of `calls` (every collective of a simulated run) with their copies that move in
        lockstep merged, one chain per orbit (network/lockstep.py): the same times, a fraction of the events."""
        for task in calls:
            self.schedule_of(task, None)
        self._cache.update(lockstep_unions(self.ctx.network, self._cache, self.axis_groups))

    def time_of(self, task, graph) -> float:
        """The call alone on the idle fabric (closed form on the context's analytical network), once per class."""
        named = ("n", task.group, task.op, task.size_bytes)
        if named in self._cache:
            return self._cache[named]
        net = self.ctx.network if hasattr(self.ctx.network, "steps") else self.ctx.analytical()
        self._classes = self._classes or GroupClasses(self.ctx.scenario, self.ctx.topology, net)
        name = task.group
        key = ("t", self._classes.of(name, self.groups[name].kind, self.axis_groups[name]), task.op, task.size_bytes)
        hit = self._cache.get(key)
        if hit is None:
            sched = self.schedule_of(task, graph)  # an expert all-to-all by its busiest link (max-min's time)
            hit = busy_link_time_s(net, sched) if self.groups[task.group].kind in EP_KINDS else net.schedule_time(sched)
            self._cache[key] = hit
        self._cache[named] = hit
        return hit
