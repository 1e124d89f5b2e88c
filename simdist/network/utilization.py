"""Link utilisation from carried bytes: fraction of capacity over a window, and the busiest links."""
from __future__ import annotations

import numpy as np

from simdist.topology.graph import Topology


def utilization_from_bytes(topology: Topology, link_bytes: np.ndarray, elapsed_s: float) -> dict[str, float]:
    """{directed link name: bytes / (capacity x elapsed_s)} for every link that carried bytes."""
    if elapsed_s <= 0:
        return {}
    cap = topology.links.capacity_Bps
    used = np.flatnonzero(link_bytes > 0)
    ends = topology.links.ends
    # elementwise the same divisions as link_bytes[i] / (cap[i] * elapsed_s), one array pass
    values = (link_bytes[used] / (cap[used] * elapsed_s)).tolist()
    return {f"{ends[i][0]}->{ends[i][1]}": v for i, v in zip(used.tolist(), values)}


def top_links(utilization: dict[str, float], n: int = 10) -> list[tuple[str, float]]:
    """The `n` busiest links, busiest first (ties by name, so the order is deterministic)."""
    return sorted(utilization.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def busy_spans(intervals, link_names: dict[int, str]) -> dict[str, list[tuple[float, float]]]:
    """{link name: merged (start, end) spans during which some flow group used it}, for the given links.

    `intervals` are the fabric's BusyInterval records (start_s, end_s, links); overlapping or touching
    spans of one link merge into one, so a trace shows when each link was busy, not every flow.
    """
    if not link_names or not intervals:
        return {}
    wanted = np.fromiter(link_names, dtype=np.int64, count=len(link_names))
    raw: dict[int, list[tuple[float, float]]] = {i: [] for i in link_names}
    # wanted[link] for every link index: a link beyond the largest wanted one clips onto the last entry, False
    is_wanted = np.zeros(int(wanted.max()) + 2, dtype=bool)
    is_wanted[wanted] = True
    for iv in intervals:  # only the few wanted links are looked at per interval (one array lookup)
        for link in iv.links[is_wanted.take(iv.links, mode="clip")].tolist():
            raw[link].append((iv.start_s, iv.end_s))
    out: dict[str, list[tuple[float, float]]] = {}
    for link, spans in raw.items():
        if spans:
            arr = np.array(spans, dtype=float)
            out[link_names[link]] = merged(arr[:, 0], arr[:, 1])
    return out


def merged(start: np.ndarray, end: np.ndarray) -> list[tuple[float, float]]:
    """The union of the spans [start[i], end[i]] as sorted disjoint (start, end) pairs (touching spans merge)."""
    if not start.size:
        return []
    order = np.lexsort((end, start))
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:], s.size) - 1
    return list(zip(s[first].tolist(), reach[last].tolist()))
