"""Ring and hierarchical all_reduce of 1 GB on 64..16,384 GPUs: simulated vs closed form.

Prints, per size, the flow model's time, the alpha-beta closed form, their ratio, and the wall-clock
seconds the flow model took (routing included). 8 GPUs per node on a fat tree. Run: .venv/bin/python benchmarks/collectives.py [--max-gpus N]
"""
from __future__ import annotations

import argparse
import time

import simpy

from simdist.collectives.algorithms import build_schedule
from simdist.collectives.schedule import CollectiveOp, Group, Schedule
from simdist.hardware.specs import (ClusterSpec, FabricSpec, GpuSpec, IntraNodeLayout, IntraNodeSpec, LinkSpec,
                                    NicSpec, NodeGroupSpec, TopologyKind)
from simdist.network.analytical import AnalyticalNetwork
from simdist.network.flows import FlowNetwork
from simdist.topology.build import build_topology

SIZE_BYTES = 1e9
GPU = GpuSpec("bench", "bench", "x", {"fp16": 312e12}, 80e9, 2e12, 400.0, 1.0)
INTRA = IntraNodeSpec("nvswitch", IntraNodeLayout.SWITCH, LinkSpec(300e9, 2e-6, 0.8))
NIC = NicSpec(LinkSpec(25e9, 3e-6, 0.9))
FABRIC_LINK = LinkSpec(25e9, 1e-6, 0.9)


def cluster(gpus: int) -> ClusterSpec:
    nodes = gpus // 8
    fabric = FabricSpec(TopologyKind.FAT_TREE, FABRIC_LINK, nodes_per_leaf=min(16, nodes))
    return ClusterSpec((NodeGroupSpec(nodes, GPU, 8, INTRA, NIC),), fabric)


def collective_schedule(algorithm: str, group: Group) -> Schedule:
    return build_schedule(CollectiveOp.ALL_REDUCE, algorithm, SIZE_BYTES, group,
                          intra="ring", inter="ring", servers=(), server_delay_s=0.0)


def ring_closed_form(topology, router_paths, n: int) -> float:
    """2(N-1)/N S/B + 2(N-1) alpha with B the slowest hop and alpha the ring's mean hop latency
    (a pipelined ring's critical path runs through consecutive hops; docs/network.md)."""
    slowest_bw, total_lat = float("inf"), 0.0
    for i in range(n):
        links, lat = router_paths.path(i, (i + 1) % n)
        slowest_bw = min(slowest_bw, float(topology.links.capacity_Bps[links].min()))
        total_lat += lat
    return 2 * (n - 1) / n * SIZE_BYTES / slowest_bw + 2 * (n - 1) * total_lat / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-gpus", type=int, default=16384)
    args = parser.parse_args()
    print(f"{'algorithm':<13} {'gpus':>6} {'simulated_s':>12} {'estimate_s':>11} {'closed_s':>10} "
          f"{'sim/closed':>10} {'build_s':>8} {'flow_wall_s':>11}")
    for gpus in (64, 512, 4096, 16384):
        if gpus > args.max_gpus:
            break
        t0 = time.perf_counter()
        topo = build_topology(cluster(gpus))
        build_s = time.perf_counter() - t0
        group = Group.flat(range(gpus), 8)
        for algorithm in ("ring", "hierarchical"):
            schedule = collective_schedule(algorithm, group)
            t0 = time.perf_counter()
            flows = FlowNetwork(simpy.Environment(), topo)
            simulated = flows.schedule_time(schedule)
            wall = time.perf_counter() - t0
            estimate = AnalyticalNetwork(topo, flows.paths.router).schedule_time(schedule)
            closed = ring_closed_form(topo, flows.paths, gpus) if algorithm == "ring" else float("nan")
            print(f"{algorithm:<13} {gpus:>6} {simulated:>12.6f} {estimate:>11.6f} {closed:>10.6f} "
                  f"{simulated / closed:>10.6f} {build_s:>8.2f} {wall:>11.2f}", flush=True)


if __name__ == "__main__":
    main()
