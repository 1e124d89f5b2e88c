"""Which algorithm a communication library really runs, and its schedule.

textbook: exactly the algorithm the scenario asks for. gloo: rings for all-reduce, reduce-scatter
and all-gather, and its own reduce, broadcast and all-to-all (gloo.py); a hierarchical strategy on
gloo goes through reduce / leader all-reduce / broadcast. nccl: the (algorithm, protocol) NCCL's tuner
would pick among those it enables on the hardware (nccl.py): ring with LL / LL128 / Simple for every
op, the node-level double binary tree (node_tree.py; on one node a chain) for all-reduce, NVLS on a
third-generation NVSwitch and NVLSTree across such nodes (nvls.py, communication.nvls), CollNet Direct / Chain
over SHARP switches and NVLS across nodes over them (collnet.py, communication.collnet); each schedule carries its protocol's costs (protocols.py). Strategy-level schemes the library does not
choose itself (hierarchical, torus2d, ps) pass through unchanged except hierarchical on gloo.
Backend names are the values of simdist.scenario.Backend ("textbook", "gloo", "nccl").
`channels` (concurrent rings, see ring.py) applies to textbook and nccl rings; gloo runs one ring.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from simdist.collectives._steps import default_chunks
from simdist.collectives.algorithms import build_schedule
from simdist.collectives.all_to_all import p2p_all_to_all_chain
from simdist.collectives.collnet import collnet_chain_all_reduce, collnet_direct_all_reduce
from simdist.collectives.fabric import NodeFabric
from simdist.collectives.gloo import (
    gloo_all_to_all_chain,
    gloo_broadcast_chain,
    gloo_hierarchical_chain,
    gloo_reduce_chain,
)
from simdist.collectives.nccl import candidates, nccl_predicted_time_s, no_candidate_text, socket_streams
from simdist.collectives.nccl_env import NcclEnable
from simdist.collectives.node_tree import node_tree_all_reduce, tree_pairs
from simdist.collectives.nvls import nvls_all_reduce, nvls_collnet_all_reduce, nvls_tree_all_reduce
from simdist.collectives.protocols import (STEP_DATA_BYTES, HopKind, Protocol, apply_protocol, costs, nvls_family,
                                           tree_algbw_cap_Bps, tree_chunk_bytes)
from simdist.collectives.schedule import CollectiveOp, Group, Schedule
from simdist.errors import InfeasibleError

Op = CollectiveOp
BACKENDS = ("textbook", "gloo", "nccl")
COMPOSITE = ("hierarchical", "torus2d", "torus3d", "ps")

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


Timer = Callable[[Schedule], float]


def select_algorithm(
    backend: str, op: str, size_bytes: float, group: Group, *, requested: str = "ring",
    fabric: NodeFabric | None = None, timer: Timer | None = None, channels: int | None = None,
    enable: NcclEnable | None = None,
) -> str:
    """The algorithm `backend` runs for `op` of `size_bytes` over `group` when `requested` is asked for
    (for nccl "algorithm/protocol", e.g. "tree/LL128")."""
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
    return nccl_schedule(op, size_bytes, group, fabric=fabric, timer=timer, channels=channels,
                         enable=enable).algorithm


def nccl_candidate(
    op: str, algorithm: str, protocol: str, size_bytes: float, group: Group, *,
    fabric: NodeFabric | None = None, channels: int | None = None,
    node_orders: Sequence[tuple[int, ...]] | None = None, timer: Timer | None = None,
) -> Schedule:
    """The schedule of one (algorithm, protocol) NCCL can run: ring (channels as given; all-to-all: every peer's
    send at once, all_to_all.py), the
    node-level double binary tree (one channel pair per NIC), NVLS (over CollNet across nodes), NVLSTree or
    CollNet (Direct: a head per GPU; Chain: one chain per NIC), under the protocol's costs.
    With a `timer`, a multi-node tree's steady step is held to NCCL's per-channel tree throughput
    (protocols.tree_algbw_cap_Bps) where the links alone would let it run faster."""
    fabric = fabric or NodeFabric()
    op = CollectiveOp(op)
    proto = Protocol(protocol)
    family = algorithm  # whose protocol costs apply (protocols.COSTS)
    if algorithm == "tree":
        pairs = tree_pairs(group, max(1, channels or 1))
        share = size_bytes / (2 * pairs)
        chunk = tree_chunk_bytes(proto, share)
        chain = node_tree_all_reduce(size_bytes, group, pairs, chunk,
                                     node_orders=node_orders if len(group.nodes) > 1 else None)
        base = Schedule(op, "tree", float(size_bytes), (chain,))
    elif algorithm == "nvls" and len(group.nodes) > 1:  # NVLS across nodes: over CollNet (SHARP switches)
        nvls_share = costs(nvls_family(fabric.arch_index), protocol).fraction(1)
        chain = nvls_collnet_all_reduce(size_bytes, group, fabric.nics, nvls_share)
        base = Schedule(op, "nvls", float(size_bytes), (chain,))
        family = "nvls_net"  # NVLS's fraction is in the schedule's switch transfers, not on the NICs'
    elif algorithm == "nvls":
        base = Schedule(op, "nvls", float(size_bytes), (nvls_all_reduce(size_bytes, group.ranks),))
        family = nvls_family(fabric.arch_index)  # nvlsEfficiency: Hopper 0.85, Blackwell 0.74
    elif algorithm == "nvls_tree":
        nvls_share = costs(nvls_family(fabric.arch_index), protocol).fraction(1)
        chain = nvls_tree_all_reduce(size_bytes, group, fabric.nics, nvls_share)
        base = Schedule(op, algorithm, float(size_bytes), (chain,))
    elif algorithm == "collnet_direct":
        base = Schedule(op, algorithm, float(size_bytes), (collnet_direct_all_reduce(size_bytes, group, fabric.intra),))
    elif op == Op.ALL_TO_ALL:  # grouped ncclSend/ncclRecv, all peers at once; PXN on NVLink nodes with several NICs
        pxn = fabric.intra == HopKind.NVLINK and fabric.nics > 1 and len(group.nodes) > 1
        base = Schedule(op, "p2p", float(size_bytes), (p2p_all_to_all_chain(group, size_bytes, pxn=pxn),))
        family = "ring"  # NCCL's p2p runs Simple with the ring's per-hop latencies (tuning.cc has no p2p row)
    elif algorithm == "collnet_chain":
        base = Schedule(op, algorithm, float(size_bytes),
                        (collnet_chain_all_reduce(size_bytes, group, fabric.nics, fabric.intra, node_orders=node_orders),))
    else:
        base = build_schedule(op, "ring", size_bytes, group, channels=channels, node_orders=node_orders,
                              chunks=default_chunks(size_bytes, STEP_DATA_BYTES[proto]))
    sched = apply_protocol(base, proto, group, family=family, intra=fabric.intra,
                           nccl_hops=fabric.kernel_bypass).with_streams(*socket_streams(fabric.socket_threads))
    if algorithm == "tree" and timer is not None and len(group.nodes) > 1:
        sched = _tree_channel_limit(sched, fabric, len(group.nodes), timer)
    return sched


def _tree_channel_limit(sched: Schedule, fabric: NodeFabric, n_nodes: int, timer: Timer) -> Schedule:
    """Hold the tree's steady step (its last) to at least size / NCCL's per-channel tree algbw: the step
    waits (delay) for what its thread blocks cannot move faster. Alone on the fabric the step then lasts
    max(link time, channel time); under contention the two add (a slight overestimate)."""
    cap = tree_algbw_cap_Bps(sched.protocol, fabric.arch_index, fabric.nics, n_nodes)
    if cap is None or not sched.chains or not sched.chains[0]:
        return sched
    chain = sched.chains[0]
    steady = chain[-1]
    t_links = timer(Schedule(sched.op, sched.algorithm, sched.size_bytes, ((replace(steady, delay_s=0.0),),),
                             protocol=sched.protocol))
    wait = sched.size_bytes / cap - t_links
    if wait <= 0:
        return sched
    limited = replace(steady, delay_s=steady.delay_s + wait, label=f"{steady.label} (per-channel limit)")
    return replace(sched, chains=(chain[:-1] + (limited,),) + sched.chains[1:])


def nccl_schedule(
    op: str, size_bytes: float, group: Group, *, fabric: NodeFabric | None = None, timer: Timer | None = None,
    channels: int | None = None, node_orders: Sequence[tuple[int, ...]] | None = None,
    enable: NcclEnable | None = None,
) -> Schedule:
    """What NCCL runs: of its candidates on this hardware that NCCL_ALGO / NCCL_PROTO leave (`enable`,
    nccl.candidates), the one with the least predicted time by `timer` (simdist's own model of the schedule on the
    cluster) or, without one, by NCCL's closed form on `fabric`; InfeasibleError where none is left."""
    fabric = fabric or NodeFabric()
    op = CollectiveOp(op)
    n_nodes = max(1, len(group.nodes))
    best: tuple[float, Schedule] | None = None
    uneven = len({len(node) for node in group.nodes}) != 1 or min(len(node) for node in group.nodes) < 2
    for alg, proto in candidates(op, group.size, n_nodes, fabric, enable):
        pairs_heads = alg == "nvls_tree" or alg.startswith("collnet") or (alg == "nvls" and n_nodes > 1)
        if uneven and pairs_heads:  # these pair every node's heads: NCCL runs them on equal nodes only
            continue
        sched = nccl_candidate(op, alg, proto, size_bytes, group, fabric=fabric, channels=channels,
                               node_orders=node_orders, timer=timer)
        if timer is not None:
            t = timer(sched)
        else:
            t = nccl_predicted_time_s(op, alg, proto, size_bytes, group.size, n_nodes, fabric, enable)
        if best is None or t < best[0]:
            best = (t, sched)
    if best is None:
        raise InfeasibleError(no_candidate_text(str(op), enable))
    return best[1]


