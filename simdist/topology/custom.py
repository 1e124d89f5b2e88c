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


def read_graphml(path: str | None) -> nx.Graph:
    """The GraphML file as an undirected graph, or a ScenarioError naming cluster.fabric.graphml."""
    if not path:
        raise ScenarioError.bad_value(PATH, path, "the path of a GraphML file for topology custom")
    import networkx as nx

    try:
        graph = nx.read_graphml(path)
        undeclared = _undeclared_endpoints(path)
    except (OSError, ValueError, SyntaxError, nx.NetworkXError) as exc:  # ParseError is a SyntaxError
        raise ScenarioError.bad_value(PATH, path, f"a readable GraphML file ({exc})") from exc
    if undeclared:  # networkx silently invents such vertices, which then have no host flag and no other edges
        raise ScenarioError(Issue(PATH, f"{path}: edges name vertices that no <node> declares: "
                                        f"{', '.join(repr(v) for v in undeclared[:5])}; declare each vertex"))
    return nx.Graph(graph)


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


def _quantity(value: object, parse, where: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ScenarioError.bad_value(where, value, "a non-negative number in SI units")
        return float(value)
    return parse(value, where)


def _number(value: object, where: str, expected: str) -> float:
    """A GraphML attribute read as a number (GraphML string attributes arrive as text)."""
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ScenarioError.bad_value(where, value, expected) from None
    if out != out:
        raise ScenarioError.bad_value(where, value, expected)
    return out


def edge_link(data: dict, fabric: FabricSpec, where: str) -> LinkSpec:
    """The LinkSpec of one GraphML edge, defaults from fabric.link."""
    base = fabric.link
    bw = _quantity(data.get("bandwidth"), parse_bandwidth, f"{where}.bandwidth", base.bandwidth_Bps)
    lat = _quantity(data.get("latency"), parse_duration, f"{where}.latency", base.latency_s)
    eff = _number(data.get("efficiency", base.efficiency), f"{where}.efficiency", "0 < efficiency <= 1")
    if bw <= 0:
        raise ScenarioError.bad_value(f"{where}.bandwidth", data.get("bandwidth"), "a positive bandwidth")
    if not 0 < eff <= 1:
        raise ScenarioError.bad_value(f"{where}.efficiency", data.get("efficiency"), "0 < efficiency <= 1")
    if (bw, lat, eff) == (base.bandwidth_Bps, base.latency_s, base.efficiency):
        return base
    return base.with_(bandwidth_Bps=bw, latency_s=lat, efficiency=eff)


def build_custom(g: LinkGraph, fabric: FabricSpec, machines: list[Machine]) -> str:
    """Copy the GraphML fabric into `g` and cable machine i's NICs to the i-th host vertex."""
    src = read_graphml(fabric.graphml)
    bad = [str(v) for v in src.nodes if "/" in str(v)]
    if bad:
        raise ScenarioError(Issue(PATH, f"vertex ids may not contain '/': {bad[:5]}"))
    hosts = host_vertices(src)
    if len(hosts) < len(machines):
        raise ScenarioError(Issue(PATH, f"{fabric.graphml} has {len(hosts)} host vertices; "
                                        f"expected at least {len(machines)} (one per machine)"))
    for v in src.nodes:
        g.add_node(str(v))
    for u, v, data in src.edges(data=True):
        where = f"{PATH}[{u}-{v}]"
        mult = _number(data.get("multiplicity", 1), f"{where}.multiplicity", "an integer >= 1")
        if mult < 1 or mult != int(mult):
            raise ScenarioError.bad_value(f"{where}.multiplicity", mult, "an integer >= 1")
        add_link(g, str(u), str(v), edge_link(data, fabric, where), "fabric", int(mult))
    for m, host in zip(machines, hosts):
        attach(g, m, host)
    g.graph["fabric"] = {"kind": "custom", "hosts": len(hosts), "file": fabric.graphml}
    return f"custom fabric from {fabric.graphml}: {src.number_of_nodes()} vertices, {len(hosts)} hosts"
