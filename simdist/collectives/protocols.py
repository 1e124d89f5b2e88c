"""NCCL's three wire protocols (LL, LL128, Simple) and what each costs a schedule.

Facts from NVIDIA/nccl (src/graph/tuning.cc, src/include/device.h; NCCL 2.2x):

- Bandwidth. LL stores 8-byte lines of 4 data + 4 flag bytes, so at most half the link carries data;
  LL128 stores 128-byte lines with 8 flag bytes (120/128; tuning.cc charges 0.92); Simple moves raw
  data. NCCL's tuning model scales bus bandwidth by 0.5 (ring LL), 0.92 (ring LL128), and for trees
  0.92 x (1/3.8 LL, 7/9 single-node or 120/128 multi-node LL128, 1 Simple).
- Latency. A fixed per-call cost (baseLatencies: launch, work-queue fetch and the end-of-call
  synchronisation) and a per-hop cost (hwLatencies, by link kind NVLink / PCI / network, algorithm
  and protocol). Simple pays a memory fence and a flag round trip per 512 KiB step, LL and LL128
  only poll the flags inside the data, so their hops are far cheaper.

How a schedule carries this (`apply_protocol`): every transfer's bytes are divided by the protocol's
bandwidth fraction (the flag bytes do cross the wire), each chain starts with a step that costs the
per-call latency, and every hop is charged the protocol's extra per-hop latency over LL's (LL's hop
is the bare hop, which the network model already charges from the links' own latencies).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np

from simdist.collectives.schedule import Group, Schedule, Step, Transfer, TransferArray


class Protocol(StrEnum):
    """NCCL protocols, spelled as NCCL_PROTO spells them."""

    LL = "LL"
    LL128 = "LL128"
    SIMPLE = "Simple"


class HopKind(StrEnum):
    """What a hop crosses, as NCCL's hwLatencies tables index it."""

    NVLINK = "nvlink"
    PCI = "pci"
    NET = "net"


@dataclass(frozen=True)
class ProtocolCosts:
    """One protocol's costs for one algorithm family: per-call latency, per-hop latency by hop kind,
    and the fraction of the link bandwidth that carries data."""

    base_latency_s: float
    hop_latency_s: dict[HopKind, float]
    bandwidth_fraction: float
    bandwidth_fraction_single_node: float | None = None  # when it differs on one node (tree LL128)

    def fraction(self, nodes: int) -> float:
        if nodes <= 1 and self.bandwidth_fraction_single_node is not None:
            return self.bandwidth_fraction_single_node
        return self.bandwidth_fraction


_US = 1e-6


def _nvls_costs(net_us: float, fraction: float) -> dict[Protocol, ProtocolCosts]:
    """An NVLS family's costs (Simple only): the switch's 25 us per call and hop, its network hop, its fraction."""
    hops = {HopKind.NVLINK: 25.0 * _US, HopKind.PCI: 25.0 * _US, HopKind.NET: net_us * _US}
    return {Protocol.SIMPLE: ProtocolCosts(25.0 * _US, hops, fraction)}


