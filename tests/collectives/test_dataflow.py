"""Symbolic data flow: the schedules really perform their op (which contributions every rank holds
for every block after the last step), for small groups of every size."""
from __future__ import annotations

from collections import Counter

import pytest

from simdist.collectives.algorithms import build_schedule
from simdist.collectives.gloo import gloo_broadcast_chain
from simdist.collectives.schedule import Group
from simdist.collectives.tree import bit_tree, double_tree

from .symbolic import full, initial, run_phases

SIZES = range(1, 10)


def _lcm_blocks(n: int) -> int:
    return 1 if n <= 1 else n * 4


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("alg", ["ring", "halving_doubling"])
def test_all_reduce_every_rank_holds_every_contribution(n, alg):
    ranks = tuple(range(10, 10 + n))  # endpoint ids need not start at 0
    blocks = 8 * n  # divisible by n and by any power of two <= n
    size = float(blocks)
    sched = build_schedule("all_reduce", alg, size, Group.flat(ranks, n))
    state = initial(ranks, blocks)
    (chain,) = sched.chains
    run_phases(state, chain, {r: list(range(blocks)) for r in ranks}, size / blocks)
    for r in ranks:
        for b in range(blocks):
            assert state[r][b] == full(ranks), (r, b)


@pytest.mark.parametrize("n", SIZES)
def test_ring_reduce_scatter_leaves_rank_i_with_chunk_i(n):
    ranks = tuple(range(n))
    sched = build_schedule("reduce_scatter", "ring", float(n), Group.flat(ranks, n))
    state = initial(ranks, n)
    ranges = run_phases(state, sched.chains[0], {r: list(range(n)) for r in ranks}, 1.0)
    for i, r in enumerate(ranks):
        assert ranges[r] == [i]
        assert state[r][i] == full(ranks)


@pytest.mark.parametrize("n", SIZES)
def test_ring_all_gather_gives_everyone_every_chunk(n):
    ranks = tuple(range(n))
    sched = build_schedule("all_gather", "ring", float(n), Group.flat(ranks, n))
    state = {r: {b: Counter({b: 1}) if b == i else Counter() for b in range(n)} for i, r in enumerate(ranks)}
    run_phases(state, sched.chains[0], {r: [i] for i, r in enumerate(ranks)}, 1.0)
    for r in ranks:
        assert all(state[r][b] == Counter({b: 1}) for b in range(n))


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_halving_reduce_scatter_leaves_rank_i_with_block_i(n):
    ranks = tuple(range(n))
    sched = build_schedule("reduce_scatter", "halving_doubling", float(n), Group.flat(ranks, n))
    state = initial(ranks, n)
    ranges = run_phases(state, sched.chains[0], {r: list(range(n)) for r in ranks}, 1.0)
    for i, r in enumerate(ranks):
        assert ranges[r] == [i] and state[r][i] == full(ranks)


HIER_GROUPS = [(2, 3), (3, 2), (2, 4), (4, 2), (3, 3), (1, 4), (4, 1), (2, 2)]


@pytest.mark.parametrize("nodes,per_node", HIER_GROUPS)
@pytest.mark.parametrize("intra,inter", [("ring", "ring"), ("ring", "halving_doubling"), ("halving_doubling", "ring")])
def test_hierarchical_all_reduce(nodes, per_node, intra, inter):
    if intra == "halving_doubling" and per_node & (per_node - 1):
        pytest.skip("halving-doubling reduce-scatter needs power-of-two nodes")
    ranks = tuple(range(nodes * per_node))
    blocks = 8 * per_node * nodes
    sched = build_schedule("all_reduce", "hierarchical", float(blocks), Group.flat(ranks, per_node), intra=intra, inter=inter)
    state = initial(ranks, blocks)
    run_phases(state, sched.chains[0], {r: list(range(blocks)) for r in ranks}, 1.0)
    for r in ranks:
        assert all(state[r][b] == full(ranks) for b in range(blocks))


@pytest.mark.parametrize("n", [4, 6, 9, 12])
def test_torus2d_on_single_rank_nodes(n):
    ranks = tuple(range(n))
    blocks = 8 * n
    sched = build_schedule("all_reduce", "torus2d", float(blocks), Group.flat(ranks, 1))
    assert len(sched.chains) == 2  # one half forward, one half with every ring reversed
    for chain in sched.chains:
        state = initial(ranks, blocks)
        run_phases(state, chain, {r: list(range(blocks)) for r in ranks}, 0.5)
        for r in ranks:
            assert all(state[r][b] == full(ranks) for b in range(blocks))


def _reduce_over(parents) -> list[Counter]:
    """Contributions each position holds after reducing up a tree given by parent positions."""
    n = len(parents)
    acc = [Counter({i: 1}) for i in range(n)]
    order = sorted(range(n), key=lambda r: -_depth(parents, r))
    for r in order:
        if parents[r] >= 0:
            assert not (set(acc[parents[r]]) & set(acc[r]))
            acc[parents[r]] += acc[r]
    return acc


