"""NCCL's algorithm and protocol choice, after its tuning model (NVIDIA/nccl src/graph/tuning.cc:
ncclTopoTuneModel, ncclTopoGetAlgoTime).

NCCL predicts, for every (algorithm, protocol) it enables on the hardware, time = latency + size /
algbw and runs the fastest. simdist does the same over the same candidates (`candidates`: ring and,
for all-reduce, the double binary tree (on one node a chain), each with LL, Simple and, where NCCL enables it,
LL128; NVLS where the node has a third-generation NVSwitch, NVLSTree (NVLS inside each node, a tree over the
nodes) for multi-node all-reduce on such nodes, and NVLS across such nodes where CollNet runs; CollNet Direct or
Chain for multi-node
all-reduce where CollNet is enabled over SHARP switches, collnet.py), but ranks them by its OWN prediction of
each candidate's schedule on the cluster (the `timer` the engine passes), so `backend: nccl` never
runs something simdist predicts slower. Without a timer it ranks them by `nccl_predicted_time_s`,
NCCL's closed form fed with the group's real bandwidths (fabric.NodeFabric) instead of constants.
"""
from __future__ import annotations

import math
from dataclasses import replace

from simdist.collectives.collnet import collnet_latency_s
from simdist.collectives.fabric import NodeFabric
from simdist.collectives.nccl_env import NcclEnable
from simdist.collectives.protocols import (COSTS, NET_OVERHEAD_S, HopKind, Protocol, costs, nvls_family,
                                          tree_algbw_cap_Bps)
from simdist.collectives.schedule import CollectiveOp
from simdist.errors import InfeasibleError

Op = CollectiveOp
PROTOCOLS = tuple(str(p) for p in Protocol)
# NCCL's socket transport (transport/net_socket.cc, ncclNetSocketGetNsockNthread): NCCL_SOCKET_NTHREADS helper
# threads per connection, each with NCCL_NSOCKS_PERTHREAD sockets, auto-detected as 2 x 8 on AWS NICs (PCI vendor
# 0x1d0f) and 4 x 1 on GCP's (0x1ae0) and 0 elsewhere: with none, "we only use the main thread" and a request is
# "progressed using main thread", i.e. the rank's one proxy thread copies every byte the rank sends and receives
# over sockets, for all of its channels (NCCL runs each searched channel twice, graph/connect.cc). So by default a
# rank's socket transfers share one TCP stream's worth of CPU (Step.shared_thread); with helper threads each
# connection has its own `threads` streams.
SOCKET_MAIN_THREAD = 0


def socket_streams(threads: int | None) -> tuple[int, bool]:
    """(Step.streams, Step.shared_thread) of NCCL's socket connections with `threads` helper threads per connection
    (NCCL_SOCKET_NTHREADS; None: NCCL's auto-detection on a NIC of neither cloud, 0)."""
    threads = SOCKET_MAIN_THREAD if threads is None else threads
    return (1, True) if threads == 0 else (threads, False)


def _steps(op: CollectiveOp, n: int) -> int:
    if op == Op.ALL_REDUCE:
        return 2 * (n - 1)
    if op in (Op.REDUCE_SCATTER, Op.ALL_GATHER):
        return n - 1
    return n


def candidates(op: str, n_ranks: int, n_nodes: int, fabric: NodeFabric,
               enable: NcclEnable | None = None) -> list[tuple[str, str]]:
    """(algorithm, protocol) pairs NCCL would consider for `op` on this hardware, in a fixed order, of those
    NCCL_ALGO / NCCL_PROTO (`enable`, nccl_env.py) leave it."""
    op = CollectiveOp(op)
    if op == Op.ALL_TO_ALL:  # point-to-point: not tuned, NCCL_ALGO / NCCL_PROTO do not apply
        return [("ring", str(Protocol.SIMPLE))]
    forced = enable.protocols(op) if enable is not None else None
    if forced is not None:  # a protocol the user names runs even where NCCL leaves it off by default
        protos = [p for p in Protocol if str(p) in forced]
        return [c for c in _hardware_candidates(op, n_ranks, n_nodes, fabric, protos)
                if enable.allows(op, c[0], c[1])]
    protos = [Protocol.LL] + ([Protocol.LL128] if fabric.ll128 else []) + [Protocol.SIMPLE]
    if fabric.simple_only:  # the net plugin set NCCL_PROTO=simple (fabric.SIMPLE_ONLY_NICS)
        protos = [Protocol.SIMPLE]
    out = _hardware_candidates(op, n_ranks, n_nodes, fabric, protos)
    return out if enable is None else [c for c in out if enable.allows(op, c[0], c[1])]


