"""Cluster section -> ClusterSpec: catalog lookups, link defaults by transport, fabric paths.

Defaults (DESIGN.md section 3): a link given only its bandwidth takes latency and efficiency from
its transport's documented default (NICs: rdma unless `transport: tcp`); a link based on a catalog
entry keeps that entry's figures unless a key overrides them; `fabric.link` defaults to the first
node group's NIC link. Problems are appended to `issues`; nothing here raises for user input.
"""
from __future__ import annotations

import importlib
import re
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from simdist.errors import Issue, ScenarioError
from simdist.hardware.specs import (
    ClusterSpec, FabricSpec, GpuSpec, IntraNodeLayout, IntraNodeSpec, LinkSpec, NicSpec, NodeGroupSpec,
    RoutingKind, TopologyKind, host_staged_peer_link, staged_nic_link,
)
from simdist.io.fields import unknown_key_message
from simdist.io.schema import ClusterModel, FabricModel, IntraNodeModel, LinkModel, NicModel, NodeGroupModel
from simdist.io.schema_cluster import DEFAULT_INTRA_NODE, GpuModel, GpuOverrideModel


def hardware_catalog() -> ModuleType:
    """simdist.io.catalog, imported when first needed."""
    return importlib.import_module("simdist.io.catalog")


_LOCATED = re.compile(r"^(\w+)\[(\d+)\]\.(\w+):\s*(.*)$", re.S)


def located(path: str, message: str) -> Issue:
    """An Issue from a library message; 'layers[2].params: got ...' under `path` ending in 'layers' is placed
    at path.2.params."""
    m = _LOCATED.match(message)
    if m and path.endswith("." + m.group(1)):
        return Issue(f"{path}.{m.group(2)}.{m.group(3)}", m.group(4))
    return Issue(path, message)


def guarded(issues: list[Issue], path: str, call: Callable[[], Any]) -> Any:
    """Run a catalog/importer call; its ScenarioError (or a value error) becomes issues, result None."""
    try:
        return call()
    except ScenarioError as err:
        top = path.split(".")[0]
        for i in err.issues:  # paths relative to the value handed over get the value's path in front
            where = i.path if i.path == top or i.path.startswith(top + ".") else ".".join(p for p in (path, i.path) if p)
            issues.append(Issue(where, i.message))
    except (KeyError, ValueError, TypeError) as err:
        issues.append(located(path, str(err.args[0]) if err.args else type(err).__name__))
    return None


def _lookup(table: dict[str, Any], key: str, path: str, what: str, issues: list[Issue]) -> Any:
    if key in table:
        return table[key]
    issues.append(Issue(path, unknown_key_message(key, list(table), what)))
    return None


def _transport_default(transport: str, path: str, issues: list[Issue]) -> Any:
    cat = hardware_catalog()
    return guarded(issues, path, lambda: cat.transport_default(transport))


def build_link(m: LinkModel, path: str, transport: str, issues: list[Issue],
               base: LinkSpec | None = None) -> LinkSpec | None:
    """An inline link: explicit keys win, then the catalog base, then the transport default at the
    link's own rate (the same function the catalog entries take theirs from)."""
    if m.link is not None:
        base = _lookup(hardware_catalog().links(), m.link, f"{path}.link", "link", issues)
        if base is None:
            return None
    transport = str(m.transport or (base.transport if base is not None and base.transport else transport))
    if base is None and m.bandwidth is None:
        issues.append(Issue(f"{path}.bandwidth", "required key is missing (or give `link: <catalog link key>`)"))
        return None
    bandwidth = m.bandwidth if m.bandwidth is not None else base.bandwidth_Bps
    carry = base is not None and base.transport == transport  # a changed transport drops the base's defaults
    rederive = carry and m.bandwidth is not None and base.efficiency_basis.startswith(f"{transport} default")
    need_default = (m.latency is None and not carry) or (m.efficiency is None and (not carry or rederive))
    default = _transport_default(transport, f"{path}.transport", issues) if need_default else None
    if need_default and default is None:
        return None
    if m.efficiency is not None:
        efficiency, basis = m.efficiency, f"given at {path}.efficiency"
    elif carry and not rederive:
        efficiency, basis = base.efficiency, base.efficiency_basis
    else:
        efficiency, basis = default.efficiency_at(bandwidth), default.basis_at(bandwidth)
    latency = m.latency if m.latency is not None else (base.latency_s if carry else default.latency_s)
    if base is None:
        return LinkSpec(bandwidth_Bps=bandwidth, latency_s=latency, efficiency=efficiency, name="custom",
                        transport=transport, source=getattr(default, "source", "") if default is not None else "",
                        efficiency_basis=basis)
    return replace(base, bandwidth_Bps=bandwidth, latency_s=latency, efficiency=efficiency, transport=transport,
                   efficiency_basis=basis)


