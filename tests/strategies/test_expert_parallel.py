"""Expert parallelism's pieces (strategies/expert_parallel.py): Megatron-Core's expert groups, the expert load with
imbalance and capacity, the all-to-all dispatcher's calls, the uneven dispatch on the flow network against hand
calculations (one NVL72 rack, 16 HGX H100 nodes), and the experts' memory per GPU."""
from __future__ import annotations

import numpy as np
import pytest
import simpy

from simdist.collectives.all_to_all import balanced_send_bytes, with_send_bytes
from simdist.collectives.backends import nccl_candidate
from simdist.collectives.fabric import from_topology
from simdist.collectives.protocols import HopKind, costs
from simdist.collectives.schedule import Group
from simdist.io.load import load_scenario
from simdist.network.analytical import AnalyticalNetwork
from simdist.network.flows import FlowNetwork
from simdist.strategies.expert_layout import expert_groups
from simdist.strategies.expert_parallel import (A2A, EpCall, ExpertLoad, dispatch_matrix, ep_send_matrix,
                                                expert_state_bytes, moe_layer_work)
from simdist.topology.build import build_topology
from tests.collectives.test_all_to_all import HGX, NIC_Bps, NVL72, NVLINK5_Bps

SIMPLE = costs("ring", "Simple")


def test_expert_groups_are_megatrons_etp_ep_edp_over_the_stage():
    """16 ranks of a stage, ep 4, etp 2: edp 2; etp innermost (consecutive pairs), ep strides etp, edp strides 8."""
    g = expert_groups(range(16), ep=4, etp=2)
    assert g.etp[0] == (0, 1) and len(g.etp) == 8
    assert g.ep[0] == (0, 2, 4, 6) and g.ep[1] == (1, 3, 5, 7) and len(g.ep) == 4
    assert g.edp[0] == (0, 8) and len(g.edp) == 8
    assert sorted(r for grp in g.ep for r in grp) == list(range(16))
    stage = [100 + 2 * i for i in range(8)]  # any ranks, in the stage's tp x cp x dp order
    assert expert_groups(stage, ep=8).ep == (tuple(stage),)
    assert expert_groups(stage, ep=8).edp == tuple((r,) for r in stage)


def test_balanced_load_is_one_everywhere():
    load = ExpertLoad(experts=256, ep=64)
    assert load.local_experts == 4
    assert np.allclose(load.gpu_loads(), 1.0) and load.hot_gpu_factor == 1.0 and load.kept_fraction == 1.0


def test_hot_expert_load_by_hand():
    """E = ep = 8 (one expert per GPU), f = 4: the hot GPU takes 4 x its balanced share, the other seven
    (8 - 4)/7 each; E = 256 on ep 64 (4 local experts), f = 2: (2 + 3 x 254/255)/4."""
    one = ExpertLoad(8, 8, imbalance=4.0)
    assert one.hot_gpu_factor == pytest.approx(4.0)
    assert one.gpu_loads()[1:] == pytest.approx([4 / 7] * 7)
    assert one.kept_fraction == pytest.approx(1.0)
    ds = ExpertLoad(256, 64, imbalance=2.0)
    assert ds.hot_gpu_factor == pytest.approx((2 + 3 * 254 / 255) / 4)


def test_capacity_factor_pads_and_drops_to_capacity():
    """f = 4 with capacity 1.25 x the mean: every expert takes exactly 1.25 x the mean rows (the hot one's excess
    dropped, the others padded), so every GPU receives and computes 1.25 x its balanced share; 1 - (1.25 + 4)/8 of
    the routed tokens are dropped."""
    load = ExpertLoad(8, 8, imbalance=4.0, capacity_factor=1.25)
    assert load.hot_gpu_factor == pytest.approx(1.25) and load.gpu_loads() == pytest.approx([1.25] * 8)
    assert load.kept_fraction == pytest.approx((1.25 + 4.0) / 8)
    m = dispatch_matrix(800.0, load)
    assert m.sum(axis=1) == pytest.approx([800.0 * 1.25] * 8)
    assert ExpertLoad(8, 8).kept_fraction == 1.0


