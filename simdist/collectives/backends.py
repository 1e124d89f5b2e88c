"""Which algorithm a communication library really runs, and its schedule.

textbook: exactly the algorithm the scenario asks for. gloo: rings for all-reduce, reduce-scatter
and all-gather, and its own reduce, broadcast and all-to-all (gloo.py); a hierarchical strategy on
gloo goes through reduce / leader all-reduce / broadcast. nccl: ring or tree for all-reduce by
NCCL's tuning model (nccl.py), ring for every other op. Strategy-level schemes the library does not
choose itself (hierarchical, torus2d, ps) pass through unchanged except hierarchical on gloo.
Backend names are the values of simdist.scenario.Backend ("textbook", "gloo", "nccl").
`channels` (concurrent rings, see ring.py) applies to textbook and nccl rings; gloo runs one ring.
"""
from __future__ import annotations

from typing import Sequence

from simdist.collectives.algorithms import build_schedule
from simdist.collectives.gloo import (
    gloo_all_to_all_chain,
    gloo_broadcast_chain,
    gloo_hierarchical_chain,
    gloo_reduce_chain,
)
from simdist.collectives.nccl import DEFAULT_BUS_BW_GBPS, nccl_choice
from simdist.collectives.schedule import CollectiveOp, Group, Schedule

Op = CollectiveOp
BACKENDS = ("textbook", "gloo", "nccl")
COMPOSITE = ("hierarchical", "torus2d", "ps")

GLOO_ALGORITHMS = {
    Op.ALL_REDUCE: "ring",
    Op.REDUCE_SCATTER: "ring",
    Op.ALL_GATHER: "ring",
    Op.REDUCE: "gloo_reduce",
    Op.BROADCAST: "gloo_broadcast",
    Op.ALL_TO_ALL: "gloo_all_to_all",
}
GLOO_CHAINS = {
    "gloo_reduce": gloo_reduce_chain,
    "gloo_broadcast": gloo_broadcast_chain,
    "gloo_all_to_all": gloo_all_to_all_chain,
}


def _check_backend(backend: str) -> str:
    backend = str(backend)
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {list(BACKENDS)}")
    return backend


def select_algorithm(
    backend: str, op: str, size_bytes: float, group: Group, *, requested: str = "ring",
    bus_bw_GBps: float = DEFAULT_BUS_BW_GBPS,
) -> str:
    """The algorithm `backend` runs for `op` of `size_bytes` over `group` when `requested` is asked for."""
    backend, op = _check_backend(backend), CollectiveOp(op)
    if backend == "textbook":
        return str(requested)
    if backend == "gloo":
        if requested == "hierarchical" and op == Op.ALL_REDUCE:
            return "gloo_hierarchical"
        if requested in COMPOSITE:
            return str(requested)
        return GLOO_ALGORITHMS[op]
    if requested in COMPOSITE:
        return str(requested)
    if op != Op.ALL_REDUCE:
        return "ring"
    return nccl_choice(op, size_bytes, group.size, max(1, len(group.nodes)), bus_bw_GBps)[0]


def build_backend_schedule(
    backend: str, op: str, size_bytes: float, group: Group, *, requested: str = "ring",
    intra: str = "ring", inter: str = "ring", servers: Sequence[int] = (), server_delay_s: float = 0.0,
    chunks: int | None = None, bus_bw_GBps: float = DEFAULT_BUS_BW_GBPS, channels: int | None = None,
) -> Schedule:
    """The schedule `backend` really runs (see select_algorithm), built for `group`."""
    op = CollectiveOp(op)
    alg = select_algorithm(backend, op, size_bytes, group, requested=requested, bus_bw_GBps=bus_bw_GBps)
    if alg in GLOO_CHAINS:
        return Schedule(op, alg, float(size_bytes), (GLOO_CHAINS[alg](size_bytes, group.ranks),))
    if alg == "gloo_hierarchical":
        return Schedule(op, alg, float(size_bytes), (gloo_hierarchical_chain(size_bytes, group),))
    return build_schedule(
        op, alg, size_bytes, group, intra=intra, inter=inter, servers=servers,
        server_delay_s=server_delay_s, chunks=chunks, channels=None if backend == "gloo" else channels,
    )
