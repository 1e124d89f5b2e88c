"""Max-min fair rates of flow groups on capacitated links, by progressive filling (as SimGrid's LMM).

A group g uses `count[l, g] x rate[g]` of link l (a lockstep ring step crosses a link once per member
that routes over it). All unfrozen groups are raised at the same rate until some link saturates;
groups on saturated links freeze; repeat. Vectorised over a flat (entry -> group, link, count) form.
"""
from __future__ import annotations

import numpy as np

# A link counts as saturated when its fair share is within this relative margin of the smallest.
_REL_TOL = 1e-12


def unique_inverse(ids: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(ids, return_inverse=True) for ids in [0, bound), by marking instead of sorting
    (linear in len(ids) + bound; the same two arrays)."""
    if ids.size * 4 < bound:  # few ids on a large fabric: sorting the few is cheaper
        return np.unique(ids, return_inverse=True)
    present = np.zeros(bound, dtype=bool)
    present[ids] = True
    links = np.flatnonzero(present)
    rank = np.cumsum(present, dtype=np.int64) - 1
    return links, rank[ids]


def maxmin_rates_flat(capacity_Bps: np.ndarray, entry_group: np.ndarray, entry_link: np.ndarray,
                      entry_count: np.ndarray, num_groups: int, froze: np.ndarray | None = None) -> np.ndarray:
    """Rates of `num_groups` groups; entry i says group entry_group[i] crosses link entry_link[i]
    entry_count[i] times. Groups with no entries get +inf (nothing limits them). `froze` (a boolean
    array of one entry per entry, filled in place) marks the entries whose link saturated at the
    level that froze their group: what a group of independent members (Fabric) checks to know whether
    all its members are frozen there or only some (then it splits and is solved again)."""
    rates = np.full(num_groups, np.inf)
    if num_groups == 0:
        return rates
    entry_count = np.asarray(entry_count, dtype=float)
    keep = entry_count > 0
    where = np.flatnonzero(keep) if froze is not None else None  # original index of each live entry
    group = np.asarray(entry_group, dtype=np.int64)[keep]
    count = entry_count[keep]
    # work on the used links only, renumbered 0..U-1
    used_links, link = unique_inverse(np.asarray(entry_link, dtype=np.int64)[keep], len(capacity_Bps))
    remaining = np.asarray(capacity_Bps, dtype=float)[used_links].copy()
    frozen = np.zeros(num_groups, dtype=bool)
    level = 0.0  # the rate every still-unfrozen group has reached
    while group.size:
        load = np.bincount(link, weights=count, minlength=remaining.size)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(load > 0, np.maximum(remaining, 0.0) / load, np.inf)
        delta = float(share.min())
        level += delta
        remaining -= delta * load
        saturated = share <= delta * (1.0 + _REL_TOL)
        remaining[saturated] = 0.0
        on_saturated = saturated[link]
        hit = group[on_saturated]
        rates[hit] = level
        frozen[hit] = True
        if where is not None:
            froze[where[on_saturated]] = True
        live = ~frozen[group]
        group, link, count = group[live], link[live], count[live]
        if where is not None:
            where = where[live]
    return rates


def maxmin_rates(capacity_Bps: np.ndarray, group_links: list[np.ndarray],
                 group_counts: list[np.ndarray] | None = None) -> np.ndarray:
    """Rates of groups given per group its (unique) link ids and how many members cross each
    (default 1 each). A group with no links gets +inf."""
    n = len(group_links)
    if group_counts is None:
        group_counts = [np.ones(len(links)) for links in group_links]
    lengths = np.array([len(links) for links in group_links], dtype=np.int64)
    if lengths.sum() == 0:
        return np.full(n, np.inf)
    entry_group = np.repeat(np.arange(n, dtype=np.int64), lengths)
    entry_link = np.concatenate([np.asarray(x, dtype=np.int64) for x in group_links])
    entry_count = np.concatenate([np.asarray(c, dtype=float) for c in group_counts])
    return maxmin_rates_flat(np.asarray(capacity_Bps, dtype=float), entry_group, entry_link,
                             entry_count, n)
