"""One sweep point's row: the point's inputs, its status, every figure of its result, and its cost.

Rows are plain dicts with a fixed set of result columns (RESULT_COLUMNS) after the axis columns, so
every row of a sweep has the same columns whatever happened to the point. A point's `key` is a hash
of its resolved scenario and fidelity: two spellings of the same scenario ("25 MB", "25000000 B")
share a key, and a resumed sweep skips a point whose key is already in the file.
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
import pickle
from typing import Any

from simdist.results.cost import cluster_price_per_hour
from simdist.results.records import RunResult

STATUS_OK, STATUS_INFEASIBLE, STATUS_INVALID, STATUS_ERROR = "ok", "infeasible", "invalid", "error"
HEAD_COLUMNS = ("point", "key")
RESULT_COLUMNS = (
    "status", "reason", "fidelity", "gpus", "iteration_time_s", "samples_per_s", "tokens_per_s",
    "scaling_efficiency", "compute_s", "communication_s", "exposed_communication_s", "compression_s",
    "optimizer_s", "memory_per_gpu_bytes", "memory_fits", "cost_per_hour_usd", "cost_per_sample_usd",
    "cost_per_token_usd", "goodput_ratio", "meets_constraints",
)


def canonical(obj: Any) -> Any:
    """A JSON-able, order-stable view of a resolved scenario (dataclasses, enums, tuples, sets, floats)."""
    kind = _KINDS.get(type(obj))
    if kind is None:
        kind = _KINDS[type(obj)] = _kind(type(obj))
    if kind is _SCALAR:
        return obj
    if kind is _FLOAT:
        return repr(obj)  # exact, and NaN/inf survive JSON
    if kind is _SEQUENCE:
        return [canonical(v) for v in obj]
    if isinstance(kind, tuple):  # a dataclass: its field names
        return {name: canonical(getattr(obj, name)) for name in kind}
    if kind is _ENUM:
        return canonical(obj.value)
    if kind is _DICT:
        return {str(k): canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if kind is _SET:
        return sorted((canonical(v) for v in obj), key=repr)
    return repr(obj)


_SCALAR, _FLOAT, _SEQUENCE, _ENUM, _DICT, _SET, _OTHER = "scalar", "float", "sequence", "enum", "dict", "set", "other"
_KINDS: dict[type, Any] = {type(None): _SCALAR}


def _kind(t: type) -> Any:
    """How canonical treats values of type `t`, decided once per type in this order: dataclasses (their
    field names), enums, mappings, lists and tuples, sets, floats, None/bool/int/str, anything else."""
    if dataclasses.is_dataclass(t):
        return tuple(f.name for f in dataclasses.fields(t))
    if issubclass(t, enum.Enum):
        return _ENUM
    if issubclass(t, dict):
        return _DICT
    if issubclass(t, (list, tuple)):
        return _SEQUENCE
    if issubclass(t, (set, frozenset)):
        return _SET
    if issubclass(t, float):
        return _FLOAT
    if issubclass(t, (bool, int, str)):
        return _SCALAR
    return _OTHER


def point_key(scenario: Any, fidelity: str) -> str:
    """16 hex digits of SHA-256 over the resolved scenario and the fidelity.

    The hashed text is `json.dumps({"scenario": canonical(scenario), "fidelity": fidelity},
    sort_keys=True, separators=(",", ":"))` (`key_text`); it is assembled here section by section,
    each section's JSON taken from `_SECTIONS` when an identical section was seen before (most points
    of a sweep share their workload and cluster; the workload's layers are ~85 % of the text).
    """
    return hashlib.sha256(_key_text_fast(scenario, fidelity).encode()).hexdigest()[:16]


def key_text(scenario: Any, fidelity: str) -> str:
    """The text a point's key hashes, by its definition (point_key builds the same text faster)."""
    return json.dumps({"scenario": canonical(scenario), "fidelity": fidelity}, sort_keys=True, separators=(",", ":"))


