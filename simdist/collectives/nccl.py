"""NCCL's algorithm choice, modelled after its tuning model (NVIDIA/nccl src/graph/tuning.cc:
ncclTopoTuneModel and ncclTopoGetAlgoTime, NCCL 2.9-2.12 constants).

For each (algorithm, protocol) NCCL predicts time = latency + size / algbw and takes the minimum.
What is modelled: algorithms ring and tree (collnet/NVLS need switch support and are left out);
protocols LL and Simple (LL128 only when `ll128=True`, as NCCL enables it only on Volta/Ampere with
NVLink); the base and per-hop hardware latencies (NVLink or PCI inside a node, network between
nodes); ring latency (nsteps - nInterSteps) intra + nInterSteps inter hops; tree latency
2 ((ranks/node - 1) intra + log2(nodes) inter); bus bandwidth -> algbw ratios (ring n/nsteps, tree
1/2, tree capped at 0.9 busBw and 80/110 GB/s, LL at 1/4 (ring) or 1/3.8 (tree)); the tree
correction factors by size and the ring "plateau" latency factor 1.9 for multi-node all-reduce.
Only all-reduce has a tree; every other op is a ring. The bus bandwidth per algorithm (NCCL's
nChannels x graph speed) is an input, the same for ring and tree by default.
"""
from __future__ import annotations

import math

from simdist.collectives.schedule import CollectiveOp

Op = CollectiveOp
PROTOCOLS = ("LL", "LL128", "Simple")

# microseconds; [algorithm][protocol] as in tuning.cc's baseLat and hwLat tables
BASE_LAT_US = {"tree": (6.8, 14.0, 0.0), "ring": (6.6, 14.0, 8.4)}
HW_LAT_US = {
    "nvlink": {"tree": (0.52, 1.2, 28.0), "ring": (0.47, 1.9, 3.4)},
    "pci": {"tree": (1.0, 1.9, 28.0), "ring": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 50.0), "ring": (2.7, 4.0, 9.6)},
}
# bandwidth correction for trees at medium sizes, indexed by log2(size / 64 B), 64 B .. 128 MiB
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7, .8, .9),
}
DEFAULT_BUS_BW_GBPS = 24.0  # nChannels x speed: e.g. 2 channels over one 200 Gb/s NIC


def _steps(op: CollectiveOp, n: int) -> int:
    if op == Op.ALL_REDUCE:
        return 2 * (n - 1)
    if op in (Op.REDUCE_SCATTER, Op.ALL_GATHER):
        return n - 1
    return n


def nccl_predicted_time_s(
    op: str, algorithm: str, protocol: str, size_bytes: float, n_ranks: int, n_nodes: int,
    bus_bw_GBps: float = DEFAULT_BUS_BW_GBPS, intra: str = "nvlink",
) -> float | None:
    """NCCL's own time prediction for one (algorithm, protocol), or None where it has none."""
    op = CollectiveOp(op)
    if op != Op.ALL_REDUCE and algorithm != "ring":
        return None
    if n_ranks <= 1:
        return 0.0
    p = PROTOCOLS.index(protocol)
    nsteps = _steps(op, n_ranks)
    ninter = _steps(op, n_nodes) if n_nodes > 1 else 0
    bus = bus_bw_GBps
    if algorithm == "ring" and protocol == "LL":
        bus *= 1 / 4 if (n_nodes > 1 or op in (Op.ALL_REDUCE, Op.REDUCE)) else 1 / 3
    if algorithm == "ring" and protocol == "LL128":
        bus *= 0.92
    if algorithm == "tree":
        bus = min(bus * 0.9, 80.0 if n_nodes > 2 else 110.0)
        if protocol == "LL":
            bus /= 3.8
        elif protocol == "LL128":
            bus *= 7 / 9 if n_nodes == 1 else 0.915
    algbw = bus * (0.5 if algorithm == "tree" else n_ranks / nsteps)
    intra_lat = HW_LAT_US[intra][algorithm][p] * (1.8 if n_nodes > 1 and protocol == "LL" else 1.0)
    inter_lat = HW_LAT_US["net"][algorithm][p]
    lat = BASE_LAT_US[algorithm][p]
    if algorithm == "ring":
        if op in (Op.REDUCE, Op.BROADCAST):
            lat += nsteps * HW_LAT_US["net" if n_nodes > 1 else intra]["ring"][p]
        else:
            lat += (nsteps - ninter) * intra_lat + ninter * inter_lat
    else:
        lat += 2 * ((n_ranks // n_nodes - 1) * intra_lat + int(math.log2(n_nodes)) * inter_lat)
    log_size = int(math.log2(max(size_bytes, 64) / 64))
    if algorithm == "tree" and log_size < 22:
        algbw *= TREE_CORRECTION[protocol][log_size]
    if algorithm == "ring" and protocol == "Simple" and n_nodes > 1 and op == Op.ALL_REDUCE \
            and size_bytes >= n_ranks / 16 * 65536:
        lat *= 1.9
    return (lat + size_bytes / (1000 * algbw)) * 1e-6


def nccl_choice(
    op: str, size_bytes: float, n_ranks: int, n_nodes: int, bus_bw_GBps: float = DEFAULT_BUS_BW_GBPS,
    intra: str = "nvlink", ll128: bool = False,
) -> tuple[str, str, float]:
    """(algorithm, protocol, predicted seconds) NCCL would pick."""
    best: tuple[str, str, float] | None = None
    for alg in ("tree", "ring"):
        for proto in PROTOCOLS:
            if proto == "LL128" and not ll128:
                continue
            t = nccl_predicted_time_s(op, alg, proto, size_bytes, n_ranks, n_nodes, bus_bw_GBps, intra)
            if t is not None and (best is None or t < best[2]):
                best = (alg, proto, t)
    assert best is not None
    return best
