"""Pausing Python's cyclic garbage collector while a phase allocates many long-lived objects.

Building a 100k-GPU topology, its router's tables, a schedule's transfers or a step's routes creates
millions of objects that all survive; each collection the allocations trigger walks a heap that only
grows, which costs a third or more of those phases. Reference counting still frees everything that
is not in a cycle; cycles made meanwhile are collected once the phase ends.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the block (nested blocks and a collector already off: no-op)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
