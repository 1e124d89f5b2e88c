"""Max-min fair rates of flow groups on capacitated links, by progressive filling (as SimGrid's LMM).

A group g uses `count[l, g] x rate[g]` of link l (a lockstep ring step crosses a link once per member
that routes over it). All unfrozen groups are raised at the same rate until some link saturates;
groups on saturated links freeze; repeat. Vectorised over a flat (entry -> group, link, count) form.
"""
from __future__ import annotations

import numpy as np

# A link counts as saturated when its fair share is within this relative margin of the smallest.
_REL_TOL = 1e-12


def maxmin_rates_flat(capacity_Bps: np.ndarray, entry_group: np.ndarray, entry_link: np.ndarray,
                      entry_count: np.ndarray, num_groups: int) -> np.ndarray:
    """Rates of `num_groups` groups; entry i says group entry_group[i] crosses link entry_link[i]
    entry_count[i] times. Groups with no entries get +inf (nothing limits them)."""
    rates = np.zeros(num_groups, dtype=float)
    if num_groups == 0:
        return rates
    num_links = capacity_Bps.shape[0]
    entry_group = np.asarray(entry_group, dtype=np.int64)
    entry_link = np.asarray(entry_link, dtype=np.int64)
    entry_count = np.asarray(entry_count, dtype=float)
    keep = entry_count > 0
    entry_group, entry_link, entry_count = entry_group[keep], entry_link[keep], entry_count[keep]
    has_links = np.bincount(entry_group, minlength=num_groups) > 0
    rates[~has_links] = np.inf
    active = has_links.copy()
    remaining = np.asarray(capacity_Bps, dtype=float).copy()
    live = np.ones(entry_group.shape[0], dtype=bool)  # entries of still-unfrozen groups
    while live.any():
        load = np.bincount(entry_link[live], weights=entry_count[live], minlength=num_links)
        used = load > 0
        share = np.full(num_links, np.inf)
        share[used] = np.maximum(remaining[used], 0.0) / load[used]
        delta = share.min()
        rates[active] += delta
        remaining[used] -= delta * load[used]
        saturated = used & (share <= delta * (1.0 + _REL_TOL))
        remaining[saturated] = 0.0
        frozen_groups = np.unique(entry_group[live & saturated[entry_link]])
        active[frozen_groups] = False
        live &= active[entry_group]
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
