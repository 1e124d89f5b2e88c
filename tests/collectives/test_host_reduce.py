"""Reductions on CPUs cost host-memory time (gloo's CPU-side all-reduce, a CPU parameter server's sums), and a
gloo rank pinned to one core copies all of its socket traffic on that core (collectives/host_reduce.py)."""
from __future__ import annotations

import copy

import pytest

from simdist.collectives.host_reduce import HOST_THREAD_SUM_Bps, gloo_host, host_reduce_s
from simdist.collectives.schedule import CollectiveOp
from simdist.engine.context import build_context
from simdist.hardware.specs import HOST_CPU_SERVER
from simdist.io.load import load_data
from simdist.scenario import Fidelity

N, S = 4, 100e6
BASE = {"cluster": {"nodes": [{"count": N, "gpu": "v100-sxm2-16gb", "nic": "eth-10g"}]},
        "workload": {"benchmark": {"op": "all_reduce", "sizes": ["100 MB"]}}}
TCP_STREAM_CAP_Bps = 25e9 / 8  # links.yaml transport tcp stream_cap


def _cpu_device(vendor: str, memory_bandwidth: str) -> dict:
    return {"name": "one-core", "vendor": vendor, "peak_flops": {"fp32": "50 GFLOP/s"}, "memory": "16 GB",
            "memory_bandwidth": memory_bandwidth}


def _time(data: dict | None = None, size_bytes: float = S, **comm) -> float:
    d = copy.deepcopy(data or BASE)
    d["communication"] = comm
    ctx = build_context(load_data(d), Fidelity.ESTIMATE)
    return ctx.network.schedule_time(ctx.schedule(CollectiveOp.ALL_REDUCE, size_bytes))


def _two_cpu_nodes(vendor: str, memory_bandwidth: str, nic: str = "40 Gb/s") -> dict:
    """Two nodes of one 'device' each on a TCP NIC, as gloo's benchmark between two pinned processes."""
    return {"cluster": {"nodes": [{"count": 2, "gpu": _cpu_device(vendor, memory_bandwidth), "gpus_per_node": 1,
                                   "intra_node": "pcie-gen3",
                                   "nic": {"bandwidth": nic, "latency": "25 us", "transport": "tcp"}}],
                        "fabric": {"topology": "single_switch"}},
            "workload": {"benchmark": {"op": "all_reduce", "sizes": ["20 MB"]}}}


def test_gloo_ring_on_gpu_ranks_sums_on_one_host_thread_at_the_measured_core_rate():
    # a ring reduce-scatter sums (N-1) shards of S/N on every rank, each summed byte 3 bytes of host traffic
    expected = host_reduce_s((N - 1) * S / N, HOST_THREAD_SUM_Bps)
    assert expected == pytest.approx(3 * 0.75 * S / 14.7e9)
    gloo, textbook = _time(backend="gloo", strategy="ring"), _time(backend="textbook", strategy="ring")
    assert gloo - textbook == pytest.approx(expected)


def test_gloo_on_cpu_ranks_sums_at_the_devices_declared_memory_bandwidth():
    # a 1 Gb/s NIC is below the TCP stream cap, so only the sums differ from the textbook ring: 2 ranks sum
    # S/2 each, 3 bytes of traffic per summed byte at the declared 8.5 GB/s
    data = _two_cpu_nodes("cpu", "8.5 GB/s", nic="1 Gb/s")
    size = 20e6
    gloo = _time(data, size, backend="gloo", strategy="ring")
    textbook = _time(data, size, backend="textbook", strategy="ring")
    assert gloo - textbook == pytest.approx(3 * (size / 2) / 8.5e9)


