"""Calibration profiles: measured link latency/efficiency, per-algorithm factors and compute efficiency.

`simdist calibrate` writes one (JSON, see docs/validation.md); `apply_profile` folds it into a resolved
Scenario with dataclasses.replace, so a prediction runs on measured instead of documented defaults.
The scenario loader's `calibration:` key is one line: `scenario = apply_profile(scenario, load_profile(path))`.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Mapping

from simdist.compute import ComputeCalibration
from simdist.errors import ScenarioError
from simdist.hardware.specs import ClusterSpec, GpuSpec, IntraNodeSpec, LinkSpec, NodeGroupSpec
from simdist.io.catalog import INTERFERENCE_OPS
from simdist.scenario import CompressionMethod, Scenario

FORMAT = "simdist-calibration/1"
ROLES = ("nic", "fabric", "intra_node")


@dataclass(frozen=True)
class LinkCalibration:
    """Measured figures of one link class: links whose name/transport/role match get `latency_s`, `efficiency`.

    A None selector matches anything; `fit` keeps the fit's figures (points, residuals, nominal rate).
    """

    name: str | None = None  # LinkSpec.name: catalog key or 'custom'
    transport: str | None = None  # LinkSpec.transport: tcp | rdma | nvlink | ...
    role: str | None = None  # nic | fabric | intra_node
    latency_s: float | None = None
    efficiency: float | None = None
    fit: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, link: LinkSpec, role: str) -> bool:
        return ((self.name is None or self.name == link.name)
                and (self.transport is None or self.transport == link.transport)
                and (self.role is None or self.role == role))

    def apply(self, link: LinkSpec) -> LinkSpec:
        changes: dict[str, Any] = {}
        if self.latency_s is not None:
            changes["latency_s"] = self.latency_s
        if self.efficiency is not None:
            changes["efficiency"] = self.efficiency
            changes["efficiency_basis"] = "calibration profile (measured)"
        return replace(link, **changes) if changes else link


@dataclass(frozen=True)
class ComputeEntry:
    """Measured compute figures of GPUs whose key or name is `gpu`, for `dtype`.

    `efficiency` is the achieved fraction of peak on matmuls; the optional `kind_factor` (layer kind ->
    multiplier of that efficiency), `memory_efficiency` (fraction of HBM bandwidth) and
    `launch_overhead_s` (per kernel) become the scenario's `simdist.compute.ComputeCalibration`.
    """

    gpu: str
    dtype: str
    efficiency: float
    fit: Mapping[str, Any] = field(default_factory=dict)
    kind_factor: Mapping[str, float] = field(default_factory=dict)
    memory_efficiency: float | None = None
    launch_overhead_s: float | None = None

    def matches(self, gpu: GpuSpec) -> bool:
        return self.gpu in (gpu.key, gpu.name)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"gpu": self.gpu, "dtype": self.dtype, "efficiency": self.efficiency}
        if self.kind_factor:
            d["kind_factor"] = dict(self.kind_factor)
        if self.memory_efficiency is not None:
            d["memory_efficiency"] = self.memory_efficiency
        if self.launch_overhead_s is not None:
            d["launch_overhead_s"] = self.launch_overhead_s
        d["fit"] = dict(self.fit)
        return d


@dataclass(frozen=True)
class CodecEntry:
    """Measured cost of compression `method` on GPUs whose key or name is `gpu`: `factor` multiplies the
    codec's roofline encode/decode time (measured / predicted; `fit` keeps the probe's figures)."""

    gpu: str
    method: str
    factor: float
    fit: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, gpu: GpuSpec) -> bool:
        return self.gpu in (gpu.key, gpu.name)

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "method": self.method, "factor": self.factor, "fit": dict(self.fit)}


@dataclass(frozen=True)
class InterferenceEntry:
    """Measured compute slowdown on GPUs whose key or name is `gpu` while a collective `op` (or every op:
    "default") of their rank runs: compute time overlapped / alone - 1; replaces the catalog's
    `comm_interference` for that op (`fit` keeps how it was measured)."""

    gpu: str
    op: str
    slowdown: float
    fit: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, gpu: GpuSpec) -> bool:
        return self.gpu in (gpu.key, gpu.name)

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "op": self.op, "slowdown": self.slowdown, "fit": dict(self.fit)}


@dataclass(frozen=True)
class CalibrationProfile:
    """Everything one calibration run measured; `source` is the file it was loaded from (for the record)."""

    links: tuple[LinkCalibration, ...] = ()
    algorithms: Mapping[str, float] = field(default_factory=dict)  # algorithm -> measured/predicted factor
    compute: tuple[ComputeEntry, ...] = ()
    provenance: Mapping[str, Any] = field(default_factory=dict)
    source: str | None = None
    codecs: tuple[CodecEntry, ...] = ()
    interference: tuple[InterferenceEntry, ...] = ()

    def algorithm_factor(self, algorithm: str) -> float:
        """Multiply a predicted collective time of `algorithm` by this (1.0 when not measured)."""
        return float(self.algorithms.get(algorithm, 1.0))

    def to_dict(self) -> dict[str, Any]:
        def link(c: LinkCalibration) -> dict[str, Any]:
            return {"name": c.name, "transport": c.transport, "role": c.role, "latency_s": c.latency_s,
                    "efficiency": c.efficiency, "fit": dict(c.fit)}

        return {"format": FORMAT, "links": [link(c) for c in self.links], "algorithms": dict(self.algorithms),
                "compute": [c.to_dict() for c in self.compute], "codecs": [c.to_dict() for c in self.codecs],
                "interference": [c.to_dict() for c in self.interference], "provenance": dict(self.provenance)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=False) + "\n"


# ---------------------------------------------------------------------------------------- parsing

def _num(value: Any, path: str, expected: str, ok: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not ok(value):
        raise ScenarioError.bad_value(path, value, expected)
    return float(value)


def _opt_str(d: Mapping[str, Any], key: str, path: str, choices: tuple[str, ...] | None = None) -> str | None:
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or (choices is not None and v not in choices):
        raise ScenarioError.bad_value(f"{path}.{key}", v, f"one of {list(choices)}" if choices else "a string or null")
    return v


def _mapping(v: Any, path: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise ScenarioError.bad_value(path, v, f"a mapping with keys {list(keys)}")
    unknown = sorted(set(v) - set(keys))
    if unknown:
        raise ScenarioError.bad_value(path, unknown, f"keys among {list(keys)}")
    return v


_LINK_KEYS = ("name", "transport", "role", "latency_s", "efficiency", "fit")
_COMPUTE_KEYS = ("gpu", "dtype", "efficiency", "kind_factor", "memory_efficiency", "launch_overhead_s", "fit")
_CODEC_KEYS = ("gpu", "method", "factor", "fit")
_INTERFERENCE_KEYS = ("gpu", "op", "slowdown", "fit")
_TOP_KEYS = ("format", "links", "algorithms", "compute", "codecs", "interference", "provenance")


def _compute_entry(e: Mapping[str, Any], p: str) -> ComputeEntry:
    frac = "0 < efficiency <= 1"
    kinds = e.get("kind_factor") or {}
    if not isinstance(kinds, Mapping):
        raise ScenarioError.bad_value(f"{p}.kind_factor", kinds, "a mapping layer kind -> factor")
    # a kind may beat the matmul efficiency (factor > 1); the compute model caps efficiency x factor at 1
    kind_factor = {str(k): _num(v, f"{p}.kind_factor.{k}", "a positive factor", lambda x: x > 0) for k, v in kinds.items()}
    mem, launch = e.get("memory_efficiency"), e.get("launch_overhead_s")
    return ComputeEntry(e["gpu"], e["dtype"], _num(e.get("efficiency"), f"{p}.efficiency", frac, lambda x: 0 < x <= 1),
                        dict(e.get("fit") or {}), kind_factor,
                        None if mem is None else _num(mem, f"{p}.memory_efficiency", frac, lambda x: 0 < x <= 1),
                        None if launch is None else _num(launch, f"{p}.launch_overhead_s", "seconds >= 0", lambda x: x >= 0))


def _codec_entry(e: Mapping[str, Any], p: str) -> CodecEntry:
    methods = [m.value for m in CompressionMethod]
    if e["method"] not in methods:
        raise ScenarioError.bad_value(f"{p}.method", e["method"], f"one of {methods}")
    return CodecEntry(e["gpu"], e["method"], _num(e.get("factor"), f"{p}.factor", "a positive factor", lambda x: x > 0),
                      dict(e.get("fit") or {}))


def _entries(d: Mapping[str, Any], key: str, where: str, keys: tuple[str, ...],
             strings: tuple[str, ...] = ()) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, mapping) of every entry of the list `d[key]`: only `keys`, and `strings` must be strings."""
    for i, raw in enumerate(d.get(key, [])):
        p = f"{where}.{key}[{i}]"
        e = _mapping(raw, p, keys)
        for s in strings:
            if not isinstance(e.get(s), str):
                raise ScenarioError.bad_value(f"{p}.{s}", e.get(s), "a string")
        yield p, e


