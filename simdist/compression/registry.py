"""`make_codec`: a scenario's compression spec -> a codec, via one explicit registry dict."""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

from simdist.compression.base import Codec
from simdist.compression.onebit import OneBitCodec
from simdist.compression.powersgd import PowerSgdCodec
from simdist.compression.quantize import Bf16Codec, Fp16Codec, Int8Codec, NoCompression
from simdist.compression.sparse import RandomKCodec, TopKCodec
from simdist.errors import Issue, ScenarioError
from simdist.scenario import CompressionMethod, CompressionSpec

PATH = "communication.compression"


def _ratio(spec: CompressionSpec) -> float:
    r = spec.ratio
    if r is None:
        raise ScenarioError(Issue(f"{PATH}.ratio", f"is required for method {spec.method.value!r}: "
                                  "the fraction of elements kept, in (0, 1], e.g. 0.01"))
    if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or not 0 < r <= 1:
        raise ScenarioError.bad_value(f"{PATH}.ratio", r, "a fraction of elements kept in (0, 1], e.g. 0.01")
    return float(r)


def _rank(spec: CompressionSpec) -> int:
    r = 1 if spec.rank is None else spec.rank  # torch's PowerSGDState default
    if isinstance(r, bool) or not isinstance(r, int) or r < 1:
        raise ScenarioError.bad_value(f"{PATH}.rank", r, "an integer rank >= 1, e.g. 4")
    return r


CODECS: dict[CompressionMethod, Callable[[CompressionSpec], Codec]] = {
    CompressionMethod.NONE: lambda s: NoCompression(),
    CompressionMethod.FP16: lambda s: Fp16Codec(),
    CompressionMethod.BF16: lambda s: Bf16Codec(),
    CompressionMethod.INT8: lambda s: Int8Codec(),
    CompressionMethod.ONEBIT: lambda s: OneBitCodec(error_feedback=s.error_feedback),
    CompressionMethod.TOPK: lambda s: TopKCodec(ratio=_ratio(s), error_feedback=s.error_feedback),
    CompressionMethod.RANDOMK: lambda s: RandomKCodec(ratio=_ratio(s), error_feedback=s.error_feedback),
    CompressionMethod.POWERSGD: lambda s: PowerSgdCodec(rank=_rank(s), error_feedback=s.error_feedback),
}
USES_RATIO = {CompressionMethod.TOPK, CompressionMethod.RANDOMK}
USES_RANK = {CompressionMethod.POWERSGD}
USES_ERROR_FEEDBACK = {CompressionMethod.ONEBIT, CompressionMethod.TOPK, CompressionMethod.RANDOMK,
                        CompressionMethod.POWERSGD}


def make_codec(spec: CompressionSpec, cost_factor: float = 1.0) -> Codec:
    """The codec for `spec`; ScenarioError (naming communication.compression.*) on bad parameters.

    `cost_factor` scales its encode/decode kernel times (a calibration profile's measured codec factor).
    """
    try:
        method = CompressionMethod(spec.method)
    except ValueError:
        raise ScenarioError.bad_value(f"{PATH}.method", spec.method,
                                      "one of " + ", ".join(m.value for m in CompressionMethod)) from None
    if spec.ratio is not None and method not in USES_RATIO:
        raise ScenarioError.bad_value(f"{PATH}.ratio", spec.ratio,
                                      f"no ratio for method {method.value!r} (only topk and randomk take one)")
    if spec.rank is not None and method not in USES_RANK:
        raise ScenarioError.bad_value(f"{PATH}.rank", spec.rank,
                                      f"no rank for method {method.value!r} (only powersgd takes one)")
    if not spec.error_feedback and method not in USES_ERROR_FEEDBACK:
        raise ScenarioError.bad_value(f"{PATH}.error_feedback", False,
                                      f"true (method {method.value!r} keeps no residual; only onebit, topk, randomk "
                                      "and powersgd have error feedback to turn off)")
    codec = CODECS[method](spec)
    if cost_factor != 1.0 and dataclasses.is_dataclass(codec) and hasattr(codec, "cost"):
        codec = dataclasses.replace(codec, cost=dataclasses.replace(codec.cost, calibration=cost_factor))  # type: ignore[type-var]
    return codec