def test_a_one_core_rank_copies_what_it_sends_and_receives_on_that_core():
    # The same 40 Gb/s TCP pair, with ranks that have one core (vendor cpu) and without (a GPU rank's process
    # has cores for gloo's loop thread and its calling thread). Sums are made equal (the CPU device declares
    # the measured core rate), so the difference is the transfers: each ring step moves S/2 each way; with its
    # own thread per direction a transfer gets one stream cap, with one core per rank it gets half (that core
    # copies the rank's outgoing and incoming bytes). Two steps: 2 (S/2)(2/cap - 1/cap) = S/cap.
    size = 20e6
    rate = f"{HOST_THREAD_SUM_Bps / 1e9} GB/s"
    one_core = _time(_two_cpu_nodes("cpu", rate), size, backend="gloo", strategy="ring")
    threads = _time(_two_cpu_nodes("intel", rate), size, backend="gloo", strategy="ring")
    assert one_core - threads == pytest.approx(size / TCP_STREAM_CAP_Bps)


def test_one_core_sharing_does_not_apply_to_other_backends_or_below_the_stream_cap():
    size = 20e6
    fast, slow = _two_cpu_nodes("cpu", "8.5 GB/s"), _two_cpu_nodes("cpu", "8.5 GB/s", nic="1 Gb/s")
    assert _time(fast, size, backend="textbook", strategy="ring") == _time(
        _two_cpu_nodes("intel", "8.5 GB/s"), size, backend="textbook", strategy="ring")
    # 1 Gb/s is far below half a stream cap: the shared core never limits the transfer, only the sums remain
    assert _time(slow, size, backend="gloo", strategy="ring") == pytest.approx(
        _time(slow, size, backend="textbook", strategy="ring") + 3 * (size / 2) / 8.5e9)


def test_gloo_host_takes_the_slowest_group():
    data = copy.deepcopy(BASE)
    data["cluster"]["nodes"].append({"count": 2, "gpu": _cpu_device("cpu", "5 GB/s"), "gpus_per_node": 1,
                                     "nic": "eth-10g"})
    host = gloo_host(load_data(data).cluster)
    assert host.sum_Bps == 5e9 and host.one_core
    gpus = gloo_host(load_data(BASE).cluster)
    assert gpus.sum_Bps == HOST_THREAD_SUM_Bps and not gpus.one_core


def test_cpu_parameter_server_pays_its_sums_and_a_gpu_server_does_not():
    base = {"strategy": "ps", "ps": {"servers": 1, "placement": "dedicated"}}
    gpu = _time(**{**base, "ps": {**base["ps"], "server": "gpu"}})
    cpu = _time(**{**base, "ps": {**base["ps"], "server": "cpu"}})
    # the server sums N workers' S-byte shards in host memory at the host's bandwidth
    assert cpu - gpu == pytest.approx(3 * N * S / HOST_CPU_SERVER.memory_bandwidth_Bps)


def test_gloo_benchmark_on_two_pinned_cores_against_the_textbook_ring():
    # validation/published/scenarios/gloo-2node-40gbe-tcp.yaml (pytorch/gloo #248): 20 MB, two ranks, each a core
    # declaring 8.5 GB/s. Against a textbook ring (a stream cap each way, no sums), gloo's two ring steps move
    # their 10 MB each way at half a stream cap (one core copies both directions), and the reduce-scatter step
    # sums 10 MB at 3 bytes of traffic per byte: 2 x 10 MB (2/cap - 1/cap) + 3 x 10 MB / 8.5 GB/s = 6.4 + 3.53 ms.
    from pathlib import Path

    from simdist.io.load import load_scenario

    path = Path(__file__).resolve().parents[2] / "validation/published/scenarios/gloo-2node-40gbe-tcp.yaml"
    scenario = load_scenario(path)
    times = {}
    for backend in ("gloo", "textbook"):
        s = load_scenario(path, [f"communication.backend={backend}"])
        ctx = build_context(s, Fidelity.ESTIMATE)
        times[backend] = ctx.network.schedule_time(ctx.schedule(CollectiveOp.ALL_REDUCE, 20e6))
    assert scenario.cluster.node_groups[0].gpu.memory_bandwidth_Bps == 8.5e9
    expected = 2 * 10e6 * (2 / TCP_STREAM_CAP_Bps - 1 / TCP_STREAM_CAP_Bps) + 3 * 10e6 / 8.5e9
    assert times["gloo"] - times["textbook"] == pytest.approx(expected)
    assert 20e6 / times["gloo"] / 1e9 == pytest.approx(1.216, abs=0.001)  # busbw = algbw for two ranks, GB/s
