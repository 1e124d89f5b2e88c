"""validate_cluster: every problem that would stop a cluster being built, as Issues with YAML paths.

Never raises: the scenario loader reports all issues at once (`simdist check`).
"""
from __future__ import annotations

import math
import os

from simdist.errors import Issue
from simdist.hardware.specs import ClusterSpec, FabricSpec, IntraNodeLayout, LinkSpec, TopologyKind
from simdist.topology.custom import disconnected_hosts, edge_issues, graphml_issues, host_vertices
from simdist.topology.direct import NDIMS

_NEEDS_PCIE = (IntraNodeLayout.CUBE_MESH, IntraNodeLayout.NVLINK_PAIRS, IntraNodeLayout.PCIE, IntraNodeLayout.FULL_MESH)

MIN_OVERSUBSCRIPTION = 0.01  # leaf downlink / uplink capacity; below it (uplinks over 100x the downlinks) no cabling



def _int_at_least(value: object, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _link_issues(link: object, path: str) -> list[Issue]:
    if not isinstance(link, LinkSpec):
        return [Issue(path, f"got {link!r}; expected a link spec")]
    out = []
    if not (isinstance(link.bandwidth_Bps, (int, float)) and math.isfinite(link.bandwidth_Bps) and link.bandwidth_Bps > 0):
        out.append(Issue(f"{path}.bandwidth", f"got {link.bandwidth_Bps!r}; expected a positive bandwidth"))
    if not (isinstance(link.latency_s, (int, float)) and math.isfinite(link.latency_s) and link.latency_s >= 0):
        out.append(Issue(f"{path}.latency", f"got {link.latency_s!r}; expected a non-negative duration"))
    if not (isinstance(link.efficiency, (int, float)) and 0 < link.efficiency <= 1):
        out.append(Issue(f"{path}.efficiency", f"got {link.efficiency!r}; expected 0 < efficiency <= 1"))
    return out


def _group_issues(group: object, p: str) -> list[Issue]:
    out: list[Issue] = []
    if not _int_at_least(getattr(group, "count", None), 1):
        out.append(Issue(f"{p}.count", f"got {getattr(group, 'count', None)!r}; expected an integer >= 1"))
    gpn = getattr(group, "gpus_per_node", None)
    if not _int_at_least(gpn, 1):
        out.append(Issue(f"{p}.gpus_per_node", f"got {gpn!r}; expected an integer >= 1"))
        gpn = None
    intra = getattr(group, "intra_node", None)
    ip = f"{p}.intra_node"
    try:
        layout = IntraNodeLayout(intra.layout)
    except (ValueError, AttributeError):
        out.append(Issue(ip, f"got {intra!r}; expected an intra-node spec with a layout"))
        layout = None
    if layout is not None:
        out += _link_issues(intra.gpu_link, f"{ip}.gpu_link")
        if intra.pcie_link is not None:
            out += _link_issues(intra.pcie_link, f"{ip}.pcie_link")
        elif layout in _NEEDS_PCIE:
            out.append(Issue(f"{ip}.pcie_link", f"missing; layout {layout.value} needs a PCIe link"))
        if intra.socket_link is not None:
            out += _link_issues(intra.socket_link, f"{ip}.socket_link")
        if not _int_at_least(intra.sockets, 1):
            out.append(Issue(f"{ip}.sockets", f"got {intra.sockets!r}; expected an integer >= 1"))
        if not _int_at_least(intra.gpus_per_pcie_switch, 1):
            out.append(Issue(f"{ip}.gpus_per_pcie_switch", f"got {intra.gpus_per_pcie_switch!r}; expected an integer >= 1"))
        if intra.nic_attach not in ("pcie_switch", "switch"):
            out.append(Issue(f"{ip}.nic_attach", f"got {intra.nic_attach!r}; expected pcie_switch or switch"))
        if gpn is not None:
            if layout is IntraNodeLayout.CUBE_MESH and gpn != 8:
                out.append(Issue(f"{p}.gpus_per_node", f"got {gpn}; a cube_mesh (DGX-1) node has exactly 8 GPUs"))
            elif intra.gpus is not None and gpn != intra.gpus:
                out.append(Issue(f"{p}.gpus_per_node", f"got {gpn}; intra_node {intra.key!r} holds exactly {intra.gpus} GPUs"))
    nic = getattr(group, "nic", None)
    if not _int_at_least(getattr(nic, "count", None), 1):
        out.append(Issue(f"{p}.nic.count", f"got {getattr(nic, 'count', None)!r}; expected an integer >= 1"))
    if nic is not None:
        out += _link_issues(getattr(nic, "link", None), f"{p}.nic")
    return out


def _fabric_issues(cluster: ClusterSpec, machines: int) -> list[Issue]:
    fabric = cluster.fabric
    fp = "cluster.fabric"
    try:
        kind = TopologyKind(fabric.topology)
    except ValueError:
        return [Issue(f"{fp}.topology", f"got {fabric.topology!r}; expected one of {[k.value for k in TopologyKind]}")]
    out = _link_issues(fabric.link, f"{fp}.link")
    if kind in (TopologyKind.FAT_TREE, TopologyKind.LEAF_SPINE):
        if fabric.nodes_per_leaf is not None and not _int_at_least(fabric.nodes_per_leaf, 1):
            out.append(Issue(f"{fp}.nodes_per_leaf", f"got {fabric.nodes_per_leaf!r}; expected an integer >= 1"))
        ov = fabric.oversubscription
        if not (isinstance(ov, (int, float)) and math.isfinite(ov) and ov >= MIN_OVERSUBSCRIPTION):
            out.append(Issue(f"{fp}.oversubscription", f"got {ov!r}; expected a ratio of at least "
                                                       f"{MIN_OVERSUBSCRIPTION} (uplinks at most 100x the downlinks; "
                                                       "1 = non-blocking)"))
        if fabric.levels is not None and fabric.levels not in (2, 3):
            out.append(Issue(f"{fp}.levels", f"got {fabric.levels!r}; expected 2 or 3"))
        if kind is TopologyKind.LEAF_SPINE and fabric.levels == 3:
            out.append(Issue(f"{fp}.levels", "got 3; leaf_spine is a two-level tree (use fat_tree)"))
        if fabric.leaves_per_pod is not None and not _int_at_least(fabric.leaves_per_pod, 1):
            out.append(Issue(f"{fp}.leaves_per_pod", f"got {fabric.leaves_per_pod!r}; expected an integer >= 1"))
    elif kind in NDIMS and kind is not TopologyKind.RING and fabric.dims is not None:
        dims = tuple(fabric.dims)
        if len(dims) != NDIMS[kind] or not all(_int_at_least(d, 1) for d in dims):
            out.append(Issue(f"{fp}.dims", f"got {list(dims)}; expected {NDIMS[kind]} positive integers for {kind.value}"))
        elif math.prod(dims) < machines:
            out.append(Issue(f"{fp}.dims", f"got {list(dims)} ({math.prod(dims)} positions); "
                                           f"expected room for {machines} machines"))
    elif kind is TopologyKind.CUSTOM:
        out += _custom_issues(fabric, machines)
    return out


def _custom_issues(fabric: FabricSpec, machines: int) -> list[Issue]:
    path, where = fabric.graphml, "cluster.fabric.graphml"
    if not path:
        return [Issue(where, "missing; topology custom needs the path of a GraphML file")]
    if os.path.isdir(path):
        return [Issue(where, f"{path} is a directory; expected a GraphML file")]
    if not os.path.isfile(path):
        return [Issue(where, f"no such file: {path}")]
    graph, issues = graphml_issues(path)
    if graph is None:
        return issues
    hosts = len(host_vertices(graph))
    if hosts < machines:
        return [Issue(where, f"{path} has {hosts} host vertices; expected at least {machines} (one per machine)")]
    cut = disconnected_hosts(graph)
    if cut:
        return [Issue(where, f"{path}: host vertices {', '.join(repr(h) for h in cut[:5])} cannot reach "
                             f"{host_vertices(graph)[0]!r} (the graph is disconnected); every host must reach every other")]
    return edge_issues(graph, fabric)


def validate_cluster(cluster: ClusterSpec, server_hosts: int = 0) -> list[Issue]:
    """All issues found in `cluster` (empty when it can be built); never raises."""
    try:
        groups = tuple(cluster.node_groups)
        if not groups:
            return [Issue("cluster.nodes", "empty; expected at least one node group")]
        out: list[Issue] = []
        for i, group in enumerate(groups):
            out += _group_issues(group, f"cluster.nodes.{i}")
        counts = [getattr(g, "count", 0) for g in groups]
        machines = sum(c for c in counts if isinstance(c, int)) + max(0, server_hosts)
        out += _fabric_issues(cluster, machines)
        return out
    except Exception as exc:  # noqa: BLE001 - a validator must report, not crash
        return [Issue("cluster", f"cannot be checked: {type(exc).__name__}: {exc}")]
