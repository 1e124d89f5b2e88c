"""Reductions on CPUs cost host-memory time: gloo's CPU-side all-reduce and a CPU parameter server's sums."""
from __future__ import annotations

import copy

import pytest

from simdist.collectives.host_reduce import HOST_REDUCE_THREAD_Bps, host_reduce_s
from simdist.collectives.schedule import CollectiveOp
from simdist.engine.context import build_context
from simdist.hardware.specs import HOST_CPU_SERVER
from simdist.io.load import load_data
from simdist.scenario import Fidelity

N, S = 4, 100e6
BASE = {"cluster": {"nodes": [{"count": N, "gpu": "v100-sxm2-16gb", "nic": "eth-10g"}]},
        "workload": {"benchmark": {"op": "all_reduce", "sizes": ["100 MB"]}}}


def _time(**comm) -> float:
    d = copy.deepcopy(BASE)
    d["communication"] = comm
    ctx = build_context(load_data(d), Fidelity.ESTIMATE)
    return ctx.network.schedule_time(ctx.schedule(CollectiveOp.ALL_REDUCE, S))


def test_gloo_ring_pays_the_cpu_sums_of_its_reduce_scatter():
    # a ring reduce-scatter sums (N-1) shards of S/N on every rank, each summed byte 3 bytes of host traffic
    expected = host_reduce_s((N - 1) * S / N)
    assert expected == pytest.approx(3 * 0.75 * S / HOST_REDUCE_THREAD_Bps)
    assert _time(backend="gloo", strategy="ring") - _time(backend="textbook", strategy="ring") == pytest.approx(expected)


def test_cpu_parameter_server_pays_its_sums_and_a_gpu_server_does_not():
    base = {"strategy": "ps", "ps": {"servers": 1, "placement": "dedicated"}}
    gpu = _time(**{**base, "ps": {**base["ps"], "server": "gpu"}})
    cpu = _time(**{**base, "ps": {**base["ps"], "server": "cpu"}})
    # the server sums N workers' S-byte shards in host memory at the host's bandwidth
    assert cpu - gpu == pytest.approx(3 * N * S / HOST_CPU_SERVER.memory_bandwidth_Bps)
