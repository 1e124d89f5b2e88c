"""DeepSeek's multi-head latent attention (MLA; DeepSeek-V2, arXiv:2405.04434, section 2.1; DeepSeek-V3,
arXiv:2412.19437, section 2.1.1): queries and keys/values go through low-rank latents.

Per token: the query latent c_q = W_DQ x (q_lora_rank, RMS-normed), the queries W_UQ c_q (heads x (no-RoPE +
RoPE head dims)); the key/value latent and one shared RoPE key W_DKV x (kv_lora_rank + RoPE dim, the latent
RMS-normed); the keys' no-RoPE parts and the values W_UKV c_kv (heads x (no-RoPE + value head dims)); the
attention core over keys of no-RoPE + RoPE width and values of the value width; the output projection from
heads x value dim back to the hidden size. Layer names follow Megatron-Core's tensor parallelism: the two
down-projections (and their norms) run whole on every tp rank ("duplicated" in Megatron-Core's MLA), the two
up-projections are one column-parallel layer `attn.qkv`, the core splits by heads, `attn.proj` is row-parallel.
"""
from __future__ import annotations

from dataclasses import dataclass

from simdist.workload import layers as L
from simdist.workload.specs import LayerSpec


@dataclass(frozen=True)
class MlaSpec:
    """MLA's dimensions (HF DeepSeek-V3 config.json names); `q_lora_rank` None: queries projected directly."""

    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None

    def __post_init__(self) -> None:
        for label in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "q_lora_rank"):
            v = getattr(self, label)
            if v is None and label == "q_lora_rank":
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{label} must be a positive integer, got {v!r}")

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim


def _rmsnorm(name: str, tokens: int, channels: int) -> LayerSpec:
    return L.norm(name, tokens * channels, channels, bias=False, flops_per_elem=L.RMSNORM_FLOPS_PER_ELEM)


def mla_projections(prefix: str, hidden: int, heads: int, mla: MlaSpec, s: int) -> list[LayerSpec]:
    """The layers before the attention core on s tokens: the down-projections, their norms and the
    up-projections (`attn.qkv`, two weight tensors: W_UQ and W_UKV)."""
    qk, rope = mla.qk_head_dim, mla.qk_rope_head_dim
    out: list[LayerSpec] = []
    q_in = hidden
    if mla.q_lora_rank is not None:
        q_in = mla.q_lora_rank
        out += [L.linear(f"{prefix}.attn.q_down", s, hidden, q_in, bias=False),
                _rmsnorm(f"{prefix}.attn.q_norm", s, q_in)]
    out += [L.linear(f"{prefix}.attn.kv_down", s, hidden, mla.kv_lora_rank + rope, bias=False),
            _rmsnorm(f"{prefix}.attn.kv_norm", s, mla.kv_lora_rank)]
    q_out, kv_out = heads * qk, heads * (mla.qk_nope_head_dim + mla.v_head_dim)
    shapes = ((q_out, q_in), (kv_out, mla.kv_lora_rank))
    params = q_out * q_in + kv_out * mla.kv_lora_rank
    in_elems = s * (q_in + mla.kv_lora_rank)
    out.append(LayerSpec(f"{prefix}.attn.qkv", "linear", params, 2.0 * s * params, in_elems, s * (q_out + kv_out),
                         in_elems, shapes))
    return out


def mla_core_dims(heads: int, mla: MlaSpec, s: int, rotary: bool = True, keys: float | None = None) -> L.CoreDims:
    """The attention core's operands: Q and K of no-RoPE + RoPE head width (each head's key concatenates the
    shared RoPE key), V and the output of the value head width; RoPE rotates every head's query RoPE part and the
    one shared key. `keys`: the keys each query's scores are computed against (all s by default)."""
    qk, v = heads * mla.qk_head_dim, heads * mla.v_head_dim
    k = s if keys is None else keys
    rotated = s * (heads + 1) * mla.qk_rope_head_dim if rotary else 0
    return L.CoreDims(s * qk, s * qk, s * v, s * v, 2.0 * s * k * qk, 2.0 * s * k * v, rotated)


def mla_output(prefix: str, hidden: int, heads: int, mla: MlaSpec, s: int) -> LayerSpec:
    """The output projection, heads x value dim -> hidden (row-parallel)."""
    return L.linear(f"{prefix}.attn.proj", s, heads * mla.v_head_dim, hidden, bias=False)