def _intra_node(v: str | IntraNodeModel | None, path: str, issues: list[Issue]) -> IntraNodeSpec | None:
    cat = hardware_catalog()
    if v is None:  # documented default: a PCIe server interior (a 1-GPU node uses only its GPU-NIC hop)
        table = cat.intra_nodes()
        if DEFAULT_INTRA_NODE not in table:
            issues.append(Issue(path, f"required key is missing (the default '{DEFAULT_INTRA_NODE}' is not in "
                                      "this catalog)"))
            return None
        return table[DEFAULT_INTRA_NODE]
    if isinstance(v, str):
        return _lookup(cat.intra_nodes(), v, path, "intra_node", issues)
    if v.base is not None:
        spec = _lookup(cat.intra_nodes(), v.base, f"{path}.base", "intra_node", issues)
        if spec is None:
            return None
        link = build_link(v, path, spec.gpu_link.transport or "nvlink", issues, base=spec.gpu_link)
        return replace(spec, gpu_link=link) if link is not None else None
    link = build_link(v, path, "nvlink", issues)
    if link is None:
        return None
    return IntraNodeSpec(key="custom", layout=IntraNodeLayout.SWITCH, gpu_link=link, nic_attach="switch",
                         source=f"inline spec at {path}")


def _with_stream_cap(link: LinkSpec) -> LinkSpec:
    """`link` with its transport's per-stream cap (links.yaml `stream_cap`: TCP's) where it sets none itself;
    a cap at or above the link's line rate changes nothing and is left off."""
    if link.stream_cap_Bps is not None or not link.transport:
        return link
    try:
        cap = hardware_catalog().transport_default(link.transport).stream_cap_Bps
    except (KeyError, ScenarioError):  # a transport without defaults has no per-stream cap either
        return link
    if cap is None or cap >= link.bandwidth_Bps:
        return link
    return replace(link, stream_cap_Bps=cap)


def _nic(v: str | NicModel, path: str, issues: list[Issue]) -> NicSpec | None:
    cat = hardware_catalog()
    if isinstance(v, str):
        link = _lookup(cat.links(), v, path, "link", issues)
        return NicSpec(_with_stream_cap(link), gpudirect=link.transport == "rdma") if link is not None else None
    link = build_link(v, path, "rdma", issues)
    if link is None:
        return None
    if v.stream_cap is not None:
        if link.transport != "tcp":
            issues.append(Issue(f"{path}.stream_cap", f"got {v.stream_cap / 1e9 * 8:g} Gb/s; a per-stream cap "
                                                      f"applies to transport tcp (this NIC's is {link.transport!r})"))
            return None
        link = replace(link, stream_cap_Bps=float(v.stream_cap))
    link = _with_stream_cap(link)
    if v.flow_cap is not None:
        if v.flow_cap > link.bandwidth_Bps:
            issues.append(Issue(f"{path}.flow_cap", f"got {v.flow_cap / 1e9 * 8:g} Gb/s; expected at most the "
                                                    f"NIC's line rate ({link.bandwidth_Bps / 1e9 * 8:g} Gb/s)"))
            return None
        link = replace(link, flow_cap_Bps=float(v.flow_cap))
    gpudirect = v.gpudirect if v.gpudirect is not None else link.transport == "rdma"
    if gpudirect and link.transport != "rdma":
        issues.append(Issue(f"{path}.gpudirect", f"got true; GPUDirect RDMA needs transport rdma "
                                                 f"(this NIC's is {link.transport!r})"))
        return None
    return NicSpec(link, v.count, gpudirect=gpudirect)


