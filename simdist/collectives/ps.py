"""Parameter-server all-reduce: the tensor is sharded evenly over the servers; every worker pushes
its shard to each server (independent flows), the server updates, every worker pulls it back.

Servers are endpoint ids: one inside the group is colocated with that worker (its own shard never
touches the wire); one outside the group is a dedicated server host (ids after the GPUs). One chain
per server, so servers run independently: push (lockstep=False, then the server's `delay_s`),
then pull (lockstep=False).
"""
from __future__ import annotations

from typing import Sequence

from simdist.collectives.schedule import Group, Step, Transfer


def ps_chains(
    size_bytes: float, group: Group, servers: Sequence[int], delay_s: float = 0.0
) -> tuple[tuple[Step, ...], ...]:
    """One (push, pull) chain per server for an all-reduce of `size_bytes` per worker."""
    servers = tuple(servers)
    if not servers:
        raise ValueError("ps needs at least one server endpoint (servers=(...))")
    if len(set(servers)) != len(servers):
        raise ValueError(f"ps servers must be distinct, got {servers}")
    if any(int(s) != s or s < 0 for s in servers):
        raise ValueError(f"ps servers must be non-negative endpoint ids, got {servers}")
    if delay_s < 0:
        raise ValueError(f"server_delay_s must be >= 0, got {delay_s}")
    shard = size_bytes / len(servers)
    chains = []
    for sv in servers:
        workers = tuple(w for w in group.ranks if w != sv)
        steps = []
        if workers:
            steps.append(
                Step(
                    tuple(Transfer(w, sv, shard) for w in workers),
                    lockstep=False,
                    delay_s=delay_s,
                    reduce_bytes=shard * len(workers),
                    label=f"push to server {sv}",
                )
            )
            steps.append(Step(tuple(Transfer(sv, w, shard) for w in workers), lockstep=False, label=f"pull from server {sv}"))
        elif delay_s > 0:
            steps.append(Step((), lockstep=False, delay_s=delay_s, label=f"server {sv} update"))
        chains.append(tuple(steps))
    return tuple(chains)
