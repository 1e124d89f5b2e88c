"""A schedule step compiled onto directed links: its flow groups, their link counts and latency.

A lockstep step is ONE group (all transfers share a rate, the pace of a pipelined ring). An
independent step (lockstep=False: PS pushes and pulls, gloo's gathers) is one group of independent
members too, with `members` saying which links each member crosses: the fabric gives its members one
rate while the max-min solution gives them one, and splits the group where it does not (a member that
a saturated link freezes while the others may still rise), so the rates are exactly those of one group
per transfer at the cost of the distinct rates, not of the transfers (a 1,024-worker push to a server
is one or two groups, not 1,023). Members of different sizes or per-flow caps start in different groups.
Each group moves `repeat x size` bytes per member, so a repeated step is solved once, not once per
repetition. Compiled steps are cached by Step identity and by value, so equal steps of later
schedules are not routed again.
"""
from __future__ import annotations

import hashlib
import itertools
from collections import OrderedDict
from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np

from simdist.collectives.schedule import Step, TransferArray
from simdist.network.maxmin import unique_inverse as _unique_inverse
from simdist.network.paths import PathTable, flatten
from simdist.topology.gcpause import gc_paused
from simdist.topology.graph import Topology


_PAIR = attrgetter("src", "dst")
_TRIPLE = attrgetter("src", "dst", "size_bytes")


@dataclass(frozen=True, eq=False)
class FlowGroup:
    """Members moving at one shared rate: per member `size_bytes`; `counts[i]` members cross `links[i]`."""

    links: np.ndarray  # unique directed link ids
    counts: np.ndarray  # members crossing each link (float, for the solver)
    size_bytes: float  # bytes each member moves (all repetitions)
    link_bytes: np.ndarray  # bytes the group puts on each of `links` in total
    cap_Bps: float = float("inf")  # per-member rate limit: the least per-connection cap of its links (DirectedLinks.member_caps)
    members: "Members | None" = None  # independent members (each its own max-min flow); None: lockstep


_SHAPES = 4096  # memoised shapes and splits per routed step (then forgotten all at once)


