"""A degraded link slows only the collectives whose flows cross it: tp inside the NVSwitch node keeps its time,
dp over the NICs slows by the capacity factor (issue: failures, 'a degraded link slows only the collectives that
cross it')."""
import pytest

import simdist
from simdist.engine.context import build_context
from simdist.engine.composite import run_training
from simdist.scenario import Fidelity

SCENARIO = {
    "cluster": {"nodes": [{"count": 2, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                           "nic": {"bandwidth": "200 Gb/s", "count": 8, "transport": "rdma"}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": "gpt3-1.3b", "batch_per_gpu": 4, "seq_len": 1024, "precision": "bf16"},
    "training": {"optimizer": "adam", "parallelism": {"tp": 8, "dp": 2}},
    "communication": {"strategy": "ring"}, "run": {"iterations": 3, "warmup": 1},
}


def _breakdown(scenario, fidelity, factor: float):
    ctx = build_context(scenario, fidelity)
    index, capacity = ctx.topology.links.index, ctx.topology.links.capacity_Bps
    for (u, v), i in index.items():
        if u.startswith("node0/nic") and v == "switch" or v.startswith("node0/nic") and u == "switch":
            ctx.network.set_link_capacity(i, capacity[i] * factor)
    return run_training(scenario, fidelity, with_baseline=False, context=ctx).breakdown_s


@pytest.mark.parametrize("fidelity", [Fidelity.ESTIMATE, Fidelity.SIMULATE])
def test_degraded_nic_links_slow_dp_and_leave_tp_alone(fidelity):
    s = simdist.load(SCENARIO)
    healthy, degraded = _breakdown(s, fidelity, 1.0), _breakdown(s, fidelity, 0.1)
    assert degraded.tp_communication == pytest.approx(healthy.tp_communication, rel=1e-9)
    # the dp ring's inter-node hops all cross node0's NICs: bandwidth-bound, so ~10x slower
    assert degraded.dp_communication > 8 * healthy.dp_communication
