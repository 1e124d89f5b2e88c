"""TCP's per-stream cap (LinkSpec.stream_cap_Bps: links.yaml tcp `stream_cap`, or `nic.stream_cap`): a
connection of k streams (Step.streams) moves at most k x the cap, on top of any per-flow cap; inline and
catalog NICs at one rate get the same cap; the backends run 1 (textbook, gloo) or 2 (nccl) streams."""
from __future__ import annotations

import networkx as nx
import pytest

from simdist.collectives.schedule import Schedule, Step, Transfer
from simdist.errors import ScenarioError
from simdist.hardware.specs import LinkSpec
from simdist.io.catalog import links, transport_default
from simdist.io.load import load_scenario
from simdist.network.analytical import AnalyticalNetwork
from simdist.topology.graph import Topology
from tests.network.topos import one_step

STREAM = 25e9 / 8  # links.yaml's tcp stream_cap, B/s
TWO_NODES = {
    "name": "two-nodes-tcp",
    "cluster": {"nodes": [{"count": 2, "gpu": "v100-sxm2-32gb", "gpus_per_node": 1, "intra_node": "pcie-gen3",
                           "nic": {"bandwidth": "100 Gb/s", "latency": "5 us", "transport": "tcp"}}],
                "fabric": {"topology": "single_switch"}},
    "workload": {"benchmark": {"op": "all_reduce", "sizes": ["1 GB"]}},
    "communication": {"strategy": "ring"},
    "run": {"fidelity": "simulate"},
}


def _load(tmp_path, **nic):
    import copy

    import yaml

    d = copy.deepcopy(TWO_NODES)
    d["cluster"]["nodes"][0]["nic"].update(nic)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def _busbw(path, *overrides: str) -> float:
    from simdist import api

    result = api.simulate(api.load(str(path), list(overrides))).to_dict()
    return result["collectives"][0]["busbw_GBps"] * 1e9


def test_the_catalog_tcp_default_carries_the_esnet_figure():
    assert transport_default("tcp").stream_cap_Bps == pytest.approx(STREAM)
    assert transport_default("rdma").stream_cap_Bps is None


@pytest.mark.parametrize("rate, capped", [("10 Gb/s", False), ("25 Gb/s", False), ("40 Gb/s", True),
                                          ("100 Gb/s", True)])
def test_inline_and_catalog_nics_at_one_rate_get_the_same_cap(tmp_path, rate, capped):
    inline = load_scenario(_load(tmp_path, bandwidth=rate)).cluster.node_groups[0].nic.link
    key = {"10 Gb/s": "eth-10g", "25 Gb/s": "eth-25g", "40 Gb/s": "eth-40g", "100 Gb/s": "eth-100g"}[rate]
    d = dict(TWO_NODES, cluster={**TWO_NODES["cluster"], "nodes": [{**TWO_NODES["cluster"]["nodes"][0], "nic": key}]})
    import yaml

    (tmp_path / "k.yaml").write_text(yaml.safe_dump(d))
    catalog = load_scenario(tmp_path / "k.yaml").cluster.node_groups[0].nic.link
    assert inline.stream_cap_Bps == catalog.stream_cap_Bps == (pytest.approx(STREAM) if capped else None)
    assert links()[key].stream_cap_Bps is None  # the catalog entry itself: the cap is the resolved NIC's


def test_rdma_nics_have_none_and_refuse_the_key(tmp_path):
    path = _load(tmp_path, transport="rdma")
    assert load_scenario(path).cluster.node_groups[0].nic.link.stream_cap_Bps is None
    with pytest.raises(ScenarioError, match=r"cluster.nodes.0.nic.stream_cap.*10 Gb/s.*transport tcp.*'rdma'"):
        load_scenario(_load(tmp_path, transport="rdma", stream_cap="10 Gb/s"))


def test_one_stream_rings_run_at_the_cap_nccl_at_its_proxy_threads(tmp_path):
    """Two nodes, one GPU each, 100 GbE: a ring's busbw is one connection's rate. textbook and gloo run one
    stream per neighbour (25 Gb/s). nccl without helper threads (NCCL's default off AWS and GCP) copies what a rank
    sends and what it receives in its one proxy thread: half a stream each way (12.5 Gb/s); with 2 helper threads
    per connection (NCCL_SOCKET_NTHREADS=2, AWS's default) each connection has two (50 Gb/s, under the NIC's
    0.55 x 100 = 55 Gb/s)."""
    path = _load(tmp_path)
    lifted = "cluster.nodes.0.nic.stream_cap=100 Gb/s"
    assert _busbw(path) == pytest.approx(STREAM, rel=0.02)
    assert _busbw(path, "communication.backend=nccl") == pytest.approx(STREAM / 2, rel=0.03)
    threads = ("communication.backend=nccl", "communication.nccl_socket_threads=2")
    assert _busbw(path, *threads) == pytest.approx(2 * STREAM, rel=0.03)
    # lifted: the NIC's aggregate efficiency binds again
    assert _busbw(path, lifted) == pytest.approx(100e9 / 8 * 0.55, rel=0.02)
    # gloo also reduces on the host (host_reduce.py), so it is slower still, and faster without the cap
    gloo, gloo_lifted = _busbw(path, "communication.backend=gloo"), _busbw(path, "communication.backend=gloo", lifted)
    assert gloo < STREAM < gloo_lifted