@dataclass(frozen=True, eq=False)
class Members:
    """The independent members of a flow group: each member's directed links (a sprayed member's `spread`
    paths one after another, each entry carrying 1/spread of its bytes) and which members the group holds.

    `index` are transfer indices of the step (sorted); `flat[bounds[i]:bounds[i + 1]]` are transfer i's links.
    Groups split from one step share `flat`, `bounds` and `shapes` and differ in `index`. `shapes` (shared by
    every step on the same routes, e.g. each bucket's push to one server) memoises, per index array, its
    links and counts and how a set of saturated links splits it, so the same split of the next bucket costs
    a dictionary look-up."""

    flat: np.ndarray
    bounds: np.ndarray
    index: np.ndarray
    spread: int
    num_links: int  # directed links of the topology (ids are below it)
    shapes: dict = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return int(self.index.size)

    def _entries(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(entry ids into flat of the members `index`, member after member; each member's first position)."""
        starts, ends = self.bounds[index], self.bounds[index + 1]
        lengths = ends - starts
        first = np.cumsum(lengths) - lengths
        if index.size == len(self.bounds) - 1:  # every transfer: the entries are flat itself
            return np.arange(int(self.bounds[-1])), first
        total = int(lengths.sum())
        return np.arange(total) - np.repeat(first - starts, lengths), first

    def crossing(self, link_mask: np.ndarray) -> np.ndarray:
        """Per member of this group: whether one of its links is set in `link_mask` (a boolean per link)."""
        entries, first = self._entries(self.index)
        hits = link_mask[self.flat[entries]].astype(np.int64)
        return np.add.reduceat(hits, first) > 0 if hits.size else np.zeros(self.index.size, dtype=bool)

    def subset(self, index: np.ndarray) -> "Members":
        return Members(self.flat, self.bounds, index, self.spread, self.num_links, self.shapes)

    def _shape(self) -> tuple[np.ndarray, np.ndarray]:
        key = ("shape", id(self.index))
        hit = self.shapes.get(key)
        if hit is None or hit[0] is not self.index:
            entries, _ = self._entries(self.index)
            links, inverse = _unique_inverse(self.flat[entries], self.num_links)
            if self.spread == 1:
                counts = np.bincount(inverse, minlength=links.size).astype(float)
            else:
                counts = np.bincount(inverse, weights=np.full(inverse.size, 1.0 / self.spread), minlength=links.size)
            if len(self.shapes) > _SHAPES:
                self.shapes.clear()
            hit = self.shapes[key] = (self.index, links, counts)  # keeps `index` alive, so its id is not reused
        return hit[1], hit[2]

    def group(self, size_bytes: float, cap_Bps: float = float("inf")) -> FlowGroup:
        """The flow group of these members, each moving `size_bytes` (all repetitions): per link how many
        members cross it (1/spread per sprayed path) and the bytes it carries."""
        links, counts = self._shape()
        return FlowGroup(links, counts, float(size_bytes), counts * float(size_bytes), cap_Bps, self)

    def split(self, saturated: np.ndarray) -> "tuple[Members, Members] | None":
        """(members crossing one of the `saturated` links, the others), or None when every member crosses one."""
        key = ("split", id(self.index), saturated.tobytes())
        hit = self.shapes.get(key)
        if hit is None or hit[0] is not self.index:
            mask = np.zeros(self.num_links, dtype=bool)
            mask[saturated] = True
            crossing = self.crossing(mask)
            parts = None if crossing.all() else (self.subset(self.index[crossing]), self.subset(self.index[~crossing]))
            if len(self.shapes) > _SHAPES:
                self.shapes.clear()
            hit = self.shapes[key] = (self.index, parts)
        return hit[1]


@dataclass(frozen=True, eq=False)
class CompiledStep:
    """A step ready for a network model: latency phase, then groups, then delay."""

    latency_s: float  # repeat x the largest (pipelined rings: the mean) path latency of the step's transfers
    groups: tuple[FlowGroup, ...]
    delay_s: float


def _single(paths: tuple[np.ndarray, ...], size_bytes: float, repeat: int) -> FlowGroup:
    """One transfer, split evenly over `paths` (one path, or a spray's several): a shortest path never
    repeats a directed link, so one path needs no dedup."""
    total = size_bytes * repeat
    if len(paths) == 1:
        (path,) = paths
        return FlowGroup(path, np.ones(path.size), float(total), np.full(path.size, float(total)))
    links, hits = np.unique(np.concatenate(paths), return_counts=True)
    share = hits / len(paths)
    return FlowGroup(links, share, float(total), share * total)


@dataclass(frozen=True, eq=False)
class RoutedPairs:
    """The routes of a step's (src, dst) pairs, and their union as one lockstep group's links: what
    steps of equal pairs share (every step of a ring, whatever the bucket size). With routing 'spray'
    each pair has `spread` paths, each carrying 1/spread of its bytes (paths are pair-major)."""

    flat: np.ndarray  # every path's directed link ids, path after path
    bounds: np.ndarray  # path i is flat[bounds[i]:bounds[i + 1]]
    latencies: np.ndarray  # per pair: the largest over its paths
    links: np.ndarray  # unique directed links over all paths
    inverse: np.ndarray  # for each entry of the concatenated paths, its index in `links`
    lengths: np.ndarray  # hops per path
    spread: int = 1

    @classmethod
    def route(cls, pairs: tuple[tuple[int, int], ...], paths: PathTable) -> "RoutedPairs":
        k = paths.spread
        if k == 1:
            flat, lengths = paths.link_arrays(pairs)
        else:
            flat, lengths = flatten([paths.link_tuple(src, dst, key) for src, dst in pairs for key in range(k)])
        links, inverse = _unique_inverse(flat, paths.topology.links.latency_s.size)
        # per-path latency: the sum over its links, added in path order (as float(latency_s[path].sum()))
        owner = np.repeat(np.arange(lengths.size), lengths)
        lat = np.bincount(owner, weights=paths.topology.links.latency_s[flat], minlength=lengths.size)
        if k > 1:
            lat = lat.reshape(-1, k).max(axis=1) if lat.size else lat
        bounds = np.concatenate(([0], np.cumsum(lengths)))
        return cls(flat, bounds, lat, links, inverse, lengths, k)

    @property
    def paths(self) -> tuple[np.ndarray, ...]:
        """Each path's directed link ids (views into one flat array)."""
        flat, bounds = self.flat, self.bounds
        return tuple(flat[bounds[i]:bounds[i + 1]] for i in range(len(self.lengths)))

    def pair_paths(self, i: int) -> tuple[np.ndarray, ...]:
        k, flat, bounds = self.spread, self.flat, self.bounds
        return tuple(flat[bounds[j]:bounds[j + 1]] for j in range(i * k, (i + 1) * k))

    def group(self, sizes: np.ndarray, repeat: int) -> FlowGroup | None:
        """The lockstep group of the live members (size > 0, a non-empty path): the links they cross, how many
        members cross each (a sprayed member counts 1/spread per path), and the bytes each link carries."""
        k = self.spread
        if k == 1 and sizes.size and sizes[0] > 0 and (sizes == sizes[0]).all():
            # every member moves the same bytes (a ring step): the link counts depend on the routes only
            base = self.__dict__.get("_uniform")
            if base is None:
                live = self.lengths > 0
                counts = np.bincount(self.inverse, minlength=self.links.size).astype(float)  # 1 per crossing
                base = (bool(live.all()), counts)
                object.__setattr__(self, "_uniform", base)
            if base[0]:
                w = sizes[0] * repeat
                link_bytes = np.bincount(self.inverse, weights=np.full(self.inverse.size, w), minlength=self.links.size)
                return FlowGroup(self.links, base[1], float(w), link_bytes)
        live = (sizes > 0) & (self.lengths.reshape(-1, k).max(axis=1) > 0 if k > 1 else self.lengths > 0)
        if not live.any():
            return None
        per_path_live = np.repeat(live, k) if k > 1 else live
        per_path_size = np.repeat(np.where(live, sizes, 0.0), k) / k if k > 1 else np.where(live, sizes, 0.0)
        weights = np.repeat(per_path_size, self.lengths) * repeat
        member = np.repeat(per_path_live, self.lengths).astype(float) / k
        counts = np.bincount(self.inverse, weights=member, minlength=self.links.size)
        link_bytes = np.bincount(self.inverse, weights=weights, minlength=self.links.size)
        used = counts > 0
        return FlowGroup(self.links[used], counts[used], float(sizes[live].max() * repeat), link_bytes[used])


def compile_step(step: Step, paths: PathTable, routes: RoutedPairs | None = None) -> CompiledStep:
    """Route every transfer of `step` (or take `routes`, the same pairs routed before) and form its flow
    groups (zero-byte transfers move nothing)."""
    if routes is None:
        routes = RoutedPairs.route(_pairs(step.transfers), paths)
    if isinstance(step.transfers, TransferArray):
        sizes = np.array(step.transfers.size_bytes, dtype=float)
    else:
        sizes = np.fromiter((t.size_bytes for t in step.transfers), dtype=float, count=len(step.transfers))
    if not sizes.size:
        latency = 0.0
    elif step.hop_latency_s is not None:  # the hop's cost as the step states it (NCCL's tuning model)
        latency = step.hop_latency_s
    elif step.pipelined:  # a ring's critical path runs through consecutive hops: their mean
        latency = float(routes.latencies.mean())
    else:
        latency = float(routes.latencies.max())
    groups: list[FlowGroup] = []
    if step.repeat > 0:
        if step.lockstep:
            g = routes.group(sizes, step.repeat)
            groups = [g] if g is not None else []
        else:
            extra = (thread_member_caps(step, routes, paths.topology),) if step.shared_thread else ()
            return CompiledStep(step.repeat * latency,
                                _independent(routes, sizes, step.repeat, paths.topology, step.streams, *extra),
                                step.delay_s)
    if step.shared_thread and groups:  # the slowest member's share of its ranks' proxy threads sets the pace
        member = thread_member_caps(step, routes, paths.topology)
        if member is not None:
            live = (sizes > 0) & (_member_lengths(routes) > 0)
            return CompiledStep(step.repeat * latency, tuple(_capped(g, float(member[live].min())) for g in groups),
                                step.delay_s)
    caps = paths.topology.links.member_caps(step.streams)
    if caps is not None:  # each member is one connection: it moves no faster than its links' per-flow cap
        groups = [_capped(g, float(caps[g.links].min())) for g in groups]
    return CompiledStep(step.repeat * latency, tuple(groups), step.delay_s)


def _member_lengths(routes: RoutedPairs) -> np.ndarray:
    """Hops per member (the longest of a sprayed member's paths)."""
    k = routes.spread
    return routes.lengths.reshape(-1, k).max(axis=1) if k > 1 else routes.lengths


def thread_member_caps(step: Step, routes: RoutedPairs, topology: Topology) -> np.ndarray | None:
    """Per member of a `shared_thread` step, the most it moves: the least per-flow cap of its links and its share
    of the stream cap, `streams` x the least stream cap on its path / the most stream-capped transfers either of its
    ranks sends or receives in the step (one thread copies all of them). None where no link limits a flow."""
    links = topology.links
    if links.stream_cap_Bps is None and links.flow_cap_Bps is None:
        return None
    lengths = _member_lengths(routes)
    routed = np.flatnonzero(lengths > 0)
    starts = routes.bounds[::routes.spread][:-1][routed]

    def least(per_link: np.ndarray | None) -> np.ndarray:
        out = np.full(lengths.size, np.inf)
        if per_link is not None and routed.size:
            out[routed] = np.minimum.reduceat(per_link[routes.flat], starts)
        return out

    flow, stream = least(links.flow_cap_Bps), least(links.stream_cap_Bps)
    socket = np.isfinite(stream)
    if not socket.any():
        return flow
    pairs = np.asarray(_pairs(step.transfers), dtype=np.int64).reshape(-1, 2)
    src, dst = pairs[:, 0], pairs[:, 1]
    size = int(pairs.max()) + 1
    count = (np.bincount(src[socket], minlength=size) + np.bincount(dst[socket], minlength=size)).astype(float)
    share = np.where(socket, step.streams / np.maximum(np.maximum(count[src], count[dst]), 1.0), 0.0)
    return np.minimum(flow, np.where(socket, np.where(socket, stream, 0.0) * share, np.inf))


def _independent(routes: RoutedPairs, sizes: np.ndarray, repeat: int, topology: Topology,
                 streams: int = 1, member_caps: np.ndarray | None = None) -> tuple[FlowGroup, ...]:
    """The groups of an independent step: its live members (size > 0, a non-empty path) by (bytes, per-flow
    cap), one group of independent members each (a lone member: a plain group, as one transfer was).
    `member_caps`: each member's own cap where it is not its links' (thread_member_caps)."""
    k = routes.spread
    per_member = routes.lengths.reshape(-1, k).max(axis=1) if k > 1 else routes.lengths
    live = np.flatnonzero((sizes > 0) & (per_member > 0))
    if not live.size:
        return ()
    caps = topology.links.member_caps(streams)
    member_bounds = routes.bounds[::k]
    if member_caps is not None:
        cap = member_caps[live]
    elif caps is None:
        cap = np.full(live.size, np.inf)
    else:  # a member's cap: the least per-flow cap of the links of all its paths
        routed = np.flatnonzero(per_member > 0)  # segments from one routed member's start to the next's
        mins = np.full(per_member.size, np.inf)
        mins[routed] = np.minimum.reduceat(caps[routes.flat], member_bounds[:-1][routed])
        cap = mins[live]
    total = sizes[live] * repeat
    classes = _classes(total, cap)
    shapes = routes.__dict__.get("_shapes")
    if shapes is None:
        shapes = {}
        object.__setattr__(routes, "_shapes", shapes)
    out: list[FlowGroup] = []
    for w, c in classes:
        index = live[(total == w) & (cap == c)]
        known = shapes.get(("index", index.tobytes()))  # the same members as an earlier step's group: its array
        if known is None:
            known = shapes[("index", index.tobytes())] = index
        index = known
        cap_Bps = float(c) if np.isfinite(c) else float("inf")
        if index.size == 1:
            i = int(index[0])
            g = _single(routes.pair_paths(i), float(sizes[i]), repeat)
            out.append(_capped(g, cap_Bps))
            continue
        members = Members(routes.flat, member_bounds, index, k, int(topology.links.latency_s.size), shapes)
        out.append(members.group(float(w), cap_Bps))
    return tuple(out)


def _classes(total: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """The distinct (total, cap) rows of the members, in lexicographic order: the rows of
    np.unique(np.column_stack((total, cap)), axis=0), without its sort of structured rows (~12 ms
    for a 16,383-member step; a PS step has one or two classes)."""
    if (total == total[0]).all() and (cap == cap[0]).all():  # one class (every PS push and pull)
        return np.array([[total[0], cap[0]]])
    totals, ti = np.unique(total, return_inverse=True)
    caps, ci = np.unique(cap, return_inverse=True)
    codes = np.unique(ti * caps.size + ci)  # row-major codes: sorted by total, then by cap
    return np.column_stack((totals[codes // caps.size], caps[codes % caps.size]))


def _capped(group: FlowGroup, cap_Bps: float) -> FlowGroup:
    if not np.isfinite(cap_Bps):
        return group
    return FlowGroup(group.links, group.counts, group.size_bytes, group.link_bytes, cap_Bps)


def _pairs(transfers) -> "tuple[tuple[int, int], ...] | list[tuple[int, int]]":
    """(src, dst) of every transfer, in order."""
    if isinstance(transfers, TransferArray):
        return transfers.pairs()
    return tuple(map(_PAIR, transfers))


def _digests(transfers: "tuple | TransferArray") -> tuple[bytes, bytes]:
    """(value digest, pairs digest) of a transfers tuple: 128-bit digests of its (src, dst, size) and
    (src, dst) arrays (one numpy pass instead of Transfer.__eq__ per transfer). A TransferArray gives
    the same array (hence digests) as the tuple of its Transfers, and keeps them."""
    if isinstance(transfers, TransferArray):
        if transfers._digests is None:
            transfers._digests = _array_digests(transfers.triples())
        return transfers._digests
    n = len(transfers)
    arr = np.fromiter(itertools.chain.from_iterable(map(_TRIPLE, transfers)), dtype=float,
                      count=3 * n).reshape(n, 3)
    return _array_digests(arr)


def _array_digests(arr: np.ndarray) -> tuple[bytes, bytes]:
    pairs = hashlib.blake2b(np.ascontiguousarray(arr[:, :2]).tobytes(), digest_size=16).digest()
    return hashlib.blake2b(arr.tobytes(), digest_size=16).digest(), pairs


def step_key(step: Step, digests: "tuple[bytes, bytes] | None" = None) -> tuple[tuple, bytes]:
    """(value key, pairs key) of a step: its transfers' digests (`digests`, or computed) plus its
    scalars (equal steps give equal keys; a digest collision is a 2**-128 chance)."""
    value, pairs = digests if digests is not None else _digests(step.transfers)
    return (value, len(step.transfers), step.repeat, step.lockstep, step.delay_s, step.reduce_bytes, step.label,
            step.pipelined, step.streams, step.hop_latency_s, step.shared_thread), pairs


class StepCache:
    """Compiled steps, found by Step identity (fast) or else by value (equal steps of a new schedule,
    e.g. the same bucket size next iteration, via step_key); least recently used entries are dropped first."""

    def __init__(self, paths: PathTable, max_entries: int = 4096) -> None:
        self.paths = paths
        self.max_entries = max_entries
        self._by_id: OrderedDict[int, tuple[Step, CompiledStep, tuple]] = OrderedDict()
        self._by_value: OrderedDict[tuple, CompiledStep] = OrderedDict()
        self._routes: OrderedDict[bytes, RoutedPairs] = OrderedDict()
        # digests by transfers-tuple identity: a ring all_reduce's two steps share one tuple
        self._digests: OrderedDict[int, tuple[tuple, tuple[bytes, bytes]]] = OrderedDict()

    def _step_key(self, step: Step) -> tuple[tuple, bytes]:
        tr = step.transfers
        hit = self._digests.get(id(tr))
        if hit is None or hit[0] is not tr:
            hit = self._digests[id(tr)] = (tr, _digests(tr))  # keeps `tr` alive, so its id is not reused
            if len(self._digests) > 64:
                self._digests.popitem(last=False)
        return step_key(step, hit[1])

    def key(self, step: Step) -> tuple:
        """The step's value key (memoised once the step is compiled; never routes)."""
        hit = self._by_id.get(id(step))
        if hit is not None and hit[0] is step:
            return hit[2]
        return self._step_key(step)[0]

    def get(self, step: Step) -> CompiledStep:
        hit = self._by_id.get(id(step))
        if hit is not None and hit[0] is step:
            self._by_id.move_to_end(id(step))
            return hit[1]
        key, pairs_key = self._step_key(step)
        compiled = self._by_value.get(key)
        if compiled is None:
            routes = self._routes.get(pairs_key)
            if routes is None:
                with gc_paused():
                    pairs = _pairs(step.transfers)
                    routes = self._routes[pairs_key] = RoutedPairs.route(pairs, self.paths)
                if len(self._routes) > self.max_entries:
                    self._routes.popitem(last=False)
            compiled = compile_step(step, self.paths, routes)
            self._by_value[key] = compiled
            if len(self._by_value) > self.max_entries:
                self._by_value.popitem(last=False)
        else:
            self._by_value.move_to_end(key)
        self._by_id[id(step)] = (step, compiled, key)  # keeps `step` alive, so its id is not reused
        if len(self._by_id) > self.max_entries:
            self._by_id.popitem(last=False)
        return compiled

    def schedule_key(self, schedule) -> tuple:
        """A value key of a whole schedule (for memoised schedule times) without hashing its transfers."""
        return (schedule.op, schedule.algorithm, schedule.size_bytes,
                tuple(tuple(self.key(s) for s in chain) for chain in schedule.chains))

    def clear(self) -> None:
        self._by_id.clear()
        self._by_value.clear()
        self._routes.clear()
        self._digests.clear()


def shared_steps(topology: Topology) -> StepCache:
    """The compiled steps of `topology` under its default routes, kept by the topology and shared by every
    network model on it (a sweep over one cluster routes each step once). A model that changes routes (a
    dead link, a router of its own) switches to a private StepCache instead of touching this one."""
    hit = topology.shared.steps
    if hit is None:
        hit = topology.shared.steps = StepCache(PathTable(topology))
    return hit
