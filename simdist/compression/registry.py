"""`make_codec`: a scenario's compression spec -> a codec, via one explicit registry dict."""
from __future__ import annotations

import dataclasses
from typing import Callable

from simdist.compression.base import Codec
from simdist.compression.onebit import OneBitCodec
from simdist.compression.powersgd import PowerSgdCodec
from simdist.compression.quantize import Bf16Codec, Fp16Codec, Int8Codec, NoCompression
from simdist.compression.sparse import RandomKCodec, TopKCodec
from simdist.scenario import CompressionMethod, CompressionSpec

PATH = "communication.compression"


def _ratio(spec: CompressionSpec) -> float:
    r = spec.ratio
    assert r is not None and 0 < r <= 1, f"io.rules_training.codec_issues: {PATH}.ratio in (0, 1], got {r!r}"
    return float(r)


def _rank(spec: CompressionSpec) -> int:
    r = 1 if spec.rank is None else spec.rank  # torch's PowerSGDState default
    assert isinstance(r, int) and r >= 1, f"io.rules_training.codec_issues: {PATH}.rank >= 1, got {r!r}"
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
    """The codec for `spec`, whose parameters io/ checked (io.rules_training.codec_issues: a scenario's, or
    io.compare_input.check_codec for a spec built in code).

    `cost_factor` scales its encode/decode kernel times (a calibration profile's measured codec factor).
    """
    method = CompressionMethod(spec.method)
    assert spec.ratio is None or method in USES_RATIO, f"{PATH}.ratio with {method.value}"
    assert spec.rank is None or method in USES_RANK, f"{PATH}.rank with {method.value}"
    assert spec.error_feedback or method in USES_ERROR_FEEDBACK, f"{PATH}.error_feedback off with {method.value}"
    codec = CODECS[method](spec)
    if cost_factor != 1.0 and dataclasses.is_dataclass(codec) and hasattr(codec, "cost"):
        codec = dataclasses.replace(codec, cost=dataclasses.replace(codec.cost, calibration=cost_factor))  # type: ignore[type-var]
    return codec