# tuning.cc baseLatencies and hwLatencies (microseconds), per algorithm family; 'ring' also serves
# reduce-scatter / all-gather / broadcast / reduce chains, 'tree' the double binary tree.
COSTS: dict[str, dict[Protocol, ProtocolCosts]] = {
    "ring": {
        Protocol.LL: ProtocolCosts(6.6 * _US, {HopKind.NVLINK: 0.6 * _US, HopKind.PCI: 1.0 * _US,
                                               HopKind.NET: 2.7 * _US}, 0.5),
        Protocol.LL128: ProtocolCosts(14.0 * _US, {HopKind.NVLINK: 1.9 * _US, HopKind.PCI: 2.5 * _US,
                                                   HopKind.NET: 4.0 * _US}, 0.92),
        Protocol.SIMPLE: ProtocolCosts(8.4 * _US, {HopKind.NVLINK: 3.4 * _US, HopKind.PCI: 5.7 * _US,
                                                   HopKind.NET: 14.0 * _US}, 1.0),
    },
    "tree": {
        Protocol.LL: ProtocolCosts(6.8 * _US, {HopKind.NVLINK: 0.6 * _US, HopKind.PCI: 1.0 * _US,
                                               HopKind.NET: 5.0 * _US}, 0.92 / 3.8),
        Protocol.LL128: ProtocolCosts(14.0 * _US, {HopKind.NVLINK: 1.25 * _US, HopKind.PCI: 1.9 * _US,
                                                   HopKind.NET: 8.5 * _US}, 0.92 * 120 / 128, 0.92 * 7 / 9),
        Protocol.SIMPLE: ProtocolCosts(8.4 * _US, {HopKind.NVLINK: 4.0 * _US, HopKind.PCI: 4.0 * _US,
                                                   HopKind.NET: 14.0 * _US}, 0.92),
    },
    # NVLS (in-switch reduction, Simple only): tuning.cc charges one NVLink "hop" of 25 us and no base
    # latency; busBw x 0.85 on Hopper (nvlsEfficiency)
    "nvls": _nvls_costs(18.0, 0.85),
    # NVLS on Blackwell (NVLink5 to the switch: HGX B200, GB200/GB300 NVL72): nvlsEfficiency 0.74 (nvls_family)
    "nvls_blackwell": _nvls_costs(18.0, 0.74),
    # NVLSTree (nvls.py; Simple only): the NVLS hop (25 us) once per call; the tree's network hops are the
    # schedule step's own delay (2 log2(nodes) x 20.9 us, tuning.cc); NVLS's efficiency is applied to the
    # switch's transfers only (the NICs' run at their own rate), so no fraction here
    "nvls_tree": _nvls_costs(20.9, 1.0),
    # NVLS across nodes, over CollNet (nvls.py nvls_collnet_all_reduce; Simple only): the NVLS hop per call, the
    # network's 18 us as the schedule step's own delay; NVLS's efficiency on the switch's transfers only
    "nvls_net": _nvls_costs(18.0, 1.0),
    # CollNet over SHARP (collnet.py; Simple only): no base latency; its per-call latency (tuning.cc's
    # hwLatencies for CollNet plus 0.4 us per local peer) is the schedule step's own delay
    "collnet_direct": {
        Protocol.SIMPLE: ProtocolCosts(0.0, {HopKind.NVLINK: 3.7 * _US, HopKind.PCI: 3.7 * _US,
                                             HopKind.NET: 31.0 * _US}, 1.0),
    },
    "collnet_chain": {
        Protocol.SIMPLE: ProtocolCosts(0.0, {HopKind.NVLINK: 2.8 * _US, HopKind.PCI: 2.8 * _US,
                                             HopKind.NET: 30.0 * _US}, 1.0),
    },
}
PROTOCOLS: dict[str, Protocol] = {p.value: p for p in Protocol}

# NCCL's nvlsEfficiency by compCapIndex (src/graph/tuning.cc, later src/tuning/nvls.cc: Volta 0, Ampere 0,
# Hopper 0.85, Blackwell 0.74): NVLS's share of the switch links' rate, lower on NVLink5's doubled links
NVLS_FAMILY_BY_ARCH: dict[int, str] = {3: "nvls_blackwell"}


def nvls_family(arch_index: int | None) -> str:
    """The COSTS family whose fraction is NVLS's efficiency on GPUs of NCCL compCapIndex `arch_index`
    (Blackwell's 0.74, else Hopper's 0.85: NVLS runs on Hopper and later only)."""
    return NVLS_FAMILY_BY_ARCH.get(arch_index, "nvls") if arch_index is not None else "nvls"

# Data per pipeline step (device.h: NCCL_STEPS = 8 slots per buffer). Simple: 4 MiB / 8 = 512 KiB.
# LL: 512 threads x 8 lines x 16 B per step, half of it flags = 32 KiB of data. LL128: 640 threads x
# 120 elements x 8 B = 600 KiB per step, 120/128 of it data.
STEP_DATA_BYTES: dict[Protocol, float] = {
    Protocol.LL: 512 * 8 * 8,
    Protocol.LL128: 640 * 120 * 8 * 120 / 128,
    Protocol.SIMPLE: 512 * 1024,
}


# What a hop hands on before the next hop may forward it: LL and LL128 carry a flag in every 16-byte
# / 128-byte line, so data moves on line by line (cut-through); Simple signals once per chunk, and a
# chunk must arrive whole before it is forwarded (store and forward).
LINE_BYTES: dict[Protocol, float] = {Protocol.LL: 16, Protocol.LL128: 128}


def tree_chunk_bytes(protocol: str, share_bytes: float) -> float:
    """Bytes a tree hop hands on at a time: a line for LL / LL128, else Simple's 512 KiB step
    (never more than a channel's share)."""
    proto = Protocol(protocol)
    if proto in LINE_BYTES:
        return min(LINE_BYTES[proto], share_bytes)
    return min(STEP_DATA_BYTES[proto], share_bytes)


