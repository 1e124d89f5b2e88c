"""The tuner's promise, shared by the tuner tests: `backend: nccl` never runs a candidate that simdist
itself predicts slower than the one it chose."""
from __future__ import annotations

from simdist.collectives.backends import nccl_candidate
from simdist.collectives.nccl import candidates


def assert_never_slower(ctx, ops=("all_reduce", "all_gather", "reduce_scatter"), exponents=range(10, 31, 3)) -> None:
    """For every op and size 2**k, the chosen schedule is no slower (by simdist's own timer) than any
    candidate NCCL would consider on the context's hardware."""
    tuning = ctx._tuning()
    timer, fabric = tuning["timer"], tuning["fabric"]
    for op in ops:
        for k in exponents:
            size = float(2 ** k)
            chosen = timer(ctx.schedule(op, size))
            for alg, proto in candidates(op, ctx.group.size, len(ctx.group.nodes), fabric):
                other = nccl_candidate(op, alg, proto, size, ctx.group, fabric=fabric, channels=ctx.channels,
                                       timer=timer)
                assert chosen <= timer(other) * (1 + 1e-12), (op, size, alg, proto)
