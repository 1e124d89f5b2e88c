"""Parameter servers as frameworks run them: local (node) aggregation sends one gradient's worth per node
through the NICs, servers may update in host memory, and the presets say what their framework does."""
from __future__ import annotations

import copy

import pytest

from simdist.collectives.schedule import CollectiveOp
from simdist.engine.context import build_context
from simdist.engine.simulation import simulate
from simdist.errors import ScenarioError
from simdist.io.load import load_data, load_scenario
from simdist.scenario import Fidelity

S = 64e6
BASE = {"cluster": {"nodes": [{"count": 4, "gpu": "v100-sxm2-16gb", "gpus_per_node": 4, "intra_node": "pcie-gen3",
                               "nic": "ib-edr"}]},
        "workload": {"model": "resnet50", "batch_per_gpu": 16},
        "communication": {"strategy": "ps", "ps": {"servers": 2, "placement": "dedicated"}},
        "run": {"iterations": 3, "warmup": 1}}


def _scenario(**ps):
    d = copy.deepcopy(BASE)
    d["communication"]["ps"].update(ps)
    return load_data(d)


def _nic_bytes(aggregation: str, placement: str = "dedicated") -> dict[str, tuple[float, float]]:
    """Bytes out of and into each worker node's NIC for one PS all-reduce of S, from the estimate
    network's per-link accounting."""
    s = _scenario(aggregation=aggregation, placement=placement)
    ctx = build_context(s, Fidelity.ESTIMATE)
    sched = ctx.schedule(CollectiveOp.ALL_REDUCE, S)
    ctx.env.process(ctx.network.run(ctx.env, sched))
    ctx.env.run()
    out = {}
    links = ctx.topology.links
    for i, (u, v) in enumerate(links.ends):
        if u.startswith("node") and u.endswith("/nic0") and "/" not in v:  # NIC -> fabric switch
            node = u.split("/")[0]
            back = links.index[(v, u)]
            out[node] = (float(ctx.network.link_bytes[i]), float(ctx.network.link_bytes[back]))
    return out


def test_node_aggregation_pushes_and_pulls_one_gradient_per_node():
    gpu = _nic_bytes("gpu")
    node = _nic_bytes("node")
    assert sorted(node) == [f"node{n}" for n in range(4)]
    for n in node:
        assert node[n][0] == pytest.approx(S) and node[n][1] == pytest.approx(S)  # one push out, one pull in
        assert gpu[n][0] == pytest.approx(4 * S) and gpu[n][1] == pytest.approx(4 * S)  # one per GPU


def test_node_aggregation_with_colocated_servers_keeps_own_node_traffic_inside():
    node = _nic_bytes("node", "colocated")
    # servers on node0 and node2 (one per node first, evenly spread): a node with a server pushes only the
    # other server's half and serves its own half's pulls to the 3 other nodes (S/2 + 3 S/2 out); a node
    # without pushes both halves (S out, S in)
    assert node["node0"] == (pytest.approx(2 * S), pytest.approx(2 * S))
    assert node["node1"] == (pytest.approx(S), pytest.approx(S))


def test_node_aggregation_is_faster_when_nics_limit_and_equal_with_one_gpu_per_node():
    t = {a: simulate(_scenario(aggregation=a), "estimate").iteration_time_s for a in ("gpu", "node")}
    assert t["node"] < t["gpu"]
    one = copy.deepcopy(BASE)
    one["cluster"]["nodes"][0]["gpus_per_node"] = 1
    times = []
    for a in ("gpu", "node"):
        one["communication"]["ps"]["aggregation"] = a
        times.append(simulate(load_data(one), "simulate").iteration_time_s)
    assert times[0] == pytest.approx(times[1], rel=1e-9)


def test_estimate_equals_simulate_for_node_aggregation():
    s = _scenario(aggregation="node")
    assert simulate(s, "estimate").iteration_time_s == pytest.approx(simulate(s, "simulate").iteration_time_s,
                                                                      rel=1e-6)


def test_cpu_server_update_streams_host_memory():
    from simdist.compute import optimizer_step_time
    from simdist.hardware.specs import HOST_CPU_SERVER
    from simdist.strategies.plan import build_plan

    gpu, cpu = build_plan(_scenario(server="gpu")), build_plan(_scenario(server="cpu"))
    for a, b in zip(gpu.buckets, cpu.buckets):
        assert b.server_delay_s > a.server_delay_s
    shard = cpu.buckets[0].bucket.elems / 2
    assert cpu.buckets[0].server_delay_s == pytest.approx(
        optimizer_step_time(int(shard), HOST_CPU_SERVER, "sgd", "fp32", grad_dtype="fp32"))


def test_node_aggregation_refused_with_async_and_mixed_nodes():
    d = copy.deepcopy(BASE)
    d["communication"]["ps"]["aggregation"] = "node"
    d["training"] = {"sync": "asp"}
    with pytest.raises(ScenarioError, match="communication.ps.aggregation"):
        simulate(load_data(d))
    d = copy.deepcopy(BASE)
    d["communication"]["ps"]["aggregation"] = "node"
    d["cluster"]["nodes"].append({"count": 1, "gpu": "v100-sxm2-16gb", "gpus_per_node": 2,
                                  "intra_node": "pcie-gen3", "nic": "ib-edr"})
    with pytest.raises(ScenarioError, match="communication.ps.aggregation"):
        load_data(d)


@pytest.mark.parametrize("preset,aggregation,server", [("tf-parameter-server", "node", "cpu"),
                                                       ("mxnet-kvstore", "node", "cpu")])
def test_presets_run_ps_as_their_framework_does(preset, aggregation, server):
    s = load_scenario(f"scenarios/presets/{preset}.yaml")
    assert (s.communication.ps_aggregation, s.communication.ps_server) == (aggregation, server)


def test_cluster_summary_counts_dedicated_servers():
    from simdist.report import cluster_summary

    summary, _ = cluster_summary(load_scenario("scenarios/presets/tf-parameter-server.yaml"))
    assert summary["servers"] == 4 and summary["nodes"] == 16
    summary, _ = cluster_summary(load_scenario("scenarios/presets/mxnet-kvstore.yaml"))
    assert summary["servers"] == 0 and summary["ps servers"].startswith("8 colocated")  # no extra machines
