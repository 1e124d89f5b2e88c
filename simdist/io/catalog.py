"""The hardware catalog shipped as YAML in simdist/hardware/data (GPUs, link classes, node interiors).

Parsed once per process into the frozen specs of simdist.hardware.specs. GPU entries are checked by the scenario
schema's GPU figures and built by the same gpu_spec as an inline GPU, so the two mean exactly the same thing.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import typing
from dataclasses import dataclass
from importlib import resources
from typing import Any, Callable, Collection, Mapping

from simdist.errors import Issue, ScenarioError
from simdist.hardware.specs import GpuSpec, HostCpuCatalog, HostCpuSpec, IntraNodeLayout, IntraNodeSpec, LinkSpec, TopologyKind
from simdist.io.issues import from_validation_error
from simdist.io.schema_cluster import CatalogGpuModel, CollectiveOp, DType, GpuFigures
from simdist.io.yaml_cache import cached_parse, pyyaml_version
from simdist.units import (format_bandwidth, format_duration, parse_bandwidth, parse_duration,
                           parse_flops, parse_size)

DTYPES: tuple[str, ...] = typing.get_args(DType)  # the schema's dtypes (the last two: Blackwell block scaling)
INTERFERENCE_OPS: tuple[str, ...] = typing.get_args(CollectiveOp)
TRANSPORTS = ("nvlink", "pcie", "rdma", "tcp", "socket")
NIC_ATTACH = ("pcie_switch", "switch")
CATALOG_KINDS = ("gpus", "links", "topologies", "intra_node")
DATA_DIR = "simdist/hardware/data"

TOPOLOGY_DESCRIPTIONS: dict[TopologyKind, str] = {
    TopologyKind.SINGLE_SWITCH: "every node on one non-blocking switch",
    TopologyKind.FAT_TREE: "leaf/spine (2 levels) or pods (3 levels), optional oversubscription at the leaves",
    TopologyKind.LEAF_SPINE: "alias of a two-level fat_tree",
    TopologyKind.RING: "nodes joined in a bidirectional ring",
    TopologyKind.TORUS2D: "2-D torus with wrap-around links (dims or a near-square shape)",
    TopologyKind.TORUS3D: "3-D torus with wrap-around links (dims or a near-cubic shape)",
    TopologyKind.CUSTOM: "any graph read from a GraphML file",
}

_LINK_KEYS = ("link", "bandwidth", "latency", "efficiency", "transport", "source")
_LINK_ENTRY_KEYS = ("bandwidth", "latency", "transport", "efficiency", "efficiency_reason", "source")
_TRANSPORT_KEYS = ("efficiency", "latency", "reason", "source")
_TRANSPORT_OPTIONAL = ("by_rate", "stream_cap")
_INTRA_KEYS = ("description", "layout", "gpu_link", "pcie_link", "gpus_per_pcie_switch", "sockets",
               "socket_link", "nic_attach", "gpus", "max_gpus", "host_memory", "source")
_INTRA_OPTIONAL = ("host_memory", "max_gpus")


@dataclass(frozen=True)
class TransportDefault:
    """What a link of one transport achieves when a spec gives only its line rate (links.yaml)."""

    transport: str
    efficiency: float
    latency_s: float
    reason: str = ""
    source: str = ""
    by_rate: tuple[tuple[float, float], ...] = ()  # (line rate B/s, efficiency), ascending rates
    stream_cap_Bps: float | None = None  # the most one stream of this transport moves (LinkSpec.stream_cap_Bps)

    def efficiency_at(self, bandwidth_Bps: float | None) -> float:
        """The default efficiency of a link of this transport at line rate `bandwidth_Bps`: linear in
        log(rate) between the `by_rate` points, flat outside them; `efficiency` without points. Catalog
        entries and inline links both take their default from here, so equal rates get equal figures."""
        pts = self.by_rate
        if not pts or bandwidth_Bps is None or not bandwidth_Bps > 0:
            return self.efficiency
        if bandwidth_Bps <= pts[0][0]:
            return pts[0][1]
        for (r0, e0), (r1, e1) in zip(pts, pts[1:]):
            if bandwidth_Bps <= r1:
                t = math.log(bandwidth_Bps / r0) / math.log(r1 / r0)
                return e0 + t * (e1 - e0)
        return pts[-1][1]

    def basis_at(self, bandwidth_Bps: float | None) -> str:
        """Where efficiency_at's figure comes from, for the cluster summary and the result."""
        rate = f" at {format_bandwidth(bandwidth_Bps)}" if self.by_rate and bandwidth_Bps else ""
        return f"{self.transport} default{rate}"