def costs(family: str, protocol: str) -> ProtocolCosts:
    """The costs of `protocol` for an algorithm family; ValueError for pairs NCCL does not run."""
    table = COSTS.get(family)
    if table is None:
        raise ValueError(f"no protocol costs for algorithm family {family!r}; expected one of {sorted(COSTS)}")
    try:
        return table[Protocol(protocol)]
    except (ValueError, KeyError):
        raise ValueError(f"{family} does not run protocol {protocol!r}; it runs {[str(p) for p in table]}") from None


def extra_hop_latency_s(family: str, protocol: str, hop: HopKind) -> float:
    """What a hop costs under `protocol` beyond the bare hop (LL's, or the cheapest protocol's)."""
    table = COSTS[family]
    floor = min(c.hop_latency_s[hop] for c in table.values())
    return costs(family, protocol).hop_latency_s[hop] - floor


def node_index(group: Group) -> dict[int, int]:
    """Node index of every rank of `group` (a transfer between two nodes is a network hop)."""
    return {r: i for i, node in enumerate(group.nodes) for r in node}


_ARRAY_FROM = 64  # transfers from which an inflated tuple becomes a TransferArray (reads the same, costs less)


def _inflate(step: Step, fraction: float, memo: dict | None = None) -> Step:
    """`step` with every transfer's bytes divided by `fraction`; `memo` (by the transfers tuple's identity)
    lets steps that share one tuple (a ring all-reduce's two phases) share the inflated one too."""
    if fraction == 1.0 or not step.transfers:
        return step
    memo = {} if memo is None else memo
    hit = memo.get(id(step.transfers))
    if hit is None or hit[0] is not step.transfers:
        tr = step.transfers
        if isinstance(tr, TransferArray):  # the arrays divided at once (the same floats), no Transfer objects
            inflated = TransferArray(tr.src, tr.dst, tr.size_bytes / fraction)
        elif len(tr) >= _ARRAY_FROM:  # a large tuple (a tree's steps): read once into arrays, divided at once
            n = len(tr)
            inflated = TransferArray(np.fromiter((t.src for t in tr), dtype=np.int64, count=n),
                                     np.fromiter((t.dst for t in tr), dtype=np.int64, count=n),
                                     np.fromiter((t.size_bytes for t in tr), dtype=np.float64, count=n) / fraction)
        else:
            inflated = tuple(Transfer(t.src, t.dst, t.size_bytes / fraction) for t in tr)
        hit = memo[id(tr)] = (tr, inflated)
    return replace(step, transfers=hit[1])


# NCCL_NET_OVERHEAD on x86 (tuning.cc getNetOverhead): an inter-node ring's every step posts to the
# network, so its intra-node hops cost at least 1 us (3 us with Simple)
NET_OVERHEAD_S = 1e-6


def step_extra_latency_s(step: Step, node_of: dict[int, int], family: str, protocol: str, intra: HopKind,
                         multi_node: bool = False) -> float:
    """The protocol's extra latency for one step: per repetition the extra of its hops (mean over a
    pipelined ring's hops, the worst hop otherwise). On a multi-node ring an intra-node hop costs at
    least NCCL's network post overhead."""
    if not step.transfers:
        return 0.0
    inter = extra_hop_latency_s(family, protocol, HopKind.NET)
    local = extra_hop_latency_s(family, protocol, intra)
    if multi_node and family == "ring":
        overhead = NET_OVERHEAD_S * (3 if Protocol(protocol) == Protocol.SIMPLE else 1)
        total = costs(family, protocol).hop_latency_s[intra]
        local += max(0.0, overhead - total)
    if inter == 0.0 and local == 0.0:  # a one-protocol family (NVLS, NVLSTree, CollNet): nothing to add
        return 0.0
    get = node_of.get
    extras = [inter if get(t.src, -1) != get(t.dst, -2) else local for t in step.transfers]
    per = sum(extras) / len(extras) if step.pipelined else max(extras)
    return step.repeat * per


# Families whose hops NCCL's tuning model prices per protocol and hop kind (hwLatencies), and which
# apply_protocol can therefore charge as NCCL does (`nccl_hops`); NVLS and CollNet price their switch hops
# per call instead.
HOP_PRICED_FAMILIES = frozenset({"ring", "tree"})