def _hardware_candidates(op: CollectiveOp, n_ranks: int, n_nodes: int, fabric: NodeFabric,
                         protos: list[Protocol]) -> list[tuple[str, str]]:
    """Every (algorithm, protocol) the hardware enables for `op` with protocols `protos` (ring and tree run any;
    the in-switch algorithms Simple only)."""
    if Protocol.SIMPLE not in protos:  # NVLS, NVLSTree and CollNet run Simple only
        fabric = replace(fabric, nvls=False, collnet=None)
    out = [("ring", str(p)) for p in protos]
    if op == Op.ALL_REDUCE and n_ranks > 1:  # on one node NCCL's tree is a chain through the node's GPUs
        # RCCL on gfx94 (MI300X/MI325X) skips tree/Simple when every rank is on one node (fabric.RCCL_GFX94_LINKS)
        skip = Protocol.SIMPLE if fabric.rccl_gfx94 and n_nodes == 1 else None
        out += [("tree", str(p)) for p in protos if p != skip]
    even = n_ranks % n_nodes == 0 and n_ranks > n_nodes  # several GPUs on every node (the caller checks evenness)
    if op == Op.ALL_REDUCE and n_nodes == 1 and fabric.nvls and n_ranks > 2:
        out.append(("nvls", str(Protocol.SIMPLE)))
    if op == Op.ALL_REDUCE and n_nodes > 1 and fabric.nvls and even:
        out.append(("nvls_tree", str(Protocol.SIMPLE)))
        if fabric.collnet is not None:  # NVLS across nodes runs over CollNet (tuning.cc: disabled without it)
            out.append(("nvls", str(Protocol.SIMPLE)))
    if op == Op.ALL_REDUCE and n_nodes > 1 and fabric.collnet is not None and n_ranks % n_nodes == 0:
        out.append((f"collnet_{fabric.collnet}", str(Protocol.SIMPLE)))
    return out