class _Issues:
    """Collects the issues of one parse so that a user sees all of them at once."""

    def __init__(self) -> None:
        self.items: list[Issue] = []

    def take(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ScenarioError as e:
            self.items.extend(e.issues)
            return None

    def raise_if_any(self) -> None:
        if self.items:
            raise ScenarioError(self.items)


# ---- small field checks ------------------------------------------------------------------------

def _mapping(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ScenarioError.bad_value(path, value, "a mapping of keys to values")
    return value


def _check_keys(d: Mapping[str, Any], path: str, allowed: Collection[str], required: Collection[str] = ()) -> None:
    issues = []
    for k in d:
        if k not in allowed:
            import difflib  # only for a message: lazily, not at start-up
            near = difflib.get_close_matches(str(k), list(allowed), n=1)
            hint = f" (did you mean '{near[0]}'?)" if near else ""
            issues.append(Issue(f"{path}.{k}", f"unknown key{hint}; expected one of {', '.join(allowed)}"))
    issues += [Issue(f"{path}.{k}", "missing; this key is required") for k in required if k not in d]
    if issues:
        raise ScenarioError(issues)


def _number(value: object, path: str, expected: str, ok: Callable[[float], bool]) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(float(value)):
        raise ScenarioError.bad_value(path, value, expected)
    return float(value)


def _fraction(value: object, path: str) -> float:
    return _number(value, path, "a fraction with 0 < e <= 1", lambda x: 0.0 < x <= 1.0)


def _count(value: object, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ScenarioError.bad_value(path, value, "a positive whole number")
    return value


def _text(value: object, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ScenarioError.bad_value(path, value, "a non-empty string")
    return value.strip()


def _choice(value: object, path: str, choices: Collection[str]) -> str:
    if value not in choices:
        raise ScenarioError.bad_value(path, value, f"one of {', '.join(choices)}")
    return str(value)


def _lookup(table: Mapping[str, Any], value: object, path: str, kind: str) -> Any:
    if isinstance(value, str) and value in table:
        return table[value]
    import difflib  # only for a message: lazily, not at start-up
    near = difflib.get_close_matches(str(value), list(table), n=3)
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    raise ScenarioError.bad_value(path, value, f"a catalog key of `simdist catalog {kind}`{hint}")


# ---- GPUs --------------------------------------------------------------------------------------

def gpu_spec(m: GpuFigures, path: str, key: str, base: GpuSpec | None = None) -> GpuSpec:
    """The GpuSpec of validated GPU figures (a catalog entry's, or an inline GPU's over its catalog `base`):
    the figures given replace the base's, peak_flops adds dtypes to them. ScenarioError where an efficiency
    names a dtype without a peak to apply it to."""
    peak = {**(base.peak_flops if base else {}), **(m.peak_flops or {})}
    eff = dict(base.compute_efficiency) if base else {}
    if isinstance(m.compute_efficiency, float):
        eff.update({dtype: m.compute_efficiency for dtype in peak})
    elif m.compute_efficiency is not None:
        eff.update(m.compute_efficiency)
    orphans = [Issue(f"{path}.compute_efficiency.{dtype}", f"no peak_flops.{dtype} to apply this efficiency to")
               for dtype in eff if dtype not in peak]
    if orphans:
        raise ScenarioError(orphans)
    fields: dict[str, Any] = {"key": key, "peak_flops": peak, "compute_efficiency": eff}
    if m.comm_interference is not None:
        fields["comm_interference"] = (dict(m.comm_interference) if isinstance(m.comm_interference, dict)
                                       else {"default": m.comm_interference})
    for name, field in (("name", "name"), ("vendor", "vendor"), ("memory", "memory_bytes"),
                        ("memory_bandwidth", "memory_bandwidth_Bps"), ("price_per_hour_usd", "price_per_hour_usd"),
                        ("pcie_p2p", "pcie_p2p")):
        if getattr(m, name) is not None:
            fields[field] = getattr(m, name)
    if isinstance(m, CatalogGpuModel):  # the catalog's documentation: `simdist catalog gpus`
        fields["tdp_w"] = m.tdp_w or 0.0  # 0: no published figure (shown as '-')
        notes = [m.source.strip()] + [f"{label}: {text.strip()}" for text, label in (
            (m.price_basis, "price"), (m.efficiency_source, "efficiency"), (m.interference_source, "interference"))
            if text is not None]
        fields["source"] = ". ".join(notes)
    if m.price_basis is not None:
        fields["price_basis"] = m.price_basis.strip()
    elif m.price_per_hour_usd is not None:  # a price given without a basis: the scenario's own
        fields["price_basis"] = "given"
    if m.price_date is not None:
        fields["price_date"] = m.price_date
    elif m.price_per_hour_usd is not None:
        fields["price_date"] = ""
    if base is not None:
        return dataclasses.replace(base, **fields)
    return GpuSpec(**{"name": key, "vendor": "", "tdp_w": 0.0, "price_per_hour_usd": 0.0, **fields})


def parse_gpu_catalog(data: object, file: str) -> dict[str, GpuSpec]:
    """Every entry of a GPU catalog file (gpus.yaml shape), checked by the scenario schema's GPU figures with
    every key but efficiency_source required; all problems reported at once."""
    from pydantic import ValidationError


    issues = _Issues()
    table = issues.take(_mapping, data, file) or {}
    out = {}
    for key, entry in table.items():
        try:
            out[key] = issues.take(gpu_spec, CatalogGpuModel.model_validate(entry), f"{file}:{key}", str(key))
        except ValidationError as err:
            issues.items.extend(from_validation_error(err, CatalogGpuModel, f"{file}:{key}."))
    issues.raise_if_any()
    return out


# ---- links -------------------------------------------------------------------------------------

def _parse_transport_default(d: object, path: str, transport: str) -> TransportDefault:
    d = _mapping(d, path)
    _check_keys(d, path, _TRANSPORT_KEYS + _TRANSPORT_OPTIONAL, _TRANSPORT_KEYS)
    issues = _Issues()
    points: list[tuple[float, float]] = []
    if "by_rate" in d:
        for rate, eff in (issues.take(_mapping, d["by_rate"], f"{path}.by_rate") or {}).items():
            points.append((issues.take(parse_bandwidth, rate, f"{path}.by_rate.{rate}"),
                           issues.take(_fraction, eff, f"{path}.by_rate.{rate}")))
    td = TransportDefault(transport, issues.take(_fraction, d["efficiency"], f"{path}.efficiency"),
                          issues.take(parse_duration, d["latency"], f"{path}.latency"),
                          issues.take(_text, d["reason"], f"{path}.reason"),
                          issues.take(_text, d["source"], f"{path}.source"))
    stream_cap = issues.take(parse_bandwidth, d["stream_cap"], f"{path}.stream_cap") if "stream_cap" in d else None
    issues.raise_if_any()
    rates = [r for r, _ in points]
    if rates != sorted(rates) or len(set(rates)) != len(rates):
        raise ScenarioError(Issue(f"{path}.by_rate", "expected strictly ascending line rates"))
    return dataclasses.replace(td, by_rate=tuple(points), stream_cap_Bps=stream_cap)


def _parse_link_entry(d: object, path: str, key: str, transports: Mapping[str, TransportDefault]) -> LinkSpec:
    d = _mapping(d, path)
    _check_keys(d, path, _LINK_ENTRY_KEYS, ("bandwidth", "latency", "transport", "source"))
    if ("efficiency" in d) != ("efficiency_reason" in d):
        raise ScenarioError(Issue(f"{path}.efficiency_reason", "efficiency and efficiency_reason go together"))
    issues = _Issues()
    transport = issues.take(_choice, d["transport"], f"{path}.transport", list(transports))
    bw = issues.take(parse_bandwidth, d["bandwidth"], f"{path}.bandwidth")
    lat = issues.take(parse_duration, d["latency"], f"{path}.latency")
    src = issues.take(_text, d["source"], f"{path}.source")
    if "efficiency" in d:
        eff = issues.take(_fraction, d["efficiency"], f"{path}.efficiency")
        why = issues.take(_text, d["efficiency_reason"], f"{path}.efficiency_reason")
    issues.raise_if_any()
    if "efficiency" not in d:
        td = transports[transport]
        eff, why = td.efficiency_at(bw), f"{td.basis_at(bw)}: {td.reason}"
        basis = td.basis_at(bw)
    else:
        basis = f"catalog entry {key}"
    return LinkSpec(bw, lat, eff, key, transport, f"{src}. Efficiency {eff:.3g} ({why})", efficiency_basis=basis)


def parse_link_catalog(data: object, file: str) -> tuple[dict[str, LinkSpec], dict[str, TransportDefault]]:
    """The links and transport defaults of a link catalog file (links.yaml shape)."""
    d = _mapping(data, file)
    _check_keys(d, file, ("transport_defaults", "links"), ("transport_defaults", "links"))
    issues = _Issues()
    tds = issues.take(_mapping, d["transport_defaults"], f"{file}:transport_defaults") or {}
    issues.take(_check_keys, tds, f"{file}:transport_defaults", TRANSPORTS, TRANSPORTS)
    transports = {t: issues.take(_parse_transport_default, v, f"{file}:transport_defaults.{t}", t)
                  for t, v in tds.items() if t in TRANSPORTS}
    issues.raise_if_any()
    table = issues.take(_mapping, d["links"], f"{file}:links") or {}
    links_ = {k: issues.take(_parse_link_entry, v, f"{file}:links.{k}", str(k), transports) for k, v in table.items()}
    issues.raise_if_any()
    return links_, transports


def _parse_link(d: object, path: str, default: LinkSpec | None, ignore: Collection[str],
                catalog: Mapping[str, LinkSpec], transports: Mapping[str, TransportDefault]) -> LinkSpec:
    d = _mapping(d, path)
    _check_keys(d, path, tuple(_LINK_KEYS) + tuple(ignore))
    issues = _Issues()
    start = issues.take(_lookup, catalog, d["link"], f"{path}.link", "links") if "link" in d else default
    issues.raise_if_any()
    transport = start.transport if start else ""
    if "transport" in d:
        transport = issues.take(_choice, d["transport"], f"{path}.transport", TRANSPORTS)
    td = transports.get(transport or "")
    carry = start is not None and start.transport == transport  # a changed transport drops start's defaults
    bw = issues.take(parse_bandwidth, d["bandwidth"], f"{path}.bandwidth") if "bandwidth" in d else None
    if bw is None and start is not None:
        bw = start.bandwidth_Bps
    elif bw is None and "bandwidth" not in d:
        issues.items.append(Issue(f"{path}.bandwidth", "missing; expected a bandwidth like '200 Gb/s'"))
    if "latency" in d:
        lat = issues.take(parse_duration, d["latency"], f"{path}.latency")
    else:
        lat = start.latency_s if carry else (td.latency_s if td else None)
        if lat is None and transport is not None:  # (a bad transport was reported already)
            issues.items.append(Issue(f"{path}.latency", "missing; expected a duration like '2 us' "
                                      f"(or a transport: {', '.join(TRANSPORTS)} to take its default)"))
    if "efficiency" in d:
        eff = issues.take(_fraction, d["efficiency"], f"{path}.efficiency")
        basis = f"given at {path or 'top level'}"
    elif carry and not (start.efficiency_basis.startswith(f"{transport} default") and "bandwidth" in d):
        eff, basis = start.efficiency, start.efficiency_basis
    else:  # the transport's default at this link's own rate (also when a new rate replaces a default's)
        eff = td.efficiency_at(bw) if td else 1.0
        basis = td.basis_at(bw) if td else "no transport: 1.0"
    src = issues.take(_text, d["source"], f"{path}.source") if "source" in d else None
    issues.raise_if_any()
    name = start.name if start is not None and "bandwidth" not in d else "custom"
    if src is None:
        src = start.source if start is not None and carry else f"inline spec at {path or 'top level'}"
    return LinkSpec(bw, lat, eff, name, transport or "", src, efficiency_basis=basis)


def _parse_link_ref(value: object, path: str, catalog: Mapping[str, LinkSpec],
                    transports: Mapping[str, TransportDefault]) -> LinkSpec:
    """A catalog key, or an inline link that may add `bricks: K` (K parallel links of the class)."""
    if isinstance(value, str):
        return _lookup(catalog, value, path, "links")
    d = dict(_mapping(value, path))
    bricks = _count(d.pop("bricks"), f"{path}.bricks") if "bricks" in d else 1
    link = _parse_link(d, path, None, (), catalog, transports)
    if bricks == 1:
        return link
    return link.with_(bandwidth_Bps=link.bandwidth_Bps * bricks, name=f"{link.name}x{bricks}")


# ---- node interiors ----------------------------------------------------------------------------

def _parse_intra_node(d: object, path: str, key: str, catalog: Mapping[str, LinkSpec],
                      transports: Mapping[str, TransportDefault]) -> IntraNodeSpec:
    d = _mapping(d, path)
    _check_keys(d, path, _INTRA_KEYS, tuple(k for k in _INTRA_KEYS if k not in _INTRA_OPTIONAL))
    issues = _Issues()
    fields: dict[str, Any] = {"key": key}
    fields["layout"] = IntraNodeLayout(issues.take(_choice, d["layout"], f"{path}.layout",
                                                   [x.value for x in IntraNodeLayout]) or "switch")
    fields["gpu_link"] = issues.take(_parse_link_ref, d["gpu_link"], f"{path}.gpu_link", catalog, transports)
    for name in ("pcie_link", "socket_link"):
        if d.get(name) is not None:
            fields[name] = issues.take(_parse_link_ref, d[name], f"{path}.{name}", catalog, transports)
    for name in ("gpus_per_pcie_switch", "sockets"):
        if name in d:
            fields[name] = issues.take(_count, d[name], f"{path}.{name}")
    if d.get("host_memory") is not None:  # {bandwidth: peak per socket, efficiency, source}
        hm = issues.take(_mapping, d["host_memory"], f"{path}.host_memory") or {}
        issues.take(_check_keys, hm, f"{path}.host_memory", ("bandwidth", "efficiency", "source"),
                    ("bandwidth", "efficiency"))
        bw = issues.take(parse_bandwidth, hm.get("bandwidth"), f"{path}.host_memory.bandwidth")
        eff = issues.take(_fraction, hm.get("efficiency"), f"{path}.host_memory.efficiency")
        if bw is not None and eff is not None:
            fields["host_memory"] = LinkSpec(bw, 0.0, eff, "host-memory", "", str(hm.get("source", "")),
                                             efficiency_basis=f"given at {path}.host_memory.efficiency")
    for name in ("gpus", "max_gpus"):
        if d.get(name) is not None:
            fields[name] = issues.take(_count, d[name], f"{path}.{name}")
    if "nic_attach" in d:
        fields["nic_attach"] = issues.take(_choice, d["nic_attach"], f"{path}.nic_attach", NIC_ATTACH)
    for name in ("description", "source"):
        if name in d:
            issues.take(_text, d[name], f"{path}.{name}")
    issues.raise_if_any()
    fields["source"] = str(d.get("source", f"inline spec at {path or 'top level'}")).strip()
    spec = IntraNodeSpec(**fields)
    if spec.pcie_link is None and spec.nic_attach != "switch":
        raise ScenarioError(Issue(f"{path}.pcie_link", "required unless nic_attach is 'switch'"))
    if spec.sockets > 1 and spec.socket_link is None:
        raise ScenarioError(Issue(f"{path}.socket_link", f"required with sockets: {spec.sockets}"))
    return spec


def parse_intra_node_catalog(data: object, file: str, catalog: Mapping[str, LinkSpec],
                             transports: Mapping[str, TransportDefault]
                             ) -> tuple[dict[str, IntraNodeSpec], dict[str, str]]:
    """The node interiors of an intra_node catalog file, and each entry's one-line description."""
    issues = _Issues()
    table = issues.take(_mapping, data, file) or {}
    specs = {k: issues.take(_parse_intra_node, v, f"{file}:{k}", str(k), catalog, transports)
             for k, v in table.items()}
    issues.raise_if_any()
    return specs, {k: str(v["description"]) for k, v in table.items()}


# ---- loading (cached) and public look-ups -----------------------------------------------------

def _parse_yaml(text: str, file: str) -> Any:
    import yaml  # only when the text is not in io.yaml_cache (a run whose YAML is all cached never imports it)

    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: ~15x faster
    except yaml.YAMLError as e:
        raise ScenarioError(Issue(file, f"cannot read the catalog file: {e}")) from None


def _read(name: str) -> Any:
    file = f"{DATA_DIR}/{name}"
    try:
        text = resources.files("simdist.hardware").joinpath("data", name).read_text("utf-8")
    except OSError as e:
        raise ScenarioError(Issue(file, f"cannot read the catalog file: {e}")) from None
    # the same text gives the same data: parsed once per text, then read back (io.yaml_cache)
    return cached_parse(text, functools.partial(_parse_yaml, file=file), pyyaml_version())


@functools.lru_cache(maxsize=1)
def host_cpu_catalog() -> HostCpuCatalog:
    """host_cpus.yaml: the host CPUs, the reference CPU and each intra-node entry's CPU (checked here)."""
    raw = _read("host_cpus.yaml")
    cpus = tuple(HostCpuSpec(k, **v) for k, v in raw["cpus"].items())
    keys = {c.key for c in cpus}
    nodes = tuple((node, cpu) for node, cpu in (raw.get("nodes") or {}).items())
    for node, cpu in nodes:
        if cpu not in keys:
            raise ValueError(f"{DATA_DIR}/host_cpus.yaml nodes.{node}: got {cpu!r}; expected one of {', '.join(sorted(keys))}")
    if raw["reference"] not in keys:
        raise ValueError(f"{DATA_DIR}/host_cpus.yaml reference: got {raw['reference']!r}; expected a cpus key")
    return HostCpuCatalog(cpus, raw["reference"], nodes)


@functools.cache
def _gpu_catalog() -> dict[str, GpuSpec]:
    return parse_gpu_catalog(_read("gpus.yaml"), f"{DATA_DIR}/gpus.yaml")


@functools.cache
def _link_catalog() -> tuple[dict[str, LinkSpec], dict[str, TransportDefault]]:
    return parse_link_catalog(_read("links.yaml"), f"{DATA_DIR}/links.yaml")


@functools.cache
def _intra_catalog() -> tuple[dict[str, IntraNodeSpec], dict[str, str]]:
    return parse_intra_node_catalog(_read("intra_node.yaml"), f"{DATA_DIR}/intra_node.yaml", *_link_catalog())


def gpus() -> dict[str, GpuSpec]:
    """Every catalog GPU by key (a fresh dict; the specs themselves are shared and frozen)."""
    return dict(_gpu_catalog())


def links() -> dict[str, LinkSpec]:
    """Every catalog link class by key (per link, per direction)."""
    return dict(_link_catalog()[0])


def intra_nodes() -> dict[str, IntraNodeSpec]:
    """Every catalog node interior by key."""
    return dict(_intra_catalog()[0])


def transport_default(transport: str, path: str = "") -> TransportDefault:
    """Default efficiency and latency of a link given only its transport (nvlink|pcie|rdma|tcp|socket)."""
    return _lookup(_link_catalog()[1], transport, path, "links")


# ---- tables for `simdist catalog KIND` -----------------------------------------------------------

def _link_cell(link: LinkSpec | None) -> str:
    if link is None:
        return "-"
    return f"{link.name} ({format_bandwidth(link.bandwidth_Bps, bits=link.transport in ('rdma', 'tcp'))})"


def catalog_table(kind: str) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of one catalog (gpus | links | topologies | intra_node), as display strings."""
    if kind == "gpus":
        head = ["key", "vendor"] + [f"{d} TFLOP/s" for d in DTYPES] + ["memory", "mem bw", "TDP", "$/h", "price basis",
                                                                     "price date", "name"]
        rows = [[g.key, g.vendor] + [f"{g.peak_flops[d] / 1e12:g}" if d in g.peak_flops else "-" for d in DTYPES]
                + [f"{g.memory_bytes / 2**30:g} GiB", format_bandwidth(g.memory_bandwidth_Bps, bits=False),
                   f"{g.tdp_w:g} W" if g.tdp_w else "-", f"{g.price_per_hour_usd:.2f}", g.price_basis or "-",
                   g.price_date or "-", g.name] for g in _gpu_catalog().values()]
        return head, rows
    if kind == "links":
        head = ["key", "transport", "bandwidth/dir", "latency", "efficiency", "effective"]
        rows = []
        for link in _link_catalog()[0].values():
            bits = link.transport in ("rdma", "tcp")
            rows.append([link.name, link.transport, format_bandwidth(link.bandwidth_Bps, bits=bits),
                         format_duration(link.latency_s), f"{link.efficiency:.2f}",
                         format_bandwidth(link.effective_Bps, bits=bits)])
        return head, rows
    if kind == "intra_node":
        head = ["key", "layout", "gpus", "gpu_link", "pcie_link", "gpus/pcie switch", "sockets", "socket_link",
                "nic_attach"]
        rows = [[s.key, s.layout.value, str(s.gpus or (f"up to {s.max_gpus}" if s.max_gpus else "any")),
                 _link_cell(s.gpu_link), _link_cell(s.pcie_link),
                 str(s.gpus_per_pcie_switch), str(s.sockets), _link_cell(s.socket_link), s.nic_attach]
                for s in _intra_catalog()[0].values()]
        return head, rows
    if kind == "topologies":
        rows = [["fabric.topology", k.value, TOPOLOGY_DESCRIPTIONS[k]] for k in TopologyKind]
        rows += [["intra_node", k, desc] for k, desc in _intra_catalog()[1].items()]
        return ["key of", "value", "description"], rows
    raise ScenarioError.bad_value("catalog", kind, f"one of {', '.join(CATALOG_KINDS)}")
