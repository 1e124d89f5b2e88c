"""A custom fabric read from GraphML.

Format: an undirected graph whose vertices are fabric switches/routers, named by their GraphML id
(no '/' allowed). Vertices with the attribute `host` = true (boolean or the string "true") are machine
slots, taken in file order: the i-th host is machine i (worker nodes first, then dedicated servers);
every NIC of machine i is cabled to that vertex with the NIC's link. Edge attributes: `bandwidth` (a
unit string such as "100 Gb/s", or a number in bytes/s), `latency` ("1 us", or a number in seconds),
optional `efficiency` (0 < e <= 1) and `multiplicity` (parallel cables); missing ones take fabric.link's.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from simdist.errors import Issue, ScenarioError
from simdist.hardware.specs import FabricSpec, LinkSpec
from simdist.topology.machines import Machine, add_link, attach
from simdist.units import parse_bandwidth, parse_duration

if TYPE_CHECKING:  # networkx is imported only when a GraphML fabric is read (it costs ~0.15 s)
    import networkx as nx

    from simdist.topology.plain import LinkGraph

PATH = "cluster.fabric.graphml"


def _true(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1", "yes"))


def graphml_issues(path: str) -> "tuple[nx.Graph | None, list[Issue]]":
    """The GraphML file as an undirected graph, or None, and what is wrong with it (naming cluster.fabric.graphml):
    unreadable, edges to undeclared vertices, '/' in vertex ids."""
    import networkx as nx

    try:
        graph = nx.read_graphml(path)
        undeclared = _undeclared_endpoints(path)
    except (OSError, ValueError, SyntaxError, nx.NetworkXError) as exc:  # ParseError is a SyntaxError
        return None, [Issue(PATH, f"got {path!r}; expected a readable GraphML file ({exc})")]
    if undeclared:  # networkx silently invents such vertices, which then have no host flag and no other edges
        return None, [Issue(PATH, f"{path}: edges name vertices that no <node> declares: "
                                  f"{', '.join(repr(v) for v in undeclared[:5])}; declare each vertex")]
    bad = [str(v) for v in graph.nodes if "/" in str(v)]
    if bad:
        return None, [Issue(PATH, f"vertex ids may not contain '/': {bad[:5]}")]
    return nx.Graph(graph), []


def read_graphml(path: str) -> nx.Graph:
    """The GraphML file as an undirected graph (topology.validate, run by io/, reported what is wrong with it)."""
    graph, issues = graphml_issues(path)
    assert graph is not None, issues
    return graph


def _undeclared_endpoints(path: str) -> list[str]:
    """Edge endpoints without a <node> element, in file order."""
    import xml.etree.ElementTree as ET

    declared: set[str] = set()
    missing: list[str] = []
    ends: list[str] = []
    for _, elem in ET.iterparse(path):
        tag = elem.tag.rsplit("}", 1)[-1]
        if tag == "node":
            declared.add(elem.get("id", ""))
        elif tag == "edge":
            ends += [elem.get("source", ""), elem.get("target", "")]
    for v in ends:
        if v not in declared and v not in missing:
            missing.append(v)
    return missing


def disconnected_hosts(graph: nx.Graph) -> list[str]:
    """Host vertices that cannot reach the first host (a cut-off host would make the job unroutable)."""
    hosts = host_vertices(graph)
    if not hosts:
        return []
    import networkx as nx

    reach = nx.node_connected_component(graph, hosts[0])
    return [h for h in hosts if h not in reach]


def host_vertices(graph: nx.Graph) -> list[str]:
    """Host vertices in file order."""
    return [str(v) for v, data in graph.nodes(data=True) if _true(data.get("host", False))]


def _quantity(value: object, parse, where: str, default: float, issues: list[Issue]) -> float:
    if value is None:
        return default
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            issues.append(Issue(where, f"got {value!r}; expected a non-negative number in SI units"))
        return float(value)
    try:
        return parse(value, where)
    except ScenarioError as err:  # units.py words a unit error with its path
        issues.extend(err.issues)
        return default


def _number(value: object, where: str, expected: str, issues: list[Issue]) -> float:
    """A GraphML attribute read as a number (GraphML string attributes arrive as text)."""
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        out = float("nan")
    if out != out:
        issues.append(Issue(where, f"got {value!r}; expected {expected}"))
    return out


def edge_values(data: dict, fabric: FabricSpec, where: str) -> tuple[LinkSpec, int, list[Issue]]:
    """One GraphML edge's LinkSpec (defaults from fabric.link) and cable multiplicity, and what is wrong with them."""
    base, issues = fabric.link, []
    bw = _quantity(data.get("bandwidth"), parse_bandwidth, f"{where}.bandwidth", base.bandwidth_Bps, issues)
    lat = _quantity(data.get("latency"), parse_duration, f"{where}.latency", base.latency_s, issues)
    eff = _number(data.get("efficiency", base.efficiency), f"{where}.efficiency", "0 < efficiency <= 1", issues)
    mult = _number(data.get("multiplicity", 1), f"{where}.multiplicity", "an integer >= 1", issues)
    if not bw > 0:
        issues.append(Issue(f"{where}.bandwidth", f"got {data.get('bandwidth')!r}; expected a positive bandwidth"))
    if eff == eff and not 0 < eff <= 1:
        issues.append(Issue(f"{where}.efficiency", f"got {data.get('efficiency')!r}; expected 0 < efficiency <= 1"))
    if mult == mult and (mult < 1 or mult != int(mult)):
        issues.append(Issue(f"{where}.multiplicity", f"got {mult!r}; expected an integer >= 1"))
    if issues:
        return base, 1, issues
    link = base if (bw, lat, eff) == (base.bandwidth_Bps, base.latency_s, base.efficiency) else base.with_(
        bandwidth_Bps=bw, latency_s=lat, efficiency=eff)
    return link, int(mult), []


def edge_issues(graph: nx.Graph, fabric: FabricSpec) -> list[Issue]:
    """What is wrong with the edges' attributes, every edge (cluster.fabric.graphml[u-v].key)."""
    return [i for u, v, data in graph.edges(data=True) for i in edge_values(data, fabric, f"{PATH}[{u}-{v}]")[2]]


def build_custom(g: LinkGraph, fabric: FabricSpec, machines: list[Machine]) -> str:
    """Copy the GraphML fabric into `g` and cable machine i's NICs to the i-th host vertex."""
    src = read_graphml(fabric.graphml)
    hosts = host_vertices(src)
    assert len(hosts) >= len(machines), "topology.validate: a host vertex per machine"
    for v in src.nodes:
        g.add_node(str(v))
    for u, v, data in src.edges(data=True):
        link, mult, issues = edge_values(data, fabric, f"{PATH}[{u}-{v}]")
        assert not issues, issues
        add_link(g, str(u), str(v), link, "fabric", mult)
    for m, host in zip(machines, hosts):
        attach(g, m, host)
    g.graph["fabric"] = {"kind": "custom", "hosts": len(hosts), "file": fabric.graphml}
    return f"custom fabric from {fabric.graphml}: {src.number_of_nodes()} vertices, {len(hosts)} hosts"