def test_dispatcher_calls_per_layer():
    """T = 4096 tokens, k = 8, h = 7168, bf16: one rank's dispatch buffer T k h 2 bytes; ep only: dispatch before the
    experts and combine after in forward, their transposes in backward; etp 2 adds the all-gather of the (hot)
    received rows and the reduce-scatter of the outputs, gathered etp x."""
    routed = 4096 * 8 * 7168 * 2
    w = moe_layer_work(4096, 7168, 8, 2, ExpertLoad(256, 64))
    assert [c.op.value for c in w.fwd_before] == ["all_to_all"] and w.fwd_before[0].size_bytes == routed
    assert [c.what.split(" ", 1)[1] for c in w.calls()] == [
        "dispatch all_to_all", "combine all_to_all", "combine backward all_to_all", "dispatch backward all_to_all"]
    hot = moe_layer_work(4096, 7168, 8, 2, ExpertLoad(64, 8, imbalance=2.0), etp=2)
    g = ExpertLoad(64, 8, imbalance=2.0).hot_gpu_factor
    assert [(c.op.value, c.axis) for c in hot.fwd_before] == [("all_to_all", "ep"), ("all_gather", "etp")]
    assert hot.fwd_before[1].size_bytes == pytest.approx(g * routed * 2)
    assert [(c.op.value, c.axis) for c in hot.bwd_after] == [("reduce_scatter", "etp"), ("all_to_all", "ep")]
    assert hot.compute_factor == pytest.approx(g)
    assert moe_layer_work(4096, 7168, 8, 2, ExpertLoad(8, 1), etp=1).calls() == ()  # no ep, no etp: no collective


def _scenario(tmp_path, text: str, name: str):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return load_scenario(path)


def _times(topology, group: Group, routed: float, load: ExpertLoad, combine: bool = False) -> tuple[float, float]:
    """(flow network, analytical) seconds of the dispatch (or combine) as NCCL runs it on `group`."""
    balanced = nccl_candidate("all_to_all", "ring", "Simple", routed, group, fabric=from_topology(topology, group))
    what = "experts combine all_to_all" if combine else "experts dispatch all_to_all"
    sched = with_send_bytes(balanced, group, ep_send_matrix(EpCall(A2A, "ep", routed, what, combine), load))
    return (FlowNetwork(simpy.Environment(), topology).schedule_time(sched),
            AnalyticalNetwork(topology).schedule_time(sched))


def test_balanced_dispatch_on_one_nvl72_rack_is_the_hand_calculation(tmp_path):
    """ep 72 over one NVL72 rack (one expert per GPU), 1 GB routed per GPU: 71/72 GB each way on every GPU's NVLink5
    link (720 GB/s): 1.3696 ms + launch and one NVLink hop (8.4 + 3.4 us); with_send_bytes of the balanced matrix
    is the backend's own schedule."""
    topology = build_topology(_scenario(tmp_path, NVL72, "nvl72").cluster)
    group = Group.flat(range(72), 72)
    latency = SIMPLE.base_latency_s + SIMPLE.hop_latency_s[HopKind.NVLINK]
    flow, est = _times(topology, group, 1e9, ExpertLoad(72, 72))
    assert flow == pytest.approx(latency + 71 / 72 * 1e9 / NVLINK5_Bps, rel=1e-9)
    assert est == pytest.approx(flow, rel=1e-6)
    plain = nccl_candidate("all_to_all", "ring", "Simple", 1e9, group, fabric=from_topology(topology, group))
    assert with_send_bytes(plain, group, balanced_send_bytes(1e9, 72)) == plain


def test_hot_expert_dispatch_on_one_nvl72_rack_is_bound_by_its_gpu(tmp_path):
    """f = 3 on 72 experts, one per GPU: the hot GPU receives 3/72 GB from each of 71 peers over its one NVLink5
    link: 71 x 3/72 GB / 720 GB/s (4.109 ms) + 11.8 us; the others receive (72-3)/71 of a share. The combine sends
    it back: the hot GPU's out-link carries the same, so the same time."""
    topology = build_topology(_scenario(tmp_path, NVL72, "nvl72").cluster)
    group = Group.flat(range(72), 72)
    latency = SIMPLE.base_latency_s + SIMPLE.hop_latency_s[HopKind.NVLINK]
    load = ExpertLoad(72, 72, imbalance=3.0)
    hand = latency + 71 * 3 / 72 * 1e9 / NVLINK5_Bps
    for combine in (False, True):
        flow, est = _times(topology, group, 1e9, load, combine)
        assert flow == pytest.approx(hand, rel=1e-9)
        assert est == pytest.approx(flow, rel=1e-6)