def nccl_predicted_time_s(
    op: str, algorithm: str, protocol: str, size_bytes: float, n_ranks: int, n_nodes: int,
    fabric: NodeFabric | None = None, enable: NcclEnable | None = None,
) -> float | None:
    """NCCL's closed-form time for one (algorithm, protocol) on `fabric`, or None where it has none.
    Bus bandwidth: the GPU's intra-node bandwidth on one node, else min(that, the node's NICs) (one
    channel per NIC, each ring crossing every node boundary once); protocol fractions and latencies
    as protocols.COSTS (tuning.cc). On up to 2 nodes the tree's bandwidth is the intra-node one (tuning.cc
    uses bwIntra there: each NIC carries S per direction, not the ring's 2(n-1)/n S), held to NCCL's
    per-channel tree limit (protocols.tree_algbw_cap_Bps). CollNet: tuning.cc's bwIntra x 0.5 (Direct: over its
    GPU-per-NIC factor, x 0.85 on Hopper), held to the node's NIC rate, plus collnet.collnet_latency_s.
    NVLSTree: min(NVLS's doubled intra-node bandwidth, the NICs' rate, doubled on two nodes), latency the NVLS hop
    plus 2 log2(nodes) network hops (NCCL's per-channel NVLSTree cap is not applied). NVLS on several nodes (over
    CollNet): min(NVLS's doubled intra-node bandwidth, the NICs' rate), latency the NVLS and network hops.
    NCCL's other empirical factors are not applied."""
    op = CollectiveOp(op)
    fabric = fabric or NodeFabric()
    if (algorithm, protocol) not in candidates(op, n_ranks, n_nodes, fabric, enable):
        return None
    if n_ranks <= 1:
        return 0.0
    c = costs(nvls_family(fabric.arch_index) if algorithm == "nvls" else algorithm, protocol)
    bus = fabric.intra_Bps if n_nodes <= 1 else min(fabric.intra_Bps, fabric.nic_Bps)
    bus *= c.fraction(n_nodes)
    nsteps = _steps(op, n_ranks)
    intra_lat = c.hop_latency_s[fabric.intra]
    inter_lat = c.hop_latency_s[HopKind.NET]
    lat = c.base_latency_s
    if algorithm == "ring":
        algbw = bus * n_ranks / nsteps
        if op in (Op.REDUCE, Op.BROADCAST):
            lat += nsteps * (inter_lat if n_nodes > 1 else intra_lat)
        else:
            if n_nodes > 1:
                intra_lat = max(intra_lat, NET_OVERHEAD_S * (3 if protocol == str(Protocol.SIMPLE) else 1))
            ninter = 0 if n_nodes == 1 else (2 * (n_nodes - 1) if op == Op.ALL_REDUCE else n_nodes - 1)
            lat += (nsteps - ninter) * intra_lat + ninter * inter_lat
    elif algorithm == "tree":
        algbw = (fabric.intra_Bps * c.fraction(n_nodes) if n_nodes <= 2 else bus) * 0.5
        cap = tree_algbw_cap_Bps(protocol, fabric.arch_index, fabric.nics, n_nodes)
        if cap is not None:
            algbw = min(algbw, cap)
        lat += 2 * ((n_ranks // n_nodes - 1) * intra_lat + int(math.log2(n_nodes)) * inter_lat)
    elif algorithm == "nvls" and n_nodes <= 1:  # one pass through the switch, reduce and multicast pipelined
        algbw = 2 * bus * n_ranks / nsteps  # (busBw x 2)
        lat = intra_lat
    elif algorithm == "nvls":  # over CollNet: min(NVLS's doubled intra-node bandwidth, the NICs'), tuning.cc
        algbw = min(2 * fabric.intra_Bps * c.fraction(1), fabric.nic_Bps) * n_ranks / nsteps
        lat = intra_lat + inter_lat
    elif algorithm == "nvls_tree":  # NVLS inside the node (busBw x 2), a tree over nodes (x 2 on two nodes)
        nvls_bw = 2 * fabric.intra_Bps * costs(nvls_family(fabric.arch_index), protocol).fraction(1)
        inter_bw = fabric.nic_Bps * (2 if n_nodes <= 2 else 1)
        algbw = min(nvls_bw, inter_bw) * n_ranks / nsteps
        lat = intra_lat + 2 * int(math.log2(n_nodes)) * inter_lat
    else:  # collnet_direct / collnet_chain: bwIntra-based, x 0.5 (tuning.cc), held to the NICs' rate
        ppn = n_ranks // n_nodes
        algbw = 0.5 * fabric.intra_Bps * c.fraction(n_nodes)
        if algorithm == "collnet_direct":
            factor = ppn / max(1, fabric.nics)  # GPU/NIC ratio: Direct wants a NIC per GPU
            algbw /= factor - (factor - 1) / 2
            if fabric.arch_index is not None and fabric.arch_index >= 2:  # minCompCap >= 90
                algbw *= 0.85
        algbw = min(algbw, fabric.nic_Bps)  # each NIC carries S/k per direction (collnet.collnet_nic_bytes)
        lat = collnet_latency_s(algorithm, ppn, fabric.intra)
    return lat + size_bytes / algbw


def nccl_choice(
    op: str, size_bytes: float, n_ranks: int, n_nodes: int, fabric: NodeFabric | None = None,
    enable: NcclEnable | None = None,
) -> tuple[str, str, float]:
    """(algorithm, protocol, predicted seconds) with the least closed-form time."""
    fabric = fabric or NodeFabric()
    best: tuple[str, str, float] | None = None
    for alg, proto in candidates(op, n_ranks, n_nodes, fabric, enable):
        t = nccl_predicted_time_s(op, alg, proto, size_bytes, n_ranks, n_nodes, fabric, enable)
        if t is not None and (best is None or t < best[2]):
            best = (alg, proto, t)
    if best is None:
        raise InfeasibleError(no_candidate_text(op, enable))
    return best


def no_candidate_text(op: str, enable: NcclEnable | None) -> str:
    """NCCL's own complaint when NCCL_ALGO / NCCL_PROTO leave a collective nothing to run (enqueue.cc)."""
    algo = enable.algo if enable is not None else None
    proto = enable.proto if enable is not None else None
    return (f"no algorithm/protocol available for {op} on this hardware with communication.nccl_algo {algo!r} "
            f"and nccl_proto {proto!r} (NCCL fails the call the same way); enable another algorithm or protocol")


__all__ = ["COSTS", "PROTOCOLS", "socket_streams", "candidates", "nccl_choice", "nccl_predicted_time_s", "no_candidate_text"]
