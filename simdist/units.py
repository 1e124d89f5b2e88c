"""Quantities with units: "200 Gb/s", "25 MiB", "1.5 us", "30 min", "312 TFLOP/s".

Inside simdist everything is SI (bytes, bytes/s, seconds, FLOP/s); strings are parsed here and
only called from io/. `b` is bits, `B` bytes; SI (k, M, G, T, P) and binary (Ki, Mi, Gi, Ti, Pi)
prefixes. A bare number is an error: the unit is part of the value.
"""
from __future__ import annotations

import math
import re
from enum import StrEnum

from simdist.errors import Issue, ScenarioError


class Dimension(StrEnum):
    SIZE = "size"
    BANDWIDTH = "bandwidth"
    TIME = "time"
    FLOPS = "flops"


_EXAMPLES = {
    Dimension.SIZE: "a size like '25 MB', '25 MiB' or '8 Gb'",
    Dimension.BANDWIDTH: "a bandwidth like '100 Gb/s' or '400 GB/s'",
    Dimension.TIME: "a duration like '2 us', '1.5 ms', '30 min' or '2 h'",
    Dimension.FLOPS: "a compute rate like '312 TFLOP/s'",
}

_PREFIX = {
    "": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60,
}
_TIME_UNITS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0,
    "min": 60.0, "h": 3600.0, "hr": 3600.0, "d": 86400.0, "day": 86400.0, "days": 86400.0,
}
_NUMBER = r"(?P<num>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
_RE = re.compile(_NUMBER + r"\s*(?P<unit>\S*)\s*$")
_PREFIX_RE = "(?P<prefix>Ki|Mi|Gi|Ti|Pi|Ei|k|K|M|G|T|P|E)?"
_SIZE_RE = re.compile("^" + _PREFIX_RE + "(?P<base>B|b|bit|bits|byte|bytes)$")
_BW_RE = re.compile("^" + _PREFIX_RE + "(?P<base>B|b|bit)/s$")
_FLOPS_RE = re.compile("^" + _PREFIX_RE + "(?P<base>FLOP/s|FLOPS|flop/s)$")
_VALID_UNITS = {  # the spellings a suggestion may propose, per dimension
    Dimension.SIZE: ["B", "kB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "b", "kb", "Mb", "Gb", "Tb"],
    Dimension.BANDWIDTH: ["b/s", "kb/s", "Mb/s", "Gb/s", "Tb/s", "B/s", "kB/s", "MB/s", "GB/s", "TB/s",
                          "MiB/s", "GiB/s"],
    Dimension.TIME: ["ns", "us", "ms", "s", "min", "h", "d"],
    Dimension.FLOPS: ["GFLOP/s", "TFLOP/s", "PFLOP/s"],
}
_TIME_FIXES = {
    "μs": "us", "usec": "us", "msec": "ms", "nsec": "ns", "secs": "s", "second": "s", "seconds": "s",
    "mins": "min", "minute": "min", "minutes": "min", "hour": "h", "hours": "h", "hrs": "h", "mn": "min",
}


def _split(value: object, dim: Dimension, path: str) -> tuple[float, str]:
    expected = _EXAMPLES[dim]
    if isinstance(value, bool) or isinstance(value, (int, float)):
        raise ScenarioError.bad_value(path, value, f"{expected} (a bare number has no unit)")
    if not isinstance(value, str):
        raise ScenarioError.bad_value(path, value, expected)
    m = _RE.match(value.strip())
    if not m:
        raise ScenarioError.bad_value(path, value, expected)
    num = float(m.group("num"))
    if not math.isfinite(num):
        raise ScenarioError.bad_value(path, value, f"a finite number; {expected}")
    unit = m.group("unit")
    if not unit:
        raise ScenarioError.bad_value(path, value, f"{expected} (the unit is missing)")
    return num, unit


def _normalised(unit: str, dim: Dimension) -> str:
    """'gbit' -> 'gb/s', 'Gbps' -> 'Gb/s', 'bytes' -> 'B': the spelling with the long forms folded."""
    if dim is Dimension.TIME:
        return _TIME_FIXES.get(unit, unit)
    u = re.sub(r"bits?(?=/|ps|$)", "b", unit)
    u = re.sub(r"bytes?(?=/|ps|$)", "B", u)
    if dim is Dimension.BANDWIDTH:
        u = re.sub(r"ps$", "/s", u)
        u = re.sub(r"(?<=[bB])s$", "/s", u)
        if not u.endswith("/s"):
            u += "/s"
    return u


def unit_suggestions(unit: str, dim: Dimension) -> list[str]:
    """Units the user probably meant: exact after folding long forms, else the case-insensitive matches
    (both 'Gb/s' and 'GB/s' for 'gb/s': bits and bytes differ 8x, so simdist does not guess between them)."""
    folded = _normalised(unit, dim)
    valid = _VALID_UNITS[dim]
    if folded in valid and folded != unit:
        return [folded]
    same_letters = [v for v in valid if v.lower() == folded.lower() and v != unit]
    base = "b" if ("bit" in unit.lower() or unit.endswith("bps")) else "B" if ("byte" in unit.lower() or
                                                                              unit.endswith("Bps")) else ""
    if base:  # 'gbit' and 'gbps' say bits, 'gbytes' bytes, whatever the case of the prefix
        same_letters = [v for v in same_letters if v.removesuffix("/s")[-1] == base]
    if same_letters:
        return same_letters
    import difflib

    return [v for v in difflib.get_close_matches(folded, valid, n=1, cutoff=0.8) if v != unit]


def _unknown_unit(path: str, value: object, unit: str, dim: Dimension) -> ScenarioError:
    number = str(value).strip()[: -len(unit)].strip()
    near = unit_suggestions(unit, dim)
    hint = ""
    if near:
        hint = " (did you mean " + " or ".join(f"'{number} {u}'" for u in near) + "?)"
    return ScenarioError(Issue(path, f"got {value!r}: unknown unit '{unit}'{hint}; expected {_EXAMPLES[dim]}"))


def _check_sign(num: float, value: object, dim: Dimension, path: str, allow_zero: bool) -> None:
    if num < 0 or (num == 0 and not allow_zero):
        must = "non-negative" if allow_zero else "positive"
        raise ScenarioError.bad_value(path, value, f"a {must} {dim.value}")


def parse_size(value: object, path: str = "", allow_zero: bool = False) -> float:
    """Bytes from '25 MB' (SI), '25 MiB' (binary) or '8 Gb' (bits)."""
    num, unit = _split(value, Dimension.SIZE, path)
    m = _SIZE_RE.match(unit)
    if not m:
        raise _unknown_unit(path, value, unit, Dimension.SIZE)
    scale = _PREFIX[m.group("prefix") or ""]
    if m.group("base") in ("b", "bit", "bits"):
        scale /= 8.0
    _check_sign(num, value, Dimension.SIZE, path, allow_zero)
    return num * scale


def parse_bandwidth(value: object, path: str = "") -> float:
    """Bytes per second from '100 Gb/s' (bits) or '400 GB/s' (bytes)."""
    num, unit = _split(value, Dimension.BANDWIDTH, path)
    m = _BW_RE.match(unit)
    if not m:
        raise _unknown_unit(path, value, unit, Dimension.BANDWIDTH)
    scale = _PREFIX[m.group("prefix") or ""]
    if m.group("base") in ("b", "bit"):
        scale /= 8.0
    _check_sign(num, value, Dimension.BANDWIDTH, path, allow_zero=False)
    return num * scale


def parse_duration(value: object, path: str = "", allow_zero: bool = True) -> float:
    """Seconds from '2 us', '1.5 ms', '30 min', '2 h'."""
    num, unit = _split(value, Dimension.TIME, path)
    if unit not in _TIME_UNITS:
        raise _unknown_unit(path, value, unit, Dimension.TIME)
    _check_sign(num, value, Dimension.TIME, path, allow_zero)
    return num * _TIME_UNITS[unit]


def parse_flops(value: object, path: str = "") -> float:
    """FLOP/s from '312 TFLOP/s'."""
    num, unit = _split(value, Dimension.FLOPS, path)
    m = _FLOPS_RE.match(unit)
    if not m:
        raise _unknown_unit(path, value, unit, Dimension.FLOPS)
    _check_sign(num, value, Dimension.FLOPS, path, allow_zero=False)
    return num * _PREFIX[m.group("prefix") or ""]


PARSERS = {
    Dimension.SIZE: parse_size,
    Dimension.BANDWIDTH: parse_bandwidth,
    Dimension.TIME: parse_duration,
    Dimension.FLOPS: parse_flops,
}


def _scaled(value: float, steps: list[tuple[float, str]], fmt: str) -> str:
    for scale, name in steps:
        if abs(value) >= scale:
            return f"{value / scale:{fmt}} {name}"
    scale, name = steps[-1]
    return f"{value / scale:{fmt}} {name}"


def format_size(size_bytes: float) -> str:
    """'25.0 MB' (SI, bytes) for display."""
    return _scaled(size_bytes, [(1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B")], ".3g")


def format_memory(size_bytes: float) -> str:
    """'13.3 GiB' (binary) for GPU and host memory, which is sold in binary units: an '80 GB' A100 has 80 GiB."""
    return _scaled(size_bytes, [(2.0**40, "TiB"), (2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB"), (1.0, "B")],
                   ".3g")


def format_bandwidth(bandwidth_Bps: float, bits: bool = True) -> str:
    """'200 Gb/s' (bits, as NICs are sold) or '300 GB/s' (bytes) for display."""
    if bits:
        return _scaled(bandwidth_Bps * 8, [(1e12, "Tb/s"), (1e9, "Gb/s"), (1e6, "Mb/s"), (1e3, "kb/s"), (1.0, "b/s")], ".4g")
    return _scaled(bandwidth_Bps, [(1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1.0, "B/s")], ".4g")


def format_duration(seconds: float) -> str:
    """'1.5 ms', '30 min' for display."""
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    return _scaled(seconds, [(1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")], ".4g")


def format_flops(flops: float) -> str:
    """'312 TFLOP/s' for display."""
    return _scaled(flops, [(1e18, "EFLOP/s"), (1e15, "PFLOP/s"), (1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1.0, "FLOP/s")], ".4g")