@pytest.mark.parametrize("imbalance", [1.0, 2.5])
def test_dispatch_on_16_hgx_h100_nodes_is_the_hand_calculation(tmp_path, imbalance):
    """ep 128 over 16 HGX H100 nodes (one 400 Gb/s NIC per GPU, PXN), 256 experts (2 per GPU), R = 1 GB routed per
    GPU. Balanced: every rail-j NIC carries 15 nodes x 8 GPUs x R/128 = 15/16 R each way at 46 GB/s: 20.38 ms +
    launch and one network hop. With the hot expert at f x the mean on GPU 0 (node 0, rail 0), GPU 0 takes
    g = (f + (256 - f)/255)/2 of a share from everyone: node 0's rail-0 NIC receives 120 g R/128, the bottleneck;
    g = 1.7451 at f = 2.5: 35.57 ms."""
    topology = build_topology(_scenario(tmp_path, HGX.format(nodes=16), "hgx16").cluster)
    group = Group.flat(range(128), 8)
    load = ExpertLoad(256, 128, imbalance=imbalance)
    g = (imbalance + (256 - imbalance) / 255) / 2
    assert load.hot_gpu_factor == pytest.approx(g)
    latency = SIMPLE.base_latency_s + SIMPLE.hop_latency_s[HopKind.NET]
    hand = latency + 120 * g * 1e9 / 128 / NIC_Bps
    flow, est = _times(topology, group, 1e9, load)
    assert flow == pytest.approx(hand, rel=1e-9)
    assert est == pytest.approx(flow, rel=1e-6)
    if imbalance > 1:
        balanced_flow, _ = _times(topology, group, 1e9, ExpertLoad(256, 128))
        assert flow / balanced_flow == pytest.approx(hand / (latency + 120 * 1e9 / 128 / NIC_Bps), rel=1e-9)


def test_expert_memory_per_gpu_by_hand():
    """Ψ = 10e9 expert parameters on a stage, ep 64, etp 1, edp 2, bf16 with Adam and fp32 gradients: each GPU
    holds Ψ/64 experts' weights (2 bytes) and gradients (4), and with the distributed optimizer (zero 1) 1/edp of
    their fp32 master weights and two moments (12 bytes); without it all 12."""
    psi = 10e9
    e = expert_state_bytes(psi, ep=64, etp=1, edp=2, precision="bf16", optimizer="adam", zero=1)
    assert e.params == pytest.approx(psi / 64)
    assert (e.weights_bytes, e.gradients_bytes) == pytest.approx((2 * psi / 64, 4 * psi / 64))
    assert e.optimizer_states_bytes == pytest.approx(12 * psi / 64 / 2)
    plain = expert_state_bytes(psi, ep=64, etp=1, edp=2, precision="bf16", optimizer="adam", zero=0)
    assert plain.optimizer_states_bytes == pytest.approx(12 * psi / 64)
    split = expert_state_bytes(psi, ep=16, etp=4, edp=2, precision="bf16", optimizer="adam", zero=1)
    assert split.params == pytest.approx(psi / 64) and split.total_bytes == pytest.approx(e.total_bytes)


def _mixtral_plan():
    from simdist.strategies.tensor_parallel import tensor_parallel_plan
    from simdist.workload.catalog import get_model

    gpu = load_scenario("scenarios/presets/megatron-gpt3-175b.yaml").cluster.node_groups[0].gpu
    model = get_model("mixtral-8x7b", 4096)
    return model, gpu, tensor_parallel_plan(model, gpu, 1, "bf16", 1, accumulation_bytes=4)