def test_on_nodes_of_several_gpus_one_rank_sends_and_another_receives(tmp_path):
    """Two nodes of 4 GPUs on 100 GbE: NCCL's ring leaves a node at one GPU and enters it at another, so each
    boundary rank's proxy thread moves one direction only and the ring runs at a whole stream (25 Gb/s), where two
    nodes of one GPU each get half (the same rank sends and receives)."""
    import copy

    import yaml

    d = copy.deepcopy(TWO_NODES)
    d["cluster"]["nodes"][0]["gpus_per_node"] = 4
    path = tmp_path / "four.yaml"
    path.write_text(yaml.safe_dump(d))
    assert _busbw(path, "communication.backend=nccl") == pytest.approx(STREAM, rel=0.03)
    assert _busbw(_load(tmp_path), "communication.backend=nccl") == pytest.approx(STREAM / 2, rel=0.03)


def test_a_per_flow_cap_below_the_stream_cap_binds(tmp_path):
    assert _busbw(_load(tmp_path, flow_cap="5 Gb/s")) == pytest.approx(5e9 / 8, rel=0.02)


def test_the_cap_is_reported(tmp_path):
    from simdist.topology.summary import link_assumptions

    nic = link_assumptions(load_scenario(_load(tmp_path)).cluster)["nic"][0]
    assert nic["stream_cap_Bps"] == pytest.approx(STREAM)


def test_streams_multiply_the_cap_in_the_network_model():
    g = nx.Graph()
    link = LinkSpec(10e9, 0.0, 1.0, transport="tcp", stream_cap_Bps=1e9)
    for v in ("h0", "h1"):
        g.add_edge(v, "switch", link=link, kind="nic")
    topo = Topology(g, ("h0", "h1"), (0, 1), 2)
    one = one_step([(0, 1, 1e9)])
    four = one.with_streams(4)
    net = AnalyticalNetwork(topo)
    assert net.schedule_time(one) == pytest.approx(1.0)
    assert net.schedule_time(four) == pytest.approx(0.25)
    assert hash(Step((Transfer(0, 1, 1e9),))) != hash(Step((Transfer(0, 1, 1e9),), streams=4))


@pytest.mark.parametrize("backend, requested, streams, shared", [
    ("nccl", "ring", 1, True), ("nccl", "hierarchical", 1, True), ("nccl", "ps", 1, False),
    ("textbook", "ring", 1, False), ("textbook", "hierarchical", 1, False), ("gloo", "ring", 1, False)])
def test_which_schedules_share_a_proxy_thread(backend, requested, streams, shared):
    from simdist.collectives.backends import build_backend_schedule
    from simdist.collectives.schedule import Group

    group = Group.flat(range(8), 4)
    sched = build_backend_schedule(backend, "all_reduce", 64e6, group, requested=requested,
                                   servers=(8,) if requested == "ps" else ())
    assert {(s.streams, s.shared_thread) for chain in sched.chains for s in chain} == {(streams, shared)}


def test_a_shared_thread_splits_the_stream_cap_over_a_ranks_socket_transfers():
    """Hand calculation: rank 0 sends to 1 and 2 in one step, one thread copying both: each moves at half the
    1 GB/s stream cap, so 1 GB each takes 2 s; rank 2 -> 3 alone in the same step keeps the whole cap but its
    lockstep step waits for the slowest member."""
    g = nx.Graph()
    link = LinkSpec(10e9, 0.0, 1.0, transport="tcp", stream_cap_Bps=1e9)
    for v in ("h0", "h1", "h2", "h3"):
        g.add_edge(v, "switch", link=link, kind="nic")
    topo = Topology(g, ("h0", "h1", "h2", "h3"), (0, 1, 2, 3), 4)
    net = AnalyticalNetwork(topo)
    both = Step((Transfer(0, 1, 1e9), Transfer(0, 2, 1e9)), lockstep=False, shared_thread=True)
    assert net.schedule_time(Schedule("all_reduce", "x", 1e9, ((both,),))) == pytest.approx(2.0)
    alone = Step((Transfer(2, 3, 1e9),), lockstep=False, shared_thread=True)
    assert net.schedule_time(Schedule("all_reduce", "x", 1e9, ((alone,),))) == pytest.approx(1.0)
