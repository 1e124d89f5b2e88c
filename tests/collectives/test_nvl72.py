"""GB200/GB300 NVL72 racks as one 72-GPU node (intra_node nvl72-gb200 / nvl72-gb300): an all-reduce inside a
rack runs NVLS through the NVLink Switch trays at Blackwell's NVLS efficiency, and groups across racks run over
the per-GPU ConnectX NICs; every figure against the hand calculation."""
from __future__ import annotations

import pytest
import yaml

from simdist.collectives.backends import build_backend_schedule
from simdist.collectives.fabric import from_topology
from simdist.collectives.nccl import nccl_predicted_time_s
from simdist.collectives.protocols import costs, nvls_family
from simdist.collectives.schedule import Group
from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.load import load_data
from simdist.network.analytical import AnalyticalNetwork
from simdist.topology.build import build_topology
from simdist.topology.routing import ring_channels

SIZE = 8e9  # bytes per rank
NVLINK5_x18 = 18 * 50e9  # per direction, per GPU, to the NVLink Switch trays
NVLINK_EFF = 0.80  # catalog transport default for nvlink
NVLS_BLACKWELL = 0.74  # NCCL nvlsEfficiency[Blackwell]
RDMA_EFF = 0.92  # catalog transport default for rdma
NVLS_CALL_S = 25e-6  # tuning.cc: NVLS's one NVLink hop per call, no base latency
NVLINK_HOP_S = 1e-6  # catalog nvlink5 latency, GPU to GPU through the switch (half on each side)
NVLS_TREE_HOPS_S = 2 * 20.9e-6  # tuning.cc NVLSTree: 2 log2(nodes) network hops, two racks
# rack to rack: GPU -> its NIC over PCIe gen5 (2 us, half each side of the root), NIC -> fabric switch -> NIC
# (connectx-7, 2 us each edge), NIC -> GPU (2 us)
RACK_TO_RACK_PATH_S = 2e-6 + 2 * 2e-6 + 2e-6


def _text(racks: int, system: str = "gb200", nic: str = "connectx-7", gpus: int = 72) -> str:
    gpu = {"gb200": "gb200-186gb", "gb300": "gb300-288gb"}[system]
    return f"""
name: nvl72
cluster:
  nodes:
    - count: {racks}
      gpu: {gpu}
      gpus_per_node: {gpus}
      intra_node: nvl72-{system}
      nic: {{link: {nic}, count: {gpus}}}
  fabric:
    topology: single_switch
workload:
  benchmark: {{op: all_reduce, sizes: ["8 GB"]}}
communication:
  strategy: ring
  backend: nccl
"""


def _load(text: str):
    return load_data(yaml.safe_load(text))


def _row(text: str) -> dict:
    (row,) = simulate(_load(text)).to_dict()["collectives"]
    return row


def _nccl_time(text: str, group: Group) -> tuple[str, float]:
    """What NCCL runs for an all-reduce of SIZE over `group` of the built cluster, and its time alone."""
    topo = build_topology(_load(text).cluster)
    net = AnalyticalNetwork(topo)
    sched = build_backend_schedule("nccl", "all_reduce", SIZE, group, fabric=from_topology(topo, group),
                                   timer=net.schedule_time, channels=ring_channels(topo, group.nodes))
    return sched.algorithm, net.schedule_time(sched)


@pytest.mark.parametrize("system", ["gb200", "gb300"])
def test_all_reduce_inside_one_rack_is_nvls_through_the_switch_trays(system):
    """72 GPUs, S = 8 GB: NVLS puts (n + 1)/n S on every GPU's 18 NVLink5 (900 GB/s per direction) at 0.80 NVLink
    payload x 0.74 nvlsEfficiency (Blackwell) = 532.8 GB/s: 73/72 x 8 GB / 532.8 GB/s + 25 us + 1 us (the NVLink
    hop) = 15.2496 ms, busbw 2 x 532.8 x 71/73 = 1,036 GB/s (less the 26 us)."""
    row = _row(_text(1, system))
    assert row["algorithm"] == "nvls/Simple"
    link = NVLINK5_x18 * NVLINK_EFF * NVLS_BLACKWELL
    hand = SIZE * 73 / 72 / link + NVLS_CALL_S + NVLINK_HOP_S
    assert hand == pytest.approx(15.2496e-3, rel=1e-4)
    assert row["time_s"] == pytest.approx(hand, rel=1e-9)
    assert row["busbw_GBps"] == pytest.approx(2 * SIZE * 71 / 72 / hand / 1e9, rel=1e-9)


def test_nvls_efficiency_is_blackwells_on_nvlink5_and_hoppers_before():
    """NCCL's nvlsEfficiency: 0.85 on Hopper (compCapIndex 2), 0.74 on Blackwell (3); the closed-form tuner uses it too."""
    assert costs(nvls_family(2), "Simple").fraction(1) == 0.85
    assert costs(nvls_family(None), "Simple").fraction(1) == 0.85
    assert costs(nvls_family(3), "Simple").fraction(1) == NVLS_BLACKWELL
    topo = build_topology(_load(_text(1)).cluster)
    fabric = from_topology(topo, Group.flat(range(72), 72))
    assert fabric.nvls and fabric.arch_index == 3 and fabric.nics == 72
    assert fabric.intra_Bps == pytest.approx(NVLINK5_x18 * NVLINK_EFF)
    # tuning.cc: busBw = 720 GB/s x 0.74, doubled for NVLS; algbw = busBw x n / (2 (n - 1))
    closed = nccl_predicted_time_s("all_reduce", "nvls", "Simple", SIZE, 72, 1, fabric)
    algbw = 2 * NVLINK5_x18 * NVLINK_EFF * NVLS_BLACKWELL * 72 / (2 * 71)
    assert closed == pytest.approx(NVLS_CALL_S + SIZE / algbw, rel=1e-9)