def _depth(parents, r):
    d = 0
    while parents[r] >= 0:
        r, d = parents[r], d + 1
    return d


@pytest.mark.parametrize("n", list(SIZES) + [16, 17, 100])
def test_double_tree_edges_reduce_everything_to_each_root(n):
    ranks = tuple(range(n))
    sched = build_schedule("all_reduce", "tree", 64e6, Group.flat(ranks, n))
    trees = double_tree(n)
    for parents in trees:
        assert sum(p < 0 for p in parents) == 1
        kids = Counter(p for p in parents if p >= 0)
        assert max(kids.values(), default=0) <= 2
        root = parents.index(-1)
        assert _reduce_over(parents)[root] == full(range(n))
    if n > 1:
        steady = sched.chains[0][-1]
        edges = {(r, p) for t in trees for r, p in enumerate(t) if p >= 0}
        assert Counter((t.src, t.dst) for t in steady.transfers) == Counter(
            [e for t in trees for e in ((r, p) for r, p in enumerate(t) if p >= 0)]
            + [(p, r) for t in trees for r, p in enumerate(t) if p >= 0]
        )
        # each tree moves its half of the buffer over every edge, both ways
        assert steady.repeat * steady.transfers[0].size_bytes == pytest.approx(64e6 / 2)
        assert edges


def _arborescence_from_root(transfers, root, ranks):
    """Every non-root receives from exactly one sender and is reachable from the root."""
    src_of = {}
    for t in transfers:
        assert t.dst not in src_of, "a rank receives twice"
        src_of[t.dst] = t.src
    assert set(src_of) == set(ranks) - {root}
    for r in src_of:
        seen = set()
        while r != root:
            assert r not in seen
            seen.add(r)
            r = src_of[r]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("alg", ["ring", "tree", "gloo"])
def test_broadcast_reaches_every_rank_with_the_whole_buffer(n, alg):
    ranks = tuple(range(3, 3 + n))
    size = 10e6
    if alg == "gloo":
        steps = gloo_broadcast_chain(size, ranks)
    else:
        steps = build_schedule("broadcast", alg, size, Group.flat(ranks, n)).chains[0]
    if n == 1:
        assert steps == ()
        return
    main = steps[-1] if alg != "gloo" else None
    transfers = [t for s in steps for t in s.transfers] if alg == "gloo" else main.transfers
    _arborescence_from_root(transfers, ranks[0], ranks)
    if alg != "gloo":
        assert main.repeat * main.transfers[0].size_bytes == pytest.approx(size)
    else:
        assert all(t.size_bytes == size for t in transfers)


@pytest.mark.parametrize("n", SIZES)
def test_ring_reduce_is_the_reversed_chain(n):
    ranks = tuple(range(n))
    sched = build_schedule("reduce", "ring", 8e6, Group.flat(ranks, n))
    if n == 1:
        assert sched.chains == ((),)
        return
    main = sched.chains[0][-1]
    reversed_edges = [type(t)(t.dst, t.src, t.size_bytes) for t in main.transfers]
    _arborescence_from_root(reversed_edges, ranks[0], ranks)
    assert main.reduce_bytes == main.transfers[0].size_bytes


@pytest.mark.parametrize("n", SIZES)
def test_all_to_all_sends_every_block_once(n):
    ranks = tuple(range(n))
    sched = build_schedule("all_to_all", "ring", 12.0 * n, Group.flat(ranks, n))
    pairs = Counter((t.src, t.dst) for c in sched.chains for s in c for t in s.transfers for _ in range(s.repeat))
    assert pairs == Counter({(a, b): 1 for a in ranks for b in ranks if a != b})
    assert all(t.size_bytes == 12.0 for c in sched.chains for s in c for t in s.transfers)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("servers,colocated", [((0,), True), ((100,), False), ((100, 101), False), ("all", True), ((0, 2), True)])
def test_ps_every_worker_ends_with_every_shard_fully_reduced(n, servers, colocated):
    ranks = tuple(range(n))
    servers = ranks if servers == "all" else tuple(s for s in servers if s >= 100 or s < n)
    if not servers:
        pytest.skip("no server inside this group")
    sched = build_schedule("all_reduce", "ps", 6.0 * len(servers), Group.flat(ranks, n), servers=servers)
    assert len(sched.chains) == len(servers)
    for sv, chain in zip(servers, sched.chains):
        held = Counter({sv: 1}) if sv in ranks else Counter()
        if n == 1 and sv in ranks:
            assert chain == ()
            continue
        push, pull = chain
        assert not push.lockstep and not pull.lockstep
        for t in push.transfers:
            assert t.dst == sv and t.size_bytes == 6.0 and t.src not in held
            held[t.src] += 1
        assert held == full(ranks)
        assert {t.dst for t in pull.transfers} | ({sv} & set(ranks)) == set(ranks)
