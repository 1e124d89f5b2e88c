"""Registry of the flat (single-level) algorithms and the ops each offers; hierarchical and 2D
schemes compose these over subgroups."""
from __future__ import annotations

from typing import Callable, Sequence

from simdist.collectives._steps import Chain
from simdist.collectives.halving_doubling import halving_doubling_chain
from simdist.collectives.ring import ring_chain
from simdist.collectives.schedule import CollectiveOp
from simdist.collectives.tree import tree_chain

Op = CollectiveOp
ChainBuilder = Callable[[CollectiveOp, float, Sequence[int], "int | None"], Chain]

FLAT_BUILDERS: dict[str, ChainBuilder] = {
    "ring": ring_chain,
    "tree": tree_chain,
    "halving_doubling": halving_doubling_chain,
}

FLAT_OPS: dict[str, frozenset[CollectiveOp]] = {
    "ring": frozenset(CollectiveOp),
    "tree": frozenset({Op.ALL_REDUCE, Op.BROADCAST, Op.REDUCE}),
    "halving_doubling": frozenset({Op.ALL_REDUCE, Op.REDUCE_SCATTER, Op.ALL_GATHER}),
}


def flat_chain(algorithm: str, op: CollectiveOp, size_bytes: float, ranks: Sequence[int], chunks: int | None = None) -> Chain:
    """Steps of a flat algorithm over `ranks`; ValueError names what exists when the pair does not."""
    if algorithm not in FLAT_BUILDERS:
        raise ValueError(f"unknown flat algorithm {algorithm!r}; expected one of {sorted(FLAT_BUILDERS)}")
    if op not in FLAT_OPS[algorithm]:
        raise ValueError(
            f"{algorithm} has no {op} schedule; it offers {sorted(str(o) for o in FLAT_OPS[algorithm])}"
        )
    return FLAT_BUILDERS[algorithm](CollectiveOp(op), size_bytes, ranks, chunks)
