"""NCCL's all-to-all: every rank's n-1 sends and receives posted at once, as concurrent point-to-point flows.

NCCL has no all-to-all primitive: nccl-tests' alltoall (and torch.distributed.all_to_all_single) wrap one
ncclSend and one ncclRecv per peer in ncclGroupStart/ncclGroupEnd, and NCCL's p2p scheduler (enqueue.cc) puts
all of them in one kernel launch, spread over its p2p channels, so every peer's transfer is in flight at the same
time and the links share out the bytes (here: max-min on the flow network), instead of n-1 shift steps one after
another (ring.ring_chain's textbook pairwise exchange). `send_bytes[i][j]` is what rank i sends rank j, so an
uneven (MoE) dispatch is bound by its hottest GPU's links.

PXN (NCCL 2.12+, NCCL_PXN_DISABLE=0 and NCCL_P2P_PXN_LEVEL=2 by default; graph/paths.cc ncclTopoGetNetDev and
ncclTopoGetIntermediateRank): a send to a rank on another node leaves through the NIC local to the GPU with the
*destination's* device index on the sender's node, the rail of the destination, reached over NVLink; that GPU's
proxy posts it. So on NVLink nodes with several NICs an inter-node send goes sender -> rail GPU over NVLink, then
rail GPU -> destination over the NICs of that rail, both hops streaming at once (NCCL pipelines the relay in
chunks); a sender already on the destination's rail sends directly.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from simdist.collectives._steps import Chain
from simdist.collectives.schedule import Group, Schedule, Step, TransferArray

LABEL = "p2p all-to-all"


def balanced_send_bytes(size_bytes: float, n: int) -> np.ndarray:
    """The (n, n) send matrix of a balanced all-to-all of a per-rank buffer of `size_bytes` (nccl-tests:
    each peer gets size/n; nothing to itself on the wire)."""
    out = np.full((n, n), float(size_bytes) / n) if n else np.zeros((0, 0))
    np.fill_diagonal(out, 0.0)
    return out


def pxn_relays(group: Group) -> "dict[tuple[int, int], int] | None":
    """(sender, destination) -> the rank on the sender's node whose position in its node is the destination's
    position in its own (its device index, so its rail), for every pair on different nodes; None when the nodes
    hold different numbers of ranks (no common device index to route by)."""
    sizes = {len(node) for node in group.nodes}
    if len(group.nodes) <= 1 or len(sizes) != 1:
        return None
    where = {r: (k, i) for k, node in enumerate(group.nodes) for i, r in enumerate(node)}
    return {(s, d): group.nodes[where[s][0]][where[d][1]]
            for s in group.ranks for d in group.ranks if where[s][0] != where[d][0]}


def p2p_all_to_all_transfers(group: Group, matrix: np.ndarray, pxn: bool = False) -> "tuple[TransferArray, bool]":
    """The flows of an all-to-all whose rank group.ranks[i] sends matrix[i][j] to group.ranks[j] (nothing to
    itself), and whether any is relayed by PXN: direct sends first, then each relayed send's two hops (sender ->
    rail GPU, rail GPU -> destination) in the same pair order."""
    ranks = group.ranks
    n = len(ranks)
    if matrix.shape != (n, n) or (matrix < 0).any():
        raise ValueError(f"send_bytes must be a non-negative {n} x {n} matrix, got shape {matrix.shape}")
    src_i, dst_i = np.nonzero(matrix > 0)
    keep = src_i != dst_i
    src_i, dst_i = src_i[keep], dst_i[keep]
    rank_of = np.asarray(ranks, dtype=np.int64)
    src, dst, size = rank_of[src_i], rank_of[dst_i], matrix[src_i, dst_i]
    via = _relay_ranks(group, src_i, dst_i) if pxn and src_i.size else None
    if via is None or (via == src).all():
        return TransferArray(src, dst, size), via is not None
    direct = via == src
    relayed = ~direct
    return TransferArray(np.concatenate([src[direct], src[relayed], via[relayed]]),
                         np.concatenate([dst[direct], via[relayed], dst[relayed]]),
                         np.concatenate([size[direct], size[relayed], size[relayed]])), True


def p2p_all_to_all_chain(group: Group, size_bytes: float | None = None,
                         send_bytes: "Sequence[Sequence[float]] | np.ndarray | None" = None,
                         pxn: bool = False) -> Chain:
    """One step of independent flows: rank group.ranks[i] sends send_bytes[i][j] to group.ranks[j] (default: the
    balanced matrix of `size_bytes`); with `pxn`, an inter-node send relays through the sender's node GPU on the
    destination's rail (module docstring)."""
    n = len(group.ranks)
    if n <= 1:
        return ()
    matrix = balanced_send_bytes(size_bytes or 0.0, n) if send_bytes is None else np.asarray(send_bytes, float)
    transfers, relayed = p2p_all_to_all_transfers(group, matrix, pxn)
    if not len(transfers):
        return ()
    return (Step(transfers, lockstep=False, label=LABEL + (" (PXN)" if relayed else "")),)