def profile_from_dict(data: Any, source: str | None = None) -> CalibrationProfile:
    """A CalibrationProfile from parsed JSON; ScenarioError naming the path of the first bad value."""
    where = source or "calibration"
    d = _mapping(data, where, _TOP_KEYS)
    if d.get("format", FORMAT) != FORMAT:
        raise ScenarioError.bad_value(f"{where}.format", d.get("format"), repr(FORMAT))
    links = []
    for p, e in _entries(d, "links", where, _LINK_KEYS):
        lat = e.get("latency_s")
        eff = e.get("efficiency")
        links.append(LinkCalibration(
            _opt_str(e, "name", p), _opt_str(e, "transport", p), _opt_str(e, "role", p, ROLES),
            None if lat is None else _num(lat, f"{p}.latency_s", "seconds >= 0", lambda x: x >= 0),
            None if eff is None else _num(eff, f"{p}.efficiency", "0 < efficiency <= 1", lambda x: 0 < x <= 1),
            dict(e.get("fit") or {})))
    algs = d.get("algorithms", {})
    if not isinstance(algs, Mapping):
        raise ScenarioError.bad_value(f"{where}.algorithms", algs, "a mapping algorithm -> factor")
    algorithms = {str(k): _num(v, f"{where}.algorithms.{k}", "a positive factor", lambda x: x > 0)
                  for k, v in algs.items()}
    compute = [_compute_entry(e, p) for p, e in _entries(d, "compute", where, _COMPUTE_KEYS, ("gpu", "dtype"))]
    codecs = [_codec_entry(e, p) for p, e in _entries(d, "codecs", where, _CODEC_KEYS, ("gpu", "method"))]
    interference = [_interference_entry(e, p) for p, e in
                    _entries(d, "interference", where, _INTERFERENCE_KEYS, ("gpu", "op"))]
    prov = d.get("provenance", {})
    if not isinstance(prov, Mapping):
        raise ScenarioError.bad_value(f"{where}.provenance", prov, "a mapping")
    return CalibrationProfile(tuple(links), algorithms, tuple(compute), dict(prov), source, tuple(codecs),
                              tuple(interference))


