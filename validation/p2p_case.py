"""Point-to-point microbenchmark run inside a worker: send/recv between one pair of ranks at a time.

Ping-pong (small messages, latency): the sender sends S bytes, the receiver sends them back; the
point is half the round trip. Stream (large messages, bandwidth): one send of S bytes; the point is
the time until both ends are done. Every repetition is barrier-aligned over all ranks and the MAX
over ranks is kept (validation/timing.py); ranks outside the pair only take part in the barriers.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist

from simdist.validation.cases import Case, P2pMode
from simdist.validation.timing import summarize, timed_max

# ping-pongs cost well under 10 ms each but their software latency on shared cores is noisy (0.3-5 ms):
# take at least this many repetitions (and 2 warm-ups) for the median
PINGPONG_MIN_REPS = 15


def _op(a: int, b: int, mode: P2pMode, buf: torch.Tensor) -> Callable[[], None]:
    rank = dist.get_rank()

    def pingpong() -> None:
        if rank == a:
            dist.send(buf, b)
            dist.recv(buf, b)
        elif rank == b:
            dist.recv(buf, a)
            dist.send(buf, a)

    def stream() -> None:
        if rank == a:
            dist.send(buf, b)
        elif rank == b:
            dist.recv(buf, a)

    return pingpong if mode is P2pMode.PINGPONG else stream


def run_p2p_case(case: Case, device: str, sync: Callable[[], None]) -> dict[str, object]:
    """Every pair x size of `case`; points carry pair, pair_class, mode and the one-way time (s)."""
    world = dist.get_world_size()
    points = []
    for a, b in case.pair_list:
        if max(a, b) >= world:
            raise ValueError(f"p2p pair {a}-{b} needs more than {world} ranks")
        for size in case.sizes_bytes:
            mode = case.p2p_mode(size)
            buf = torch.ones(max(1, int(size // 4)), device=device)
            if mode is P2pMode.PINGPONG:
                times = timed_max(_op(a, b, mode, buf), max(2, case.warmup), max(PINGPONG_MIN_REPS, case.reps), sync)
                times = [t / 2 for t in times]
            else:
                times = timed_max(_op(a, b, mode, buf), case.warmup, case.reps, sync)
            s = summarize(times)
            points.append({"size_bytes": float(buf.numel() * 4), "pair": [a, b], "pair_class": case.pair_class(a, b),
                           "mode": str(mode), **s, "bandwidth_Bps": buf.numel() * 4 / s["median_s"]})
    return {"case": case.to_dict(), "label": case.label, "points": points}