def step_hop_latency_s(step: Step, node_of: dict[int, int], family: str, protocol: str, intra: HopKind,
                       multi_node: bool = False) -> float:
    """One repetition's hop latency as NCCL's tuning model charges it: its hwLatencies entry for the hop's kind
    (network between nodes, `intra` inside one; on a multi-node ring at least the network post overhead), the
    mean over a pipelined ring's hops, the worst hop otherwise."""
    c = costs(family, protocol)
    inter = c.hop_latency_s[HopKind.NET]
    local = c.hop_latency_s[intra]
    if multi_node and family == "ring":
        local = max(local, NET_OVERHEAD_S * (3 if Protocol(protocol) == Protocol.SIMPLE else 1))
    get = node_of.get
    hops = [inter if get(t.src, -1) != get(t.dst, -2) else local for t in step.transfers]
    return sum(hops) / len(hops) if step.pipelined else max(hops)


def apply_protocol(
    schedule: Schedule, protocol: str, group: Group, *,
    family: str | None = None, intra: HopKind = HopKind.NVLINK, nccl_hops: bool = False,
) -> Schedule:
    """`schedule` as it runs under `protocol`: wire bytes / bandwidth fraction, the per-call latency
    as a leading step of each chain, and each step's per-hop latency (a tree's steady step has repeat 1 and
    so pays one hop: its chunks are in flight together). With `nccl_hops` (a kernel-bypass fabric) or on one
    node, every hop of a ring or tree costs what NCCL's tuning model says (step_hop_latency_s, Step.hop_latency_s)
    instead of its links' latencies; otherwise (sockets, EFA) the links' latencies stay and the protocol's
    extra over its cheapest protocol is added to the step's delay."""
    family = family or schedule.algorithm
    c = costs(family, protocol)
    fraction = c.fraction(len(group.nodes))
    node_of = node_index(group)
    multi_node = len(group.nodes) > 1
    priced = family in HOP_PRICED_FAMILIES and (nccl_hops or not multi_node)  # one node: no NIC on the way
    chains = []
    inflated: dict = {}
    for chain in schedule.chains:
        steps = [Step((), delay_s=c.base_latency_s, label=f"{protocol} launch")] if c.base_latency_s else []
        for step in chain:
            s = _inflate(step, fraction, inflated)
            if priced and step.transfers:
                steps.append(replace(s, hop_latency_s=step_hop_latency_s(step, node_of, family, protocol, intra,
                                                                         multi_node)))
                continue
            extra = step_extra_latency_s(step, node_of, family, protocol, intra, multi_node=multi_node)
            steps.append(replace(s, delay_s=s.delay_s + extra) if extra else s)
        chains.append(tuple(steps))
    name = schedule.algorithm if "/" in schedule.algorithm else f"{schedule.algorithm}/{protocol}"
    return Schedule(schedule.op, name, schedule.size_bytes, tuple(chains), protocol=str(Protocol(protocol)))


# What one tree channel (one thread block doing the reduce going up and the broadcast coming down) moves,
# as NCCL's tuning model caps it (tuning.cc perChMaxTreeBws / perChMaxTreeLL128Bws, GB/s of NCCL's tree
# "bus bandwidth" per searched channel; algbw = half of it), by GPU generation (NCCL's compCapIndex:
# Volta and older, Ampere, Hopper, Blackwell) and node count (1, 2, 3 or more). NCCL's graph search gives
# a multi-node tree one channel per NIC, so a tree all-reduce over nodes moves at most
# nics x cap / 2 bytes per second however fast the links are: on 2 nodes the links alone would let the
# tree run near twice the NIC rate (each NIC carries S per direction against the ring's 2(n-1)/n S).
PER_CHANNEL_TREE_GBPS: dict[Protocol, tuple[tuple[float, float, float], ...]] = {
    Protocol.SIMPLE: ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0)),
    Protocol.LL128: ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0)),
}
# NVLink generation of a node's GPUs -> NCCL's compCapIndex (nvlink1 is Pascal, indexed with Volta)
NVLINK_ARCH_INDEX: dict[str, int] = {"nvlink1": 0, "nvlink2": 0, "nvlink3": 1, "nvlink4": 2, "nvlink5": 3}


def tree_algbw_cap_Bps(protocol: str, arch_index: int | None, nics: int, n_nodes: int) -> float | None:
    """The most user bytes per second a tree all-reduce over `n_nodes` moves under NCCL's per-channel
    limit (one channel per NIC); None where NCCL has no figure (LL, an unknown GPU generation)."""
    table = PER_CHANNEL_TREE_GBPS.get(Protocol(protocol))
    if table is None or arch_index is None or n_nodes < 1:
        return None
    per_channel = table[arch_index][min(n_nodes, 3) - 1] * 1e9
    return 0.5 * max(1, nics) * per_channel