@pytest.mark.parametrize("system,nic,nic_Bps",
                         [("gb200", "connectx-7", 400e9 / 8), ("gb300", "connectx-8", 800e9 / 8)])
def test_one_gpu_per_rack_runs_a_ring_over_its_own_nic(system, nic, nic_Bps):
    """A data-parallel pair, GPU 0 of rack 0 and GPU 0 of rack 1: two-rank ring (Simple), S per direction through
    the GPU's own ConnectX at 0.92 of line rate, plus 8.4 us base and 2 x 14 us network hops (tuning.cc):
    ConnectX-7 8 GB / 46 GB/s = 173.91 ms; ConnectX-8 (PCIe gen6 to the GPU, 121 x 0.80 = 96.8 GB/s > 92 GB/s):
    86.96 ms."""
    algorithm, t = _nccl_time(_text(2, system, nic), Group((0, 72), ((0,), (72,))))
    assert algorithm == "ring/Simple"
    hand = SIZE / (nic_Bps * RDMA_EFF) + 8.4e-6 + 2 * 14e-6
    assert t == pytest.approx(hand, rel=1e-9)


def test_eight_gpus_per_rack_across_two_racks_run_nvls_tree_bound_by_their_nics():
    """8 GPUs in each of two racks: NVLSTree, the 8 heads' NICs each carry S/8 per direction (both trees' edge
    between the two racks, half each): 1 GB / 46 GB/s = 21.74 ms, above the switch pattern's 9/8 x 8 GB /
    532.8 GB/s = 16.9 ms (the two run pipelined, so the slower sets the time)."""
    ranks = (tuple(range(0, 72, 9)), tuple(range(72, 144, 9)))
    algorithm, t = _nccl_time(_text(2), Group(ranks[0] + ranks[1], ranks))
    assert algorithm == "nvls_tree/Simple"
    nic_time = SIZE / 8 / (400e9 / 8 * RDMA_EFF)
    assert nic_time == pytest.approx(21.739e-3, rel=1e-4)
    assert t == pytest.approx(nic_time + NVLS_CALL_S + NVLS_TREE_HOPS_S + RACK_TO_RACK_PATH_S, rel=1e-9)


def test_every_gpu_of_two_racks_runs_nvls_tree_bound_by_the_switch():
    """All 144 GPUs: NVLSTree; the switch pattern (73/72 S per GPU link at 532.8 GB/s = 15.22 ms) dominates the NICs'
    S/72 each (2.4 ms), so the call takes the switch time plus NVLSTree's 25 us, its 2 x 20.9 us network hops and
    the 8 us rack-to-rack path: 15.2985 ms."""
    row = _row(_text(2))
    assert row["algorithm"] == "nvls_tree/Simple"
    switch = SIZE * 73 / 72 / (NVLINK5_x18 * NVLINK_EFF * NVLS_BLACKWELL)
    assert row["time_s"] == pytest.approx(switch + NVLS_CALL_S + NVLS_TREE_HOPS_S + RACK_TO_RACK_PATH_S, rel=1e-9)


def test_a_job_may_use_part_of_a_rack_and_never_more_than_72_gpus():
    """64 of a rack's 72 GPUs (power-of-two jobs): still one NVLink domain, NVLS over the 64 (65/64 S per link);
    gpus_per_node defaults to the rack's 72; 73 is refused at the boundary."""
    row = _row(_text(1, gpus=64))
    assert row["algorithm"] == "nvls/Simple"
    hand = SIZE * 65 / 64 / (NVLINK5_x18 * NVLINK_EFF * NVLS_BLACKWELL) + NVLS_CALL_S + NVLINK_HOP_S
    assert row["time_s"] == pytest.approx(hand, rel=1e-9)
    default = yaml.safe_load(_text(1))
    del default["cluster"]["nodes"][0]["gpus_per_node"]
    assert load_data(default).cluster.node_groups[0].gpus_per_node == 72
    with pytest.raises(ScenarioError, match="gpus_per_node: got 73; intra_node 'nvl72-gb200' holds at most 72 GPUs"):
        _load(_text(1, gpus=73))


@pytest.mark.parametrize("key,gpu,nic", [("nvswitch-b200", "b200-180gb", "connectx-7"),
                                         ("nvswitch-b300", "b300-288gb", "connectx-8")])
def test_an_hgx_blackwell_node_runs_nvls_at_blackwells_efficiency(key, gpu, nic):
    """8 GPUs of a DGX B200 / B300 on their NVSwitches (18 NVLink5 each): NVLS, 9/8 x 8 GB / 532.8 GB/s + 26 us
    = 16.9181 ms (NCCL's 0.74 on Blackwell; Hopper's 0.85 would give 14.73 ms)."""
    text = _text(1).replace("gpu: gb200-186gb", f"gpu: {gpu}").replace("gpus_per_node: 72", "gpus_per_node: 8")
    text = text.replace("intra_node: nvl72-gb200", f"intra_node: {key}").replace("{link: connectx-7, count: 72}",
                                                                                  f"{{link: {nic}, count: 8}}")
    row = _row(text)
    assert row["algorithm"] == "nvls/Simple"
    hand = SIZE * 9 / 8 / (NVLINK5_x18 * NVLINK_EFF * NVLS_BLACKWELL) + NVLS_CALL_S + NVLINK_HOP_S
    assert hand == pytest.approx(16.9181e-3, rel=1e-4)
    assert row["time_s"] == pytest.approx(hand, rel=1e-9)
