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
    return {topology.links.name(int(i)): float(link_bytes[i] / (cap[i] * elapsed_s)) for i in used}


def top_links(utilization: dict[str, float], n: int = 10) -> list[tuple[str, float]]:
    """The `n` busiest links, busiest first (ties by name, so the order is deterministic)."""
    return sorted(utilization.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