def with_send_bytes(schedule: Schedule, group: Group, send_bytes: "np.ndarray") -> Schedule:
    """A balanced p2p all-to-all schedule (`schedule`, as the backend built it for `group`: its protocol's launch
    step, per-hop latencies and wire fraction) carrying the uneven matrix `send_bytes` instead: every all-to-all
    step's flows rebuilt from the matrix (PXN where the step relays), their bytes scaled by the step's wire bytes
    over its balanced payload (the protocol's fraction). The nominal size stays the balanced per-rank buffer."""
    matrix = np.asarray(send_bytes, float)
    balanced = balanced_send_bytes(schedule.size_bytes, len(group.ranks))
    chains = []
    for chain in schedule.chains:
        steps = []
        for step in chain:
            if not step.label.startswith(LABEL) or not len(step.transfers):
                steps.append(step)
                continue
            pxn = "PXN" in step.label
            wire = float(np.sum(np.asarray([t.size_bytes for t in step.transfers]))) if not isinstance(
                step.transfers, TransferArray) else float(step.transfers.size_bytes.sum())
            payload = float(p2p_all_to_all_transfers(group, balanced, pxn)[0].size_bytes.sum())
            transfers, _ = p2p_all_to_all_transfers(group, matrix, pxn)
            steps.append(replace(step, transfers=transfers.scaled(wire / payload if payload else 1.0)))
        chains.append(tuple(steps))
    return replace(schedule, chains=tuple(chains))


def _relay_ranks(group: Group, src_i: np.ndarray, dst_i: np.ndarray) -> "np.ndarray | None":
    """Per send (indices into group.ranks): the PXN relay rank of pxn_relays, the sender itself on its own node;
    None where the nodes hold different numbers of ranks."""
    sizes = {len(node) for node in group.nodes}
    if len(group.nodes) <= 1 or len(sizes) != 1:
        return None
    g = sizes.pop()
    node_ranks = np.asarray(group.nodes, dtype=np.int64).reshape(len(group.nodes), g)
    where = {r: i for i, r in enumerate(group.ranks)}
    node_of = np.empty(len(group.ranks), dtype=np.int64)
    pos_of = np.empty(len(group.ranks), dtype=np.int64)
    for k, node in enumerate(group.nodes):
        for p, r in enumerate(node):
            node_of[where[r]], pos_of[where[r]] = k, p
    rank_of = np.asarray(group.ranks, dtype=np.int64)
    return np.where(node_of[src_i] == node_of[dst_i], rank_of[src_i], node_ranks[node_of[src_i], pos_of[dst_i]])


def p2p_all_to_all_time_s(send_bytes: "np.ndarray", group: Group, gpu_Bps: float, nic_Bps: float,
                          latency_s: float, pxn: bool = False, nics: int | None = None) -> float:
    """The closed form of p2p_all_to_all_chain on an idle node-structured fabric (a switch inside each node, one
    link per GPU each way at `gpu_Bps`; `nics` NICs per node at `nic_Bps` each, GPU j of g on NIC floor(j nics/g),
    reached without the GPU's switch link; a non-blocking fabric between the nodes): latency + the most bytes
    through any GPU link or NIC, each way, over its rate. Balanced, max-min sharing keeps that resource busy to the
    end, so the flow network takes exactly this."""
    matrix = np.asarray(send_bytes, float)
    pos = {r: (k, i) for k, node in enumerate(group.nodes) for i, r in enumerate(node)}
    per_node = len(group.nodes[0])
    nics = nics or 1
    relays = pxn_relays(group) if pxn else None
    gpu_out: dict[int, float] = {}
    gpu_in: dict[int, float] = {}
    nic_out: dict[tuple[int, int], float] = {}
    nic_in: dict[tuple[int, int], float] = {}

    def add(table: dict, key, size: float) -> None:
        table[key] = table.get(key, 0.0) + size

    for i, src in enumerate(group.ranks):
        for j, dst in enumerate(group.ranks):
            size = float(matrix[i, j])
            if i == j or size <= 0:
                continue
            (ks, js), (kd, jd) = pos[src], pos[dst]
            if ks == kd:
                add(gpu_out, src, size)
                add(gpu_in, dst, size)
                continue
            via = relays[(src, dst)] if relays else src
            if via != src:
                add(gpu_out, src, size)
                add(gpu_in, via, size)
            add(nic_out, (ks, pos[via][1] * nics // per_node), size)
            add(nic_in, (kd, jd * nics // per_node), size)
    worst = max([b / gpu_Bps for b in (*gpu_out.values(), *gpu_in.values())]
                + [b / nic_Bps for b in (*nic_out.values(), *nic_in.values())], default=0.0)
    return latency_s + worst