class _SectionTexts:
    """JSON texts of scenario sections, keyed by the section's pickle: equal pickles mean the same types
    and values all the way down (1 and 1.0, or 0.0 and -0.0, pickle differently though they compare
    equal, and their canonical texts differ), so a hit gives exactly the text `canonical` would. At most
    `size` sections are kept (least recently used dropped)."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._texts: dict[bytes, str] = {}

    def text(self, value: Any) -> str:
        try:
            raw = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - an unpicklable section is serialised every time
            return _dumps(canonical(value))
        hit = self._texts.pop(raw, None)
        if hit is None:
            hit = _dumps(canonical(value))
            if len(self._texts) >= self.size:
                del self._texts[next(iter(self._texts))]
        self._texts[raw] = hit  # (re)inserted last: the dict's order is the recency order
        return hit


_SECTIONS = _SectionTexts()
_SMALL = (type(None), bool, int, float, str)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _key_text_fast(scenario: Any, fidelity: str) -> str:
    kind = _KINDS.get(type(scenario)) or _kind(type(scenario))
    if not isinstance(kind, tuple):  # not a dataclass: by the definition
        return key_text(scenario, fidelity)
    parts = []
    for name in sorted(kind):  # sort_keys order of the field names
        value = getattr(scenario, name)
        text = _dumps(canonical(value)) if type(value) in _SMALL else _SECTIONS.text(value)
        parts.append(_dumps(name) + ":" + text)
    return '{"fidelity":' + _dumps(fidelity) + ',"scenario":{' + ",".join(parts) + "}}"


INPUT_NAMES = ("gpus", "nodes", "cost_per_hour")  # the keys of input_values, for constraint checks


def input_values(scenario: Any) -> dict[str, Any]:
    """Figures known before a point runs, for constraints: gpus, nodes, cost_per_hour."""
    return {"gpus": scenario.cluster.num_gpus, "nodes": scenario.cluster.num_nodes,
            "cost_per_hour": cluster_price_per_hour(scenario)}


def result_values(scenario: Any, result: RunResult) -> dict[str, Any]:
    """Every figure of a result as a flat mapping over RESULT_COLUMNS (None where it has none)."""
    tp, bd, mem = result.throughput, result.breakdown_s, result.memory
    samples = tp.samples_per_s if tp else None
    tokens = tp.tokens_per_s if tp else None
    goodput = result.goodput.ratio if result.goodput else None
    cost = result.cost  # priced once, where the result is made (engine/state.py with_cost)
    return {
        "status": STATUS_OK, "reason": "", "fidelity": result.fidelity, "gpus": result.gpus,
        "iteration_time_s": result.iteration_time_s, "samples_per_s": samples, "tokens_per_s": tokens,
        "scaling_efficiency": result.scaling_efficiency,
        "compute_s": bd.compute if bd else None, "communication_s": bd.communication if bd else None,
        "exposed_communication_s": bd.exposed_communication if bd else None,
        "compression_s": bd.compression if bd else None, "optimizer_s": bd.optimizer if bd else None,
        "memory_per_gpu_bytes": mem.per_gpu_bytes if mem else None, "memory_fits": mem.fits if mem else None,
        "cost_per_hour_usd": cost.price_per_hour_usd, "cost_per_sample_usd": getattr(cost, "per_sample_usd", None),
        "cost_per_token_usd": getattr(cost, "per_token_usd", None),
        "goodput_ratio": goodput, "meets_constraints": True,
    }


def failed_values(status: str, reason: str, fidelity: str, scenario: Any = None) -> dict[str, Any]:
    """The row of a point that did not produce a result, with its reason."""
    row: dict[str, Any] = {c: None for c in RESULT_COLUMNS}
    row.update(status=status, reason=reason, fidelity=fidelity, meets_constraints=None)
    if scenario is not None:
        row.update(gpus=scenario.cluster.num_gpus, cost_per_hour_usd=cluster_price_per_hour(scenario))
    return row


def cell(value: Any) -> str:
    """How a value is written in the CSV: exact floats, lower-case booleans, JSON for lists and mappings."""
    if value is None:
        return ""
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)):  # numpy scalars
        value = value.item()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(canonical(value), sort_keys=True)
