"""Gradient compression codecs: wire bytes, encode/decode cost, in-network summability."""
from simdist.compression.base import Bucket, BucketCompression, Codec, CodecBase, Collective, CommPlan, bus_bytes, payload_bytes
from simdist.compression.cost import Kernel, KernelCostModel
from simdist.compression.onebit import OneBitCodec
from simdist.compression.powersgd import PowerSgdCodec
from simdist.compression.quantize import Bf16Codec, CastCodec, Fp16Codec, Int8Codec, NoCompression
from simdist.compression.registry import CODECS, make_codec
from simdist.compression.sparse import RandomKCodec, TopKCodec

__all__ = [
    "Bucket", "BucketCompression", "Codec", "CodecBase", "Collective", "CommPlan", "bus_bytes", "payload_bytes",
    "Kernel", "KernelCostModel", "OneBitCodec", "PowerSgdCodec", "Bf16Codec", "CastCodec",
    "Fp16Codec", "Int8Codec", "NoCompression", "CODECS", "make_codec", "RandomKCodec", "TopKCodec",
]
