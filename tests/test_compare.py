"""Break-even analysis: where compression pays, where its encode cost or top-k's gather loses."""
from __future__ import annotations

import copy

import pytest

from simdist.compare import breakeven, format_breakeven, method_label, with_nic_bandwidth
from simdist.io.compare_input import check_breakeven, parse_methods
from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.load import load_data
from simdist.scenario import CompressionMethod, CompressionSpec

GBPS = 1e9 / 8
BASE = {
    "name": "cmp",
    "cluster": {"nodes": [{"count": 8, "gpu": "v100-sxm2-32gb", "gpus_per_node": 1, "intra_node": "pcie-gen3",
                           "nic": {"bandwidth": "25 Gb/s", "latency": "10 us", "transport": "tcp"}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": "resnet50", "batch_per_gpu": 32, "precision": "fp16"},
    "communication": {"strategy": "ring"},
    "run": {"iterations": 4, "warmup": 1},
}
DGX = {
    "name": "dgx",
    "cluster": {"nodes": [{"count": 1, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                           "nic": {"bandwidth": "200 Gb/s", "latency": "3 us", "transport": "rdma"}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"model": "resnet50", "batch_per_gpu": 64, "precision": "fp16"},
    "communication": {"strategy": "ring"},
}


def _scenario(base=BASE, **nodes):
    data = copy.deepcopy(base)
    data["cluster"]["nodes"][0].update(nodes)
    return load_data(data)


def test_compression_helps_on_10gbe_and_its_benefit_shrinks_with_bandwidth():
    bws = [1 * GBPS, 10 * GBPS, 25 * GBPS, 100 * GBPS, 400 * GBPS]
    # PCIe gen4 behind the NIC: gen3 (~13 GB/s achieved) would cap every NIC above 100 Gb/s, and the
    # last bucket's dense all_reduce would then tie PowerSGD's codec time however fast the NIC
    table = breakeven(_scenario(intra_node="pcie-gen4"), bws, parse_methods("fp16,int8,powersgd:4"))
    assert table.methods == ("none", "fp16", "int8", "powersgd:4")
    for m in table.methods[1:]:
        speedup = table.speedup(m)
        assert speedup[1] > 1.3, m  # 10 GbE
        assert all(a >= b * (1 - 1e-12) for a, b in zip(speedup, speedup[1:])), (m, speedup)
    # none gets faster with bandwidth; powersgd's fixed codec cost makes it lose on fast links
    base = table.iteration_time_s["none"]
    assert all(a >= b for a, b in zip(base, base[1:]))
    assert table.status["powersgd:4"] == "crossover"
    cross = table.breakeven_Bps["powersgd:4"]
    assert 25 * GBPS < cross < 400 * GBPS
    for bw, s in zip(bws, table.speedup("powersgd:4")):
        assert (s > 1) == (bw < cross)


def test_topk_encode_cost_loses_on_a_single_nvswitch_node():
    """The codec's encode and decode cost more than the NVSwitch transfer they save. With each .grad a view of its
    bucket: DDP's copies back into .grad after the backward would otherwise run beside top-k's decode (on the
    communication stream) and not beside anything of the uncompressed ring, a 0.3 % edge that has nothing to do
    with the codec's cost."""
    dgx = copy.deepcopy(DGX)
    dgx["communication"]["gradient_as_bucket_view"] = True
    table = breakeven(_scenario(dgx), [200 * GBPS], parse_methods("topk:0.01,fp16"))
    assert table.status["topk:0.01"] == "never"
    assert table.speedup("topk:0.01")[0] < 1
    res = simulate(load_data({**copy.deepcopy(DGX), "communication": {"compression": {"method": "topk", "ratio": 0.01}}}))
    assert res.breakdown_s.compression > res.breakdown_s.communication  # encode/decode exceed the NVSwitch transfer


@pytest.mark.parametrize("ratio, n_loses", [(0.01, True), (0.001, False)])
def test_topk_loses_at_scale_unless_the_ratio_is_small(ratio, n_loses):
    """Top-k all_gathers N k (v + i) bytes: beyond N* = 2v / (ratio (v + i)) (100 at 1 %) it would move more
    than the dense ring all_reduce, so its buckets fall back to the dense all_reduce there (no gain)."""
    methods = [CompressionSpec(CompressionMethod.TOPK, ratio=ratio)]
    small = breakeven(_scenario(count=4, gpus_per_node=8), [10 * GBPS], methods)  # 32 workers
    large = breakeven(_scenario(count=32, gpus_per_node=8), [10 * GBPS], methods)  # 256 workers
    label = method_label(methods[0])
    assert small.speedup(label)[0] > 1
    assert (large.speedup(label)[0] <= 1 + 1e-9) == n_loses


def test_simulate_fidelity_agrees_with_estimate_on_the_verdict():
    est = breakeven(_scenario(), [10 * GBPS, 100 * GBPS], parse_methods("fp16"))
    sim = breakeven(_scenario(), [10 * GBPS, 100 * GBPS], parse_methods("fp16"), fidelity="simulate")
    assert sim.fidelity == "simulate"
    for a, b in zip(est.iteration_time_s["fp16"], sim.iteration_time_s["fp16"]):
        assert a == pytest.approx(b, rel=0.05)


def test_with_nic_bandwidth_changes_only_the_nic():
    s = _scenario()
    t = with_nic_bandwidth(s, 1e9)
    assert t.cluster.node_groups[0].nic.link.bandwidth_Bps == 1e9
    assert t.cluster.node_groups[0].nic.link.efficiency == s.cluster.node_groups[0].nic.link.efficiency
    assert t.cluster.fabric == s.cluster.fabric and t.workload == s.workload


def test_parse_methods_round_trips_labels():
    specs = parse_methods("fp16, int8,topk:0.01,randomk:0.05,powersgd:4,onebit,bf16")
    assert [method_label(s) for s in specs] == ["fp16", "int8", "topk:0.01", "randomk:0.05", "powersgd:4",
                                                "onebit", "bf16"]
    assert specs[2] == CompressionSpec(CompressionMethod.TOPK, ratio=0.01)


@pytest.mark.parametrize("text", ["gzip", "topk", "topk:2", "topk:x", "fp16:3", "powersgd:0", ""])
def test_parse_methods_rejects_bad_input(text):
    with pytest.raises(ScenarioError, match="methods"):
        parse_methods(text)


def test_bad_bandwidths_are_scenario_errors():
    with pytest.raises(ScenarioError, match="bandwidths"):
        check_breakeven(_scenario(), [0.0], parse_methods("fp16"))


def test_format_and_plot(tmp_path):
    from simdist.plots import plot_breakeven

    table = breakeven(_scenario(intra_node="pcie-gen4"), [1 * GBPS, 10 * GBPS, 100 * GBPS, 400 * GBPS],
                      parse_methods("fp16,powersgd:4"))
    text = format_breakeven(table)
    assert "powersgd:4" in text and "faster below" in text and "Gb/s" in text
    d = table.to_dict()
    assert [m["method"] for m in d["methods"]] == ["none", "fp16", "powersgd:4"]
    for metric in ("speedup", "time"):
        path = tmp_path / f"be-{metric}.png"
        plot_breakeven(table, str(path), metric=metric)
        assert path.stat().st_size > 1000


def test_deterministic():
    a = breakeven(_scenario(), [10 * GBPS, 100 * GBPS], parse_methods("int8,topk:0.01"))
    b = breakeven(_scenario(), [10 * GBPS, 100 * GBPS], parse_methods("int8,topk:0.01"))
    assert a == b


def test_a_codec_that_wins_at_the_top_bandwidth_but_loses_below_is_mixed_without_a_crossing() -> None:
    from simdist.compare import _crossover

    bws = (1e9, 2e9, 4e9)
    assert _crossover(bws, (1.0, 1.0, 1.0), (0.9, 1.1, 0.95)) == (None, "mixed")
    assert _crossover(bws, (1.0, 1.0, 1.0), (1.1, 1.1, 0.95)) == (None, "mixed")
    crossing, status = _crossover(bws, (1.0, 1.0, 1.0), (0.9, 1.1, 1.1))
    assert status == "crossover" and 1e9 < crossing < 2e9


def test_side_by_side_shows_cost_mfu_and_human_units():
    from simdist.planner.side_by_side import comparison, format_comparison

    a = simulate(load_data(copy.deepcopy(BASE)), fidelity="estimate")
    b = simulate(load_data(copy.deepcopy(DGX)), fidelity="estimate")
    table = comparison([("cmp", a), ("dgx", b)])
    rows = {r["figure"]: r for r in table["rows"]}
    assert rows["mfu"]["values"] == [a.to_dict()["mfu"], b.to_dict()["mfu"]]
    assert rows["cost_per_hour_usd"]["values"][1] == b.to_dict()["cost"]["price_per_hour_usd"]
    text = format_comparison(table)
    memory = next(line for line in text.splitlines() if line.startswith("memory_per_gpu_bytes"))
    assert "GiB" in memory and "e+" not in memory  # 13.3 GiB, not 1.428e+10
    assert f"{100 * a.to_dict()['mfu']:.1f}%" in next(l for l in text.splitlines() if l.startswith("mfu"))
    assert "$" in next(l for l in text.splitlines() if l.startswith("cost_per_hour_usd"))