def build_backend_schedule(
    backend: str, op: str, size_bytes: float, group: Group, *, requested: str = "ring",
    intra: str = "ring", inter: str = "ring", servers: Sequence[int] = (), server_delay_s: float = 0.0,
    chunks: int | None = None, channels: int | None = None,
    fabric: NodeFabric | None = None, timer: Timer | None = None,
    node_orders: Sequence[tuple[int, ...]] | None = None, enable: NcclEnable | None = None,
) -> Schedule:
    """The schedule `backend` really runs (see select_algorithm), built for `group`. For nccl,
    `fabric` (fabric.from_topology) says what the hardware enables, `enable` what NCCL_ALGO / NCCL_PROTO
    leave (communication.nccl_algo / nccl_proto) and `timer` ranks the candidates.
    `node_orders` (node_rings.py) are the rings found in the node's graph; textbook and nccl rings
    run over them (gloo runs one ring in rank order)."""
    op = CollectiveOp(op)
    backend = _check_backend(backend)
    if backend == "nccl" and requested not in COMPOSITE:
        return nccl_schedule(op, size_bytes, group, fabric=fabric, timer=timer, channels=channels,
                             node_orders=node_orders, enable=enable)
    alg = select_algorithm(backend, op, size_bytes, group, requested=requested)
    if alg in GLOO_CHAINS:
        return Schedule(op, alg, float(size_bytes), (GLOO_CHAINS[alg](size_bytes, group.ranks),))
    if alg == "gloo_hierarchical":
        return Schedule(op, alg, float(size_bytes), (gloo_hierarchical_chain(size_bytes, group),))
    sched = build_schedule(
        op, alg, size_bytes, group, intra=intra, inter=inter, servers=servers,
        server_delay_s=server_delay_s, chunks=chunks, channels=None if backend == "gloo" else channels,
        node_orders=None if backend == "gloo" else node_orders,
    )
    # NCCL's rings inside a composite (hierarchical, torus2d) are its channels; a PS's are the framework's own
    if backend != "nccl" or alg == "ps":
        return sched
    return sched.with_streams(*socket_streams(fabric.socket_threads if fabric is not None else None))