def _staging_pcie(intra: IntraNodeSpec) -> LinkSpec | None:
    """The PCIe link host staging crosses: the interior's PCIe link, a PCIe layout's GPU link, else the
    default interior's (an inline NVSwitch-like interior names none)."""
    if intra.pcie_link is not None:
        return intra.pcie_link
    if intra.layout is IntraNodeLayout.PCIE:
        return intra.gpu_link
    default = hardware_catalog().intra_nodes().get(DEFAULT_INTRA_NODE)
    return default.pcie_link if default is not None else None


def _staged(nic: NicSpec, intra: IntraNodeSpec) -> NicSpec:
    """Without GPUDirect RDMA the NIC leg is staged through host memory over the node's PCIe."""
    if nic.gpudirect:
        return nic
    pcie = _staging_pcie(intra)
    if pcie is None:
        return replace(nic, staging="no GPUDirect, but no PCIe link is known to stage over: not staged")
    link = staged_nic_link(nic.link, pcie)
    how = (f"no GPUDirect: staged GPU -> host -> NIC over {pcie.name}, efficiency {nic.link.efficiency:.3g} -> "
           f"{link.efficiency:.3g}, latency +{(link.latency_s - nic.link.latency_s) * 1e6:g} us")
    return replace(nic, link=link, wire_link=nic.link, staging=how)


def _gpu(v: str | GpuModel | GpuOverrideModel, path: str, issues: list[Issue]) -> GpuSpec | None:
    """A catalog GPU, an inline one (figures checked by the schema), or a catalog GPU with figures overridden."""
    cat = hardware_catalog()
    if isinstance(v, str):
        return _lookup(cat.gpus(), v, path, "GPU", issues)
    base = None
    if isinstance(v, GpuOverrideModel) and v.base is not None:
        base = _lookup(cat.gpus(), v.base, f"{path}.base", "GPU", issues)
        if base is None:
            return None
    return guarded(issues, path, lambda: cat.gpu_spec(v, path, base.key if base else "custom", base))


def _group(g: NodeGroupModel, path: str, issues: list[Issue]) -> NodeGroupSpec | None:
    gpu = _gpu(g.gpu, f"{path}.gpu", issues)
    intra = _intra_node(g.intra_node, f"{path}.intra_node", issues)
    nic = _nic(g.nic, f"{path}.nic", issues)
    per_node = g.gpus_per_node
    if intra is not None and intra.gpus is not None:
        if per_node is None:
            per_node = intra.gpus
        elif per_node != intra.gpus:
            issues.append(Issue(f"{path}.gpus_per_node", f"got {per_node}; intra_node '{intra.key}' "
                                                         f"holds exactly {intra.gpus} GPUs"))
    if intra is not None and intra.max_gpus is not None:  # a rack's NVLink domain: a job may use part of it
        if per_node is None:
            per_node = intra.max_gpus
        elif per_node > intra.max_gpus:
            issues.append(Issue(f"{path}.gpus_per_node", f"got {per_node}; intra_node '{intra.key}' "
                                                         f"holds at most {intra.max_gpus} GPUs"))
    if gpu is None or intra is None or nic is None:
        return None
    if not gpu.pcie_p2p:
        staged = host_staged_peer_link(intra, per_node or 1)
        if staged is not None:
            # a PCIe interior's GPUs hang off their switch by pcie_link (the builder's GPU edges): stage both
            intra = replace(intra, gpu_link=staged[0], pcie_link=staged[0], peer_staging=staged[1])
    nic = _staged(nic, intra)
    return NodeGroupSpec(count=g.count, gpu=gpu, gpus_per_node=per_node or 1, intra_node=intra, nic=nic,
                         intra_node_default=g.intra_node is None)


