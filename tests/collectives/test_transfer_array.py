"""TransferArray reads as the tuple of Transfers it stands for; ring schedules built on it equal the
same schedules written transfer by transfer."""
from __future__ import annotations

import pickle

import pytest

from simdist.collectives._steps import merge_parallel, ring_transfers
from simdist.collectives.ring import channel_rings, ring_chain
from simdist.collectives.schedule import CollectiveOp, Group, Step, Transfer, TransferArray


def _tuple(ranks, size, direction=1):
    n = len(ranks)
    return tuple(Transfer(ranks[i], ranks[(i + direction) % n], size) for i in range(n))


@pytest.mark.parametrize("direction", [1, -1])
def test_ring_transfers_read_as_the_tuple(direction):
    ranks = (4, 9, 2, 7, 11)
    arr, ref = ring_transfers(ranks, 2.5, direction), _tuple(ranks, 2.5, direction)
    assert isinstance(arr, TransferArray)
    assert len(arr) == len(ref) and tuple(arr) == ref and arr == ref and ref == arr
    assert arr[0] == ref[0] and arr[-1] == ref[-1] and tuple(arr[1:3]) == ref[1:3]
    assert all(type(t.src) is int and type(t.size_bytes) is float for t in arr)
    assert arr + ref == ref + ref and ref + arr == ref + ref and tuple(arr + arr) == ref + ref
    assert pickle.loads(pickle.dumps(arr)) == arr and hash(pickle.loads(pickle.dumps(arr))) == hash(arr)
    assert arr != _tuple(ranks, 2.0, direction) and arr != ring_transfers(ranks, 2.0, direction)
    assert arr.pairs() == [(t.src, t.dst) for t in ref]


def test_arrays_are_read_only():
    arr = ring_transfers((0, 1, 2), 1.0)
    with pytest.raises(ValueError):
        arr.src[0] = 5


def test_ring_and_merged_steps_equal_their_tuple_forms():
    group = Group.flat(tuple(range(16)), 4)
    for ring in channel_rings(group, 4):
        assert isinstance(ring, tuple) and sorted(ring) == list(range(16))
    chains = [ring_chain(CollectiveOp.REDUCE_SCATTER, 8.0, node) for node in group.nodes]
    merged = merge_parallel(chains)
    ref = Step(tuple(t for c in chains for t in tuple(c[0].transfers)), repeat=3, reduce_bytes=2.0,
               label="ring reduce-scatter", pipelined=True)
    assert merged[0] == ref and isinstance(merged[0].transfers, TransferArray)
