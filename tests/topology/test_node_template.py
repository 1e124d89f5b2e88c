"""A stamped node interior (NodeTemplate) leaves the graph exactly as building the node would."""
import networkx as nx
import pytest

from simdist.topology.build import build_topology
from simdist.topology.intranode import NodeTemplate, add_node_interior
from tests.topology.factory import DGX1_P100, DGX1_V100, DGX_A100, PAIRS, PCIE_BOX, UNIFORM, cluster, group


def _state(g: nx.Graph) -> tuple:
    """Everything order-sensitive about a graph: nodes with attributes, each adjacency in order."""
    return (list(g.nodes(data=True)), [(u, list(nbrs.items())) for u, nbrs in g.adj.items()])


@pytest.mark.parametrize("intra", [UNIFORM, DGX_A100, DGX1_V100, DGX1_P100, PAIRS, PCIE_BOX], ids=lambda i: i.key)
@pytest.mark.parametrize("nics", [1, 4, 8])
def test_stamp_equals_build(intra, nics):
    spec = group(3, intra, nics=nics)
    built, stamped = nx.Graph(), nx.Graph()
    for g in (built, stamped):
        g.add_node("leaf0")  # something before the nodes, as a fabric may add
    expected = [add_node_interior(built, n, spec) for n in range(3)]
    template = NodeTemplate.record(spec, "cluster.nodes.0")
    got = [template.stamp(stamped, n) for n in range(3)]
    assert got == expected
    assert _state(stamped) == _state(built)
    assert any("rail" in d for _, d in stamped.nodes(data=True))


def test_topology_links_numbered_as_before():
    """A whole fat tree built with templates numbers its directed links node by node, as before."""
    topo = build_topology(cluster(4, "fat_tree", DGX_A100, nics=8, nodes_per_leaf=2))
    g = nx.Graph()
    for n in range(4):
        add_node_interior(g, n, group(4, DGX_A100, nics=8))
    interior = [e for e in topo.links.ends if e[0].startswith("node") and e[1].startswith("node")]
    expected = [(a, b) for u, v in g.edges() for a, b in ((u, v), (v, u))]
    assert interior == expected


@pytest.mark.parametrize("routing", ["ecmp", "dmodk"])
def test_router_paths_same_with_and_without_template_hints(routing):
    """The router's shortcut for stamped machines (one template per node group) changes no path."""
    from simdist.topology.routing import Router

    spec = cluster(6, "fat_tree", DGX_A100, nics=4, nodes_per_leaf=2, routing=routing)
    topo = build_topology(spec)
    assert topo.graph.graph["node_templates"]
    hinted, plain = Router(topo), Router(topo)
    plain._stamped = {}
    n = len(topo.endpoints)
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    assert [hinted.path(a, b, k) for a, b in pairs for k in (0, 1)] == \
           [plain.path(a, b, k) for a, b in pairs for k in (0, 1)]

