"""Communication microbenchmarks run inside a worker: flat collectives, hierarchical all_reduce, parameter server.

Buffers are fp32; a size is the per-rank buffer in bytes (reduce_scatter: the input, all_gather: the
output), rounded so that it splits evenly over the ranks involved.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist

from simdist.validation.cases import Case, CaseKind
from simdist.validation.timing import summarize, timed_max


# torch 2.13 renamed the tensor variants; keep working on older releases too.
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def _numel(size_bytes: float, multiple: int) -> int:
    n = max(multiple, int(size_bytes // 4))
    return n - n % multiple


class Groups:
    """Process groups for the hierarchical scheme: consecutive blocks of `local` ranks, and their columns."""

    def __init__(self, local: int) -> None:
        world, rank = dist.get_world_size(), dist.get_rank()
        if local < 1 or world % local:
            raise ValueError(f"local_size {local} must divide the world size {world}")
        self.local = local
        self.intra = self.inter = None
        for b in range(world // local):  # every rank creates every group, in the same order
            g = dist.new_group(list(range(b * local, (b + 1) * local)))
            if rank // local == b:
                self.intra = g
        for j in range(local):
            g = dist.new_group(list(range(j, world, local)))
            if rank % local == j:
                self.inter = g


def _collective_op(case: Case, size_bytes: float, device: str, groups: Groups | None) -> Callable[[], object]:
    world = dist.get_world_size()
    if case.kind is CaseKind.ALL_REDUCE:
        buf = torch.ones(_numel(size_bytes, world), device=device)
        return lambda: dist.all_reduce(buf)
    if case.kind is CaseKind.REDUCE_SCATTER:
        inp = torch.ones(_numel(size_bytes, world), device=device)
        out = torch.empty(inp.numel() // world, device=device)
        return lambda: _reduce_scatter(out, inp)
    if case.kind is CaseKind.ALL_GATHER:
        out = torch.empty(_numel(size_bytes, world), device=device)
        inp = torch.ones(out.numel() // world, device=device)
        return lambda: _all_gather(out, inp)
    assert case.kind is CaseKind.HIERARCHICAL and groups is not None
    local = groups.local
    buf = torch.ones(_numel(size_bytes, local), device=device)
    if case.scheme == "leader":  # gloo-style: reduce to the group's first rank, leaders all_reduce, broadcast
        rank = dist.get_rank()
        leader = rank - rank % local

        def hier_leader() -> None:
            dist.reduce(buf, dst=leader, group=groups.intra)
            if rank == leader:
                dist.all_reduce(buf, group=groups.inter)
            dist.broadcast(buf, src=leader, group=groups.intra)

        return hier_leader
    part = torch.empty(buf.numel() // local, device=device)

    def hier() -> None:
        _reduce_scatter(part, buf, group=groups.intra)
        dist.all_reduce(part, group=groups.inter)
        _all_gather(buf, part, group=groups.intra)

    return hier


def ps_roles(case: Case, world: int) -> tuple[list[int], list[int]]:
    """(servers, workers): servers are ranks 0..S-1; colocated servers are also workers."""
    servers = list(range(case.servers))
    workers = list(range(world)) if case.placement == "colocated" else list(range(case.servers, world))
    if not workers or case.servers > world:
        raise ValueError(f"ps with {case.servers} {case.placement} servers needs more than {world} ranks")
    return servers, workers


def _ps_op(case: Case, size_bytes: float, device: str) -> Callable[[], object]:
    """Push: each worker sends shard s to server s; server s sums. Pull: server s sends shard s back."""
    world, rank = dist.get_world_size(), dist.get_rank()
    servers, workers = ps_roles(case, world)
    n = _numel(size_bytes, len(servers))
    shard = n // len(servers)
    grad = torch.ones(n, device=device)
    shards = list(grad.split(shard))
    is_server, is_worker = rank in servers, rank in workers
    peers = [w for w in workers if w != rank]
    inbox = [torch.empty(shard, device=device) for _ in peers] if is_server else []

    def step() -> None:
        reqs = []
        if is_server:
            reqs += [dist.irecv(buf, src=w) for buf, w in zip(inbox, peers)]
        if is_worker:
            reqs += [dist.isend(shards[s], dst=s) for s in servers if s != rank]
        for r in reqs:
            r.wait()
        if is_server:
            acc = shards[rank] if is_worker else torch.zeros(shard, device=device)
            for buf in inbox:
                acc.add_(buf)
        reqs = []  # receives first, in both phases: gloo sends posted before the peer's receive cost up to
        if is_worker:  # 1.9x on this exchange (docs/validation.md, "library facts")
            reqs += [dist.irecv(shards[s], src=s) for s in servers if s != rank]
        if is_server:
            reqs += [dist.isend(shards[rank] if is_worker else acc, dst=w) for w in peers]
        for r in reqs:
            r.wait()

    return step


def run_comm_case(case: Case, device: str, sync: Callable[[], None]) -> dict[str, object]:
    """Every size of `case`, timed; returns {case, points: [{size_bytes, wire figures, times...}]}."""
    groups = None
    if case.kind is CaseKind.HIERARCHICAL:
        import os
        groups = Groups(case.local_size or int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    points = []
    for size in case.sizes_bytes:
        op = _ps_op(case, size, device) if case.kind is CaseKind.PS else _collective_op(case, size, device, groups)
        times = timed_max(op, case.warmup, case.reps, sync)
        points.append({"size_bytes": float(size), **summarize(times)})
    return {"case": case.to_dict(), "label": case.label, "points": points}
