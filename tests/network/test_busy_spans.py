"""The trace's busy spans of the busiest links: each wanted link's intervals merged where they overlap or touch,
links not asked for (below, between and beyond the wanted indices) left out."""
from __future__ import annotations

import numpy as np

from simdist.network.fabric import BusyInterval
from simdist.network.utilization import busy_spans


def test_wanted_links_merge_their_spans_and_others_are_left_out():
    intervals = [BusyInterval(0.0, 1.0, np.array([0, 3, 9])),
                 BusyInterval(0.5, 2.0, np.array([3, 40])),  # 40: beyond every wanted link
                 BusyInterval(2.0, 3.0, np.array([3])),  # touches the span before it: merged
                 BusyInterval(5.0, 6.0, np.array([1, 9, 2])),
                 BusyInterval(7.0, 8.0, np.array([], dtype=np.int64))]
    got = busy_spans(intervals, {3: "a->b", 9: "c->d", 5: "e->f"})
    assert got == {"a->b": [(0.0, 3.0)], "c->d": [(0.0, 1.0), (5.0, 6.0)]}
