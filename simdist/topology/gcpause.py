"""Keeping Python's cyclic garbage collector off the objects a phase builds to last.

Building a 100k-GPU topology, its router's tables, a schedule's transfers or a step's routes creates
millions of objects that all survive; each collection the allocations trigger walks a heap that only
grows, which costs a third or more of those phases. Reference counting still frees everything that
is not in a cycle; cycles made meanwhile are collected once the phase ends.

Within one run (`run_heap`, around engine/simulation.simulate) a phase whose objects last the whole run
(a pipeline's task graphs, their fold, their records) also moves them out of the collector's sight when it
ends (`gc.freeze`): later collections, which the executor's events trigger by the thousand, then walk only
what the run made since, not the whole plan again. The run's end puts every frozen object back in the oldest
generation (`gc.unfreeze`), collectable as usual once the run drops it.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

_IN_RUN: ContextVar[bool] = ContextVar("simdist_in_run", default=False)


@contextmanager
def gc_paused(lasts_the_run: bool = False) -> Iterator[None]:
    """Disable the cyclic collector for the block (nested blocks and a collector already off: no-op).

    `lasts_the_run`: what the block builds lives until the run ends, so inside `run_heap` it is frozen when
    the block ends (and with it whatever else is alive then: a phase between builds makes little garbage)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if lasts_the_run and _IN_RUN.get():
            gc.freeze()
        gc.enable()


@contextmanager
def run_heap() -> Iterator[None]:
    """One run's scope for `gc_paused(lasts_the_run=True)`: on exit every frozen object is unfrozen."""
    if _IN_RUN.get():
        yield
        return
    token = _IN_RUN.set(True)
    try:
        yield
    finally:
        _IN_RUN.reset(token)
        gc.unfreeze()