def test_expert_parallel_plan_splits_the_experts_and_adds_the_dispatcher():
    """Mixtral 8x7B (8 experts, top-2, h 4096) at 4,096 tokens: ep 1 leaves the tp plan as it was; ep 8 holds one
    expert (1/8 of the weights) per GPU, computes the same active work (its grouped GEMM one expert's) and adds the
    dispatch and combine of T k h x 2 bytes = 67.1 MB each way per layer; a hot expert at 2 x the mean (one per
    GPU) doubles the expert layer's compute."""
    from simdist.strategies.expert_parallel import expert_parallel_plan

    model, gpu, tpp = _mixtral_plan()
    e = next(i for i, x in enumerate(model.layers) if x.experts)
    same, works = expert_parallel_plan(tpp, model, gpu, "bf16", ep=1, etp=1, tokens=4096, hidden=4096,
                                       accumulation_bytes=4)
    assert same.layers[e].time == tpp.layers[e].time and works[0].calls() == ()
    ep8, works = expert_parallel_plan(tpp, model, gpu, "bf16", ep=8, etp=1, tokens=4096, hidden=4096,
                                      accumulation_bytes=4)
    x = ep8.layers[e]
    assert x.shard.params == model.layers[e].params // 8 and x.shard.experts == 1
    assert x.shard.fwd_flops == pytest.approx(model.layers[e].fwd_flops)
    assert [c.size_bytes for c in x.collectives] == [4096 * 2 * 4096 * 2] * 4
    assert [c.axis for c in x.collectives] == ["ep", "epc", "ep", "epc"]
    assert len(works) == 32 and ep8.layers[e - 1].time == tpp.layers[e - 1].time  # the router unchanged at tp 1
    hot, _ = expert_parallel_plan(tpp, model, gpu, "bf16", ep=8, etp=1, tokens=4096, hidden=4096, imbalance=2.0,
                                  accumulation_bytes=4)
    assert hot.layers[e].shard.fwd_flops == pytest.approx(2 * model.layers[e].fwd_flops)
    assert 1.9 < hot.layers[e].time.fwd_s / x.time.fwd_s < 2.0  # the launches do not double


def test_stage_expert_groups_follow_the_dense_coordinates_not_the_rank_numbers():
    """8 GPUs, tp 2 x dp 4, placement dp,tp,pp (dp innermost: rank = dp + 4 tp). Megatron-Core orders a stage's ranks
    tp fastest, then cp, then dp: (dp 0, tp 0) = 0, (dp 0, tp 1) = 4, (dp 1, tp 0) = 1, ...; ep 4 x etp 1 then
    groups positions 0-3 and 4-7, i.e. ranks (0, 4, 1, 5) and (2, 6, 3, 7), and edp pairs position p with p + 4."""
    from simdist.layout import build_layout
    from simdist.strategies.expert_layout import stage_expert_groups

    layout = build_layout([0] * 8, dp=4, tp=2, pp=1, order="dp,tp,pp")
    got = {name: groups for name, _, groups in stage_expert_groups(layout, 0, list(range(8)), 4, 1, True)}
    assert got["tp.s0.ep"] == ((0, 4, 1, 5), (2, 6, 3, 7)) and got["tp.s0.epc"] == got["tp.s0.ep"]
    assert got["dp.s0.edp"] == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert got["tp.s0.etp"] == tuple((r,) for r in (0, 1, 2, 3, 4, 5, 6, 7))


@pytest.mark.parametrize("kind", ["ep", "epc"])
def test_uneven_all_to_all_across_two_hgx_nodes_by_hand(tmp_path, kind):
    """ep 16 over 2 HGX H100 nodes (PXN), 16 experts, f = 3 (one expert per GPU: g = 3, the others 13/15 of a
    share), R = 1 GB per GPU. Dispatch: node 1's rail-0 NIC carries its 8 GPUs' sends to GPU 0, 8 g R/16. Combine:
    GPU 0 sends g R/16 to each GPU of node 1 through the NIC on that GPU's rail, which also carries the 7 other
    node-0 GPUs' r R/16: (g + 7 r) R/16, well below the dispatch. The busy-link closed form (estimate's time of an
    expert all-to-all) is the flow network's; the analytical network's static sharing (each link split by its flow
    count) charges the combine's NIC as if all its flows were the hot one's."""
    from simdist.strategies.expert_layout import busy_link_time_s, uneven_all_to_all

    topology = build_topology(_scenario(tmp_path, HGX.format(nodes=2), "hgx2").cluster)
    group = Group.flat(range(16), 8)
    load = ExpertLoad(16, 16, imbalance=3.0)
    g, r = 3.0, 13 / 15
    balanced = nccl_candidate("all_to_all", "ring", "Simple", 1e9, group, fabric=from_topology(topology, group))
    sched = uneven_all_to_all(balanced, group, kind, load)
    latency = SIMPLE.base_latency_s + SIMPLE.hop_latency_s[HopKind.NET]
    hand = latency + (8 * g if kind == "ep" else g + 7 * r) * 1e9 / 16 / NIC_Bps
    flow = FlowNetwork(simpy.Environment(), topology).schedule_time(sched)
    assert flow == pytest.approx(hand, rel=1e-9)
    assert busy_link_time_s(AnalyticalNetwork(topology), sched) == pytest.approx(flow, rel=1e-12)
    static = AnalyticalNetwork(topology).schedule_time(sched)
    assert static == pytest.approx(flow, rel=1e-9) if kind == "ep" else static > 2 * flow