def _interference_entry(e: Mapping[str, Any], p: str) -> InterferenceEntry:
    if e["op"] not in INTERFERENCE_OPS:
        raise ScenarioError.bad_value(f"{p}.op", e["op"], f"one of {', '.join(INTERFERENCE_OPS)}")
    slow = _num(e.get("slowdown"), f"{p}.slowdown", "a compute slowdown in [0, 10]", lambda x: 0 <= x <= 10)
    return InterferenceEntry(e["gpu"], e["op"], slow, dict(e.get("fit") or {}))


def load_profile(path: str | Path) -> CalibrationProfile:
    """Read a profile written by `simdist calibrate`; ScenarioError for a missing or malformed file."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ScenarioError.bad_value("calibration", str(path), f"a readable profile file ({err.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ScenarioError.bad_value("calibration", str(path), f"JSON ({err.msg} at line {err.lineno})") from None
    return profile_from_dict(data, source=str(path))


# ---------------------------------------------------------------------------------------- applying

def _link(link: LinkSpec | None, role: str, profile: CalibrationProfile) -> LinkSpec | None:
    if link is None:
        return None
    for cal in profile.links:  # the first matching entry wins, so list specific entries first
        if cal.matches(link, role):
            return cal.apply(link)
    return link


def _gpu(gpu: GpuSpec, profile: CalibrationProfile) -> GpuSpec:
    eff = dict(gpu.compute_efficiency)
    for cal in profile.compute:
        if cal.matches(gpu):
            eff[cal.dtype] = cal.efficiency
    slow, done = dict(gpu.comm_interference), set()
    for ent in profile.interference:  # the first matching entry per op wins
        if ent.matches(gpu) and ent.op not in done:
            slow[ent.op] = ent.slowdown
            done.add(ent.op)
    if eff == dict(gpu.compute_efficiency) and slow == dict(gpu.comm_interference):
        return gpu
    return replace(gpu, compute_efficiency=eff, comm_interference=slow)


def _intra(spec: IntraNodeSpec, profile: CalibrationProfile) -> IntraNodeSpec:
    return replace(spec, gpu_link=_link(spec.gpu_link, "intra_node", profile),
                   pcie_link=_link(spec.pcie_link, "intra_node", profile),
                   socket_link=_link(spec.socket_link, "intra_node", profile))


def _group(g: NodeGroupSpec, profile: CalibrationProfile) -> NodeGroupSpec:
    return replace(g, gpu=_gpu(g.gpu, profile), intra_node=_intra(g.intra_node, profile),
                   nic=replace(g.nic, link=_link(g.nic.link, "nic", profile),
                               wire_link=_link(g.nic.wire_link, "nic", profile)))  # a dedicated server's NIC too


def compute_calibration(scenario: Scenario, profile: CalibrationProfile) -> ComputeCalibration | None:
    """The compute model's overrides from the profile's entries matching the scenario's GPUs and precision.

    Kind factors, codec factors and launch overhead are one table for the run (several matching GPU kinds:
    the first entry of each wins); memory efficiency is kept per GPU key. None when no entry carries any.
    """
    dtype = scenario.workload.precision.value
    codecs: dict[str, float] = {}
    for g in scenario.cluster.node_groups:
        for c in profile.codecs:
            if c.matches(g.gpu):
                codecs.setdefault(c.method, c.factor)
    kinds: dict[str, float] = {}
    memory: dict[str, float] = {}
    launch: float | None = None
    for g in scenario.cluster.node_groups:
        for e in profile.compute:
            if not (e.matches(g.gpu) and e.dtype == dtype):
                continue
            for k, v in e.kind_factor.items():
                kinds.setdefault(k, v)
            if e.memory_efficiency is not None:
                memory.setdefault(g.gpu.key, e.memory_efficiency)
            if launch is None:
                launch = e.launch_overhead_s
    if not kinds and not memory and launch is None and not codecs:
        return None
    return ComputeCalibration(kind_factor=kinds, memory_efficiency=memory, launch_overhead_s=launch, codec_factor=codecs)


def apply_profile(scenario: Scenario, profile: CalibrationProfile) -> Scenario:
    """`scenario` with the profile's link latency/efficiency, GPU compute efficiency and interference, compute-model
    overrides (kind factors, memory efficiency, launch overhead, codec factors: `Scenario.compute_calibration`)
    substituted.

    Links match by LinkSpec.name / transport and role (nic, fabric, intra_node); GPUs by key or name.
    Algorithm factors are not part of a Scenario: callers scale predicted times with `algorithm_factor`.
    """
    if not profile.links and not profile.compute and not profile.codecs and not profile.interference:  # nothing to substitute: keep the specs as they are
        return replace(scenario, calibration=profile.source or scenario.calibration)
    c = scenario.cluster
    cluster = ClusterSpec(tuple(_group(g, profile) for g in c.node_groups),
                          replace(c.fabric, link=_link(c.fabric.link, "fabric", profile)))
    cal = compute_calibration(scenario, profile) or scenario.compute_calibration
    return replace(scenario, cluster=cluster, calibration=profile.source or scenario.calibration,
                   compute_calibration=cal)
