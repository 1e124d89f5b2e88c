"""Sharded data parallelism (ZeRO stages 1-3, FSDP = stage 3): the collectives of one step over the dp group.

ZeRO-1 and -2 (Rajbhandari et al. 2020, section 7) reduce_scatter each unit's gradients as backward produces
them (each rank keeps the reduced shard it updates) and all_gather the updated parameters after the optimizer
step: the same 2Ψ wire volume as DDP's all_reduce. They differ in memory only (stage 2 frees the gradients
outside its shard). ZeRO-3 / FSDP all_gather each unit's parameters before its forward and again before its
backward (resharded in between), each prefetched one unit ahead so the gather overlaps the previous unit's
compute, and reduce_scatter its gradients after its backward: 3Ψ, 1.5x DDP. Units are FSDP's transformer
wrapping: one per block, plus a root unit of the remaining layers (embeddings, final norm, head).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Sequence

from simdist.collectives.schedule import CollectiveOp
from simdist.errors import ScenarioError
from simdist.workload.specs import ModelSpec

ZERO_KEY = "training.parallelism.zero"
_BLOCK = re.compile(r"^((?:blocks|encoder)\.\d+)\.")


class ShardPhase(StrEnum):
    FWD = "fwd"
    BWD = "bwd"
    STEP = "step"  # after the optimizer step


@dataclass(frozen=True)
class ShardUnit:
    """A group of layers whose parameters are gathered and sharded together (an FSDP unit)."""

    name: str
    layers: tuple[int, ...]  # layer indices, forward order
    params: int


@dataclass(frozen=True)
class ShardCollective:
    """One collective on the dp group; `size_bytes` is the full, unsharded tensor (nccl-tests convention).

    It is needed before (`phase`, `unit`) runs — or, for reduce_scatters, follows it — and may be issued as
    soon as `issue_with` (phase, unit) starts: the one-ahead prefetch. None: when its dependency is met.
    """

    op: CollectiveOp
    size_bytes: float
    phase: ShardPhase
    unit: int | None
    what: str
    issue_with: tuple[ShardPhase, int] | None = None


def fsdp_units(model: ModelSpec) -> tuple[ShardUnit, ...]:
    """One unit per transformer block (in forward order) and a root unit of every other layer with params.

    A model without recognised blocks is one unit per layer with parameters."""
    blocks: dict[str, list[int]] = {}
    root: list[int] = []
    for i, layer in enumerate(model.layers):
        m = _BLOCK.match(layer.name)
        if m:
            blocks.setdefault(m.group(1), []).append(i)
        elif layer.params:
            root.append(i)
    if not blocks:
        return tuple(ShardUnit(x.name, (i,), x.params) for i, x in enumerate(model.layers) if x.params)
    units = [ShardUnit(k, tuple(v), sum(model.layers[i].params for i in v)) for k, v in blocks.items()]
    if root:
        units.insert(0, ShardUnit("root", tuple(root), sum(model.layers[i].params for i in root)))
    return tuple(units)


def zero_collectives(zero: int, units: Sequence[ShardUnit], dp: int, param_bytes: int,
                     grad_bytes: int) -> tuple[ShardCollective, ...]:
    """The dp-group collectives of one step for ZeRO stage `zero` (0 = DDP's all_reduce, for comparison).

    Parameters are gathered in their compute dtype (`param_bytes`), gradients reduced in `grad_bytes`.
    Backward visits the units in reverse. dp = 1 has nothing to communicate.
    """
    if zero not in (0, 1, 2, 3):
        raise ScenarioError.bad_value(ZERO_KEY, zero, "0, 1, 2 or 3 (3 = fsdp)")
    if isinstance(dp, bool) or not isinstance(dp, int) or dp < 1:
        raise ScenarioError.bad_value("training.parallelism.dp", dp, "a positive integer")
    if dp == 1:
        return ()
    AR, RS, AG = CollectiveOp.ALL_REDUCE, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_GATHER
    F, B, S = ShardPhase.FWD, ShardPhase.BWD, ShardPhase.STEP
    n = len(units)
    has_root = n > 1 and units[0].name == "root"
    # backward needs the root unit first (the LM head runs first) and finishes its gradients last (embeddings)
    blocks_back = [j for j in reversed(range(n)) if not (has_root and j == 0)]
    gather_back = ([0] if has_root else []) + blocks_back
    out: list[ShardCollective] = []
    if zero == 3:
        for j in range(n):
            out.append(ShardCollective(AG, units[j].params * param_bytes, F, j, f"{units[j].name} parameters",
                                       (F, j - 1) if j > 0 else None))
        for k, j in enumerate(gather_back):
            out.append(ShardCollective(AG, units[j].params * param_bytes, B, j, f"{units[j].name} parameters",
                                       (B, gather_back[k - 1]) if k > 0 else None))
    grad_op = AR if zero == 0 else RS
    for j in blocks_back + ([0] if has_root else []):
        out.append(ShardCollective(grad_op, units[j].params * grad_bytes, B, j, f"{units[j].name} gradients"))
    if zero in (1, 2):
        out.append(ShardCollective(AG, sum(u.params for u in units) * param_bytes, S, None,
                                   "updated parameters"))
    return tuple(out)


RING_SEND_FACTOR = {
    CollectiveOp.ALL_REDUCE: lambda n: 2 * (n - 1) / n,
    CollectiveOp.REDUCE_SCATTER: lambda n: (n - 1) / n,
    CollectiveOp.ALL_GATHER: lambda n: (n - 1) / n,
}


def wire_bytes_per_rank(collectives: Sequence[ShardCollective], dp: int) -> float:
    """Bytes each rank sends for these collectives with bandwidth-optimal (ring) algorithms."""
    return math.fsum(RING_SEND_FACTOR[c.op](dp) * c.size_bytes for c in collectives)


def zero3_live_param_bytes(units: Sequence[ShardUnit], param_bytes: int) -> float:
    """Peak bytes of gathered (unsharded) parameters under ZeRO-3: a unit plus the next one being prefetched."""
    sizes = [u.params * param_bytes for u in units]
    if len(sizes) < 2:
        return float(sum(sizes))
    return float(max(a + b for a, b in zip(sizes, sizes[1:])))
