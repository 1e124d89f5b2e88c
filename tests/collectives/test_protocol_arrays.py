"""protocols._inflate and failures.equivalence on TransferArray steps: the same transfers as the tuples."""
from __future__ import annotations

import numpy as np

from simdist.collectives.protocols import _inflate
from simdist.collectives.schedule import Step, Transfer, TransferArray
from simdist.failures.equivalence import _ends


def _tuple(n: int, size: float = 3e6) -> tuple[Transfer, ...]:
    return tuple(Transfer(i, (i + 1) % n, size + i) for i in range(n))


def test_inflate_keeps_arrays_and_equals_the_tuple_division():
    n, fraction = 200, 0.92
    tr = _tuple(n)
    arr = TransferArray([t.src for t in tr], [t.dst for t in tr], [t.size_bytes for t in tr])
    by_hand = tuple(Transfer(t.src, t.dst, t.size_bytes / fraction) for t in tr)
    from_array = _inflate(Step(arr, repeat=3), fraction).transfers
    from_tuple = _inflate(Step(tr, lockstep=False), fraction).transfers
    assert isinstance(from_array, TransferArray) and isinstance(from_tuple, TransferArray)
    assert from_array == by_hand and from_tuple == by_hand  # the same floats, transfer for transfer
    small = _tuple(5)
    assert _inflate(Step(small), fraction).transfers == tuple(Transfer(t.src, t.dst, t.size_bytes / fraction)
                                                              for t in small)
    assert _inflate(Step(arr), 1.0).transfers is arr


def test_inflate_memo_shares_one_inflated_array_between_steps():
    arr = TransferArray(np.arange(100), (np.arange(100) + 1) % 100, 1e6)
    memo: dict = {}
    a = _inflate(Step(arr, label="reduce-scatter"), 0.5, memo)
    b = _inflate(Step(arr, label="all-gather"), 0.5, memo)
    assert a.transfers is b.transfers


def test_equivalence_reads_the_same_ends_from_arrays_and_tuples():
    tr = _tuple(50)
    arr = TransferArray([t.src for t in tr], [t.dst for t in tr], 1.0)
    for got in (_ends(tr), _ends(arr)):
        assert got[0].tolist() == [t.src for t in tr] and got[1].tolist() == [t.dst for t in tr]
