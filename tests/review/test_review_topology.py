"""Bug-hunt regressions in topology: bisection of fat trees with one leaf or one pod; GraphML attribute parsing."""
from __future__ import annotations

import pytest

from simdist.topology.bisection import bisection_bandwidth_Bps, max_flow_bisection_Bps
from simdist.topology.build import build_topology
from simdist.topology.validate import validate_cluster
from tests.topology.factory import IB200, UNIFORM, cluster


@pytest.mark.parametrize("kw", [dict(nodes_per_leaf=8),  # one leaf: its uplinks are not cut
                                dict(nodes_per_leaf=2, levels=3, leaves_per_pod=4),  # one pod
                                dict(nodes_per_leaf=8, levels=3)])
def test_fat_tree_with_a_single_leaf_or_pod_is_bounded_by_the_hosts(kw):
    # both used to report 0 b/s (floor(1 / 2) x uplink capacity)
    t = build_topology(cluster(8, "fat_tree", UNIFORM, gpus=1, **kw))
    assert bisection_bandwidth_Bps(t) == pytest.approx(4 * IB200.effective_Bps)
    assert max_flow_bisection_Bps(t) == pytest.approx(bisection_bandwidth_Bps(t))


GRAPHML = """<?xml version="1.0" encoding="UTF-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="host" for="node" attr.name="host" attr.type="boolean"/>
  <key id="a" for="edge" attr.name="{attr}" attr.type="string"/>
  <graph edgedefault="undirected">
    <node id="s0"/><node id="s1"/>
    <node id="h0"><data key="host">true</data></node>
    <node id="h1"><data key="host">true</data></node>
    <edge source="s0" target="s1"><data key="a">{value}</data></edge>
    <edge source="h0" target="s0"><data key="a">{value}</data></edge>
    <edge source="h1" target="s1"><data key="a">{value}</data></edge>
  </graph>
</graphml>
"""


@pytest.mark.parametrize("attr,value,ok", [("efficiency", "abc", False), ("efficiency", "0.5", True),
                                           ("multiplicity", "x", False), ("multiplicity", "2.5", False),
                                           ("multiplicity", "2", True)])
def test_graphml_text_attributes_are_checked_not_crashed_on(tmp_path, attr, value, ok):
    path = tmp_path / "fab.graphml"
    path.write_text(GRAPHML.format(attr=attr, value=value))
    c = cluster(2, "custom", UNIFORM, gpus=1, nics=4, graphml=str(path))  # the fabric cables are the cut
    if ok:
        t = build_topology(c)
        expect = IB200.effective_Bps * (2 if attr == "multiplicity" else 1)
        expect = min(expect, IB200.bandwidth_Bps * 0.5) if attr == "efficiency" else expect
        assert max_flow_bisection_Bps(t) == pytest.approx(expect)
    else:  # topology.validate (run by io/ on every load) names the edge's key; the build asserts what io/ checked
        assert validate_cluster(c)[0].path == f"cluster.fabric.graphml[s0-s1].{attr}"
        with pytest.raises(AssertionError, match=rf"cluster\.fabric\.graphml\[s0-s1\]\.{attr}"):
            build_topology(c)