def _fabric(f: FabricModel, first_nic: NicSpec | None, base_dir: Path, issues: list[Issue]) -> FabricSpec | None:
    topo = TopologyKind(f.topology)
    link: LinkSpec | None
    if f.link is None:
        link = first_nic.line_link if first_nic is not None else None
    elif isinstance(f.link, str):
        link = _lookup(hardware_catalog().links(), f.link, "cluster.fabric.link", "link", issues)
    else:
        transport = first_nic.link.transport if first_nic is not None and first_nic.link.transport else "rdma"
        link = build_link(f.link, "cluster.fabric.link", transport, issues)
    graphml: str | None = None
    if f.graphml is not None:
        if topo is not TopologyKind.CUSTOM:
            issues.append(Issue("cluster.fabric.graphml", f"only used by topology 'custom' (topology is '{topo}')"))
        p = Path(f.graphml).expanduser()
        p = p if p.is_absolute() else base_dir / p
        graphml = str(p)  # the topology validator reports a missing file, a directory or a broken graph, once
    elif topo is TopologyKind.CUSTOM:
        issues.append(Issue("cluster.fabric.graphml", "required key is missing (topology 'custom' reads a GraphML file)"))
    want_dims = {TopologyKind.TORUS2D: 2, TopologyKind.TORUS3D: 3}.get(topo)
    if f.dims is not None and len(f.dims) != want_dims:
        expected = f"{want_dims} numbers for {topo}" if want_dims else "no dims (only torus2d / torus3d take dims)"
        issues.append(Issue("cluster.fabric.dims", f"got {f.dims!r}; expected {expected}"))
    routing = RoutingKind(f.routing)
    if routing is RoutingKind.DMODK and topo not in (TopologyKind.FAT_TREE, TopologyKind.LEAF_SPINE, TopologyKind.CUSTOM):
        issues.append(Issue("cluster.fabric.routing", f"got 'dmodk'; expected auto, ecmp or spray for topology '{topo}'"
                            " (dmodk routes switched multi-path fabrics: fat_tree, leaf_spine, custom)"))
    if f.sharp and topo not in (TopologyKind.SINGLE_SWITCH, TopologyKind.FAT_TREE, TopologyKind.LEAF_SPINE,
                                TopologyKind.CUSTOM):
        issues.append(Issue("cluster.fabric.sharp", f"got true on topology '{topo}'; SHARP reduces in switches: expected "
                                                    "a switched topology (single_switch, fat_tree, leaf_spine, custom)"))
    if f.sharp and first_nic is not None and first_nic.link.transport != "rdma":
        issues.append(Issue("cluster.fabric.sharp", f"got true with {first_nic.link.transport} NICs; SHARP runs on "
                                                    "InfiniBand: expected rdma NICs"))
    if link is None:
        return None
    link = _with_stream_cap(link)
    return FabricSpec(topology=topo, link=link, nodes_per_leaf=f.nodes_per_leaf, oversubscription=f.oversubscription,
                      levels=f.levels, leaves_per_pod=f.leaves_per_pod,
                      dims=tuple(f.dims) if f.dims is not None else None, graphml=graphml, routing=routing,
                      sharp=f.sharp)


def resolve_cluster(m: ClusterModel, base_dir: Path, issues: list[Issue], server_hosts: int = 0) -> ClusterSpec | None:
    """ClusterSpec, or None with the reasons appended to `issues` (topology fit, with `server_hosts`
    dedicated parameter-server hosts, checked too)."""
    groups = [_group(g, f"cluster.nodes.{i}", issues) for i, g in enumerate(m.nodes)]
    first_nic = groups[0].nic if groups and groups[0] is not None else None
    fabric = _fabric(m.fabric, first_nic, base_dir, issues)
    if fabric is None or any(g is None for g in groups):
        return None
    cluster = ClusterSpec(tuple(g for g in groups if g is not None), fabric)
    validate = importlib.import_module("simdist.topology.validate").validate_cluster
    found = guarded(issues, "cluster", lambda: validate(cluster, server_hosts))
    if found:
        issues.extend(found)
        return None
    return cluster
