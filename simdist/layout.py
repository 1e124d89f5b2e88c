"""Model-parallel layout: which global GPU rank holds which (dp, tp, cp, pp) coordinate, and the groups that follow.

Ranks are the cluster's GPUs in node-major order (ClusterSpec). A placement order lists the axes innermost
first: with Megatron-LM's default "tp,dp,pp" consecutive ranks form a tp group (inside a node when tp divides
the node), dp comes next and pp is outermost, so pipeline stages land on different nodes. With context
parallelism (cp > 1) the default is Megatron-Core's "tp-cp-ep-dp-pp" without ep: "tp,cp,dp,pp". Any order can
be given (`training.placement_order`); a tp group that crosses a node boundary is reported in
`Layout.warnings`, never refused, because it is legal (only slow). Megatron-Core reduces the dense weights'
gradients over the data-parallel group with cp (`dp_cp_groups`): every rank of it holds the same weights.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Sequence

import numpy as np

from simdist.hardware.specs import ClusterSpec


class Axis(StrEnum):
    """A parallelism axis, spelled as in `training.parallelism` and `training.placement_order`."""

    TP = "tp"
    DP = "dp"
    PP = "pp"
    CP = "cp"


AXES: dict[str, Axis] = {a.value: a for a in Axis}
THREE_AXES = ("dp", "pp", "tp")  # an order without cp (cp = 1)
DEFAULT_ORDER: tuple[Axis, ...] = (Axis.TP, Axis.DP, Axis.PP)  # Megatron-LM's "tp-dp-pp", innermost first
CP_ORDER: tuple[Axis, ...] = (Axis.TP, Axis.CP, Axis.DP, Axis.PP)  # Megatron-Core's "tp-cp-ep-dp-pp" without ep
ORDER_KEY = "training.placement_order"


@dataclass(frozen=True)
class Coord:
    """A rank's position on the axes (0-based)."""

    dp: int
    tp: int
    pp: int
    cp: int = 0

    def on(self, axis: Axis) -> int:
        return getattr(self, axis.value)


def order_is_valid(parts: Sequence[str]) -> bool:
    """Whether `parts` names tp, dp and pp once each, or tp, cp, dp and pp once each."""
    return sorted(parts) in (sorted(THREE_AXES), sorted(AXES))


def parse_order(text: "str | Sequence[str] | None", cp: int = 1) -> tuple[Axis, ...]:
    """'tp,pp,dp' (innermost first) -> axes; None -> the default (tp,cp,dp,pp with cp > 1). A three-axis order
    takes cp as innermost after tp (the schema and io.resolve check the key: with cp > 1 it must name cp)."""
    if text is None:
        return CP_ORDER if cp > 1 else DEFAULT_ORDER
    parts = [p.strip() for p in text.split(",")] if isinstance(text, str) else [str(p).strip() for p in text]
    assert order_is_valid(parts), f"the schema checks {ORDER_KEY}: {text!r}"
    assert cp == 1 or "cp" in parts, f"io.resolve: {ORDER_KEY} names cp when cp > 1: {text!r}"
    return tuple(AXES[p] for p in parts)


@dataclass(frozen=True)
class Layout:
    """dp x tp x cp x pp ranks over GPUs 0..n-1; `gpu_node[r]` is the node of GPU (= rank) r."""

    dp: int
    tp: int
    pp: int
    order: tuple[Axis, ...]
    gpu_node: tuple[int, ...]
    warnings: tuple[str, ...] = ()
    cp: int = 1

    @property
    def size(self) -> int:
        return self.dp * self.tp * self.cp * self.pp

    def degree(self, axis: Axis) -> int:
        return getattr(self, Axis(axis).value)

    def _strides(self) -> dict[Axis, int]:
        stride, out = 1, {}
        for axis in self.order:
            out[axis] = stride
            stride *= self.degree(axis)
        if Axis.CP not in out:  # a three-axis order: cp is 1
            out[Axis.CP] = stride
        return out

    def coords(self, rank: int) -> Coord:
        """(dp, tp, pp, cp) of global rank `rank`."""
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} outside 0..{self.size - 1}")
        strides = self._strides()
        c = {a.value: (rank // strides[a]) % self.degree(a) for a in Axis}
        return Coord(**c)

    def rank(self, dp: int, tp: int, pp: int, cp: int = 0) -> int:
        """The global rank at coordinates (dp, tp, pp, cp)."""
        c = Coord(dp, tp, pp, cp)
        for a in Axis:
            if not 0 <= c.on(a) < self.degree(a):
                raise ValueError(f"{a} coordinate {c.on(a)} outside 0..{self.degree(a) - 1}")
        strides = self._strides()
        return sum(c.on(a) * strides[a] for a in Axis)

    def groups(self, axis: "Axis | str") -> list[list[int]]:
        """Every group along `axis` (ranks differing only in that coordinate), each in coordinate order,
        the groups sorted by their first rank."""
        return self.joint_groups((Axis(axis),))

    def joint_groups(self, axes: Sequence["Axis | str"]) -> list[list[int]]:
        """Every group of ranks differing only in the coordinates of `axes` (the first varying fastest), the
        groups sorted by their first rank: (dp, cp) is Megatron-Core's data-parallel group with cp."""
        axes = [Axis(a) for a in axes]
        strides = self._strides()
        ranks = np.arange(self.size, dtype=np.int64)
        leaders = ranks.copy()  # each rank's group's first rank: its coordinates on `axes` set to 0
        offsets = np.zeros(1, dtype=np.int64)  # the group's members relative to it, the first axis fastest
        for a in axes:
            leaders -= (ranks // strides[a]) % self.degree(a) * strides[a]
            offsets = (offsets[None, :] + np.arange(self.degree(a), dtype=np.int64)[:, None] * strides[a]).ravel()
        return (np.unique(leaders)[:, None] + offsets[None, :]).tolist()

    def tp_groups(self) -> list[list[int]]:
        return self.groups(Axis.TP)

    def pp_groups(self) -> list[list[int]]:
        """Pipeline groups: element i is the rank running stage i."""
        return self.groups(Axis.PP)

    def dp_groups(self) -> list[list[int]]:
        return self.groups(Axis.DP)

    def cp_groups(self) -> list[list[int]]:
        """Context-parallel groups: element i holds sequence chunks i and 2 cp - 1 - i."""
        return self.groups(Axis.CP)

    def dp_cp_groups(self) -> list[list[int]]:
        """The groups the dense weights' gradients are reduced over: dp x cp ranks with the same weights."""
        return self.joint_groups((Axis.DP, Axis.CP))

    def group_of(self, rank: int, axis: "Axis | str") -> list[int]:
        """The `axis` group that contains `rank`."""
        return next(g for g in self.groups(axis) if rank in g)

    def nodes_of(self, group: Sequence[int]) -> list[int]:
        """The distinct nodes a group touches, in first-seen order."""
        out: list[int] = []
        for r in group:
            if self.gpu_node[r] not in out:
                out.append(self.gpu_node[r])
        return out

    def tp_crosses_nodes(self) -> bool:
        return any(len(self.nodes_of(g)) > 1 for g in self.tp_groups())


def gpu_nodes(cluster: ClusterSpec) -> tuple[int, ...]:
    """The node of every GPU, node-major (ClusterSpec's numbering)."""
    return tuple(n for n, g in enumerate(cluster.nodes()) for _ in range(g.gpus_per_node))


def build_layout(gpu_node: "ClusterSpec | Sequence[int]", dp: int | None, tp: int = 1, pp: int = 1,
                 order: "str | Sequence[str] | None" = None, cp: int = 1) -> Layout:
    """Lay dp x tp x cp x pp ranks over the GPUs (dp None: GPUs / (tp x cp x pp)); refuse a product that is not
    the GPU count."""
    nodes = gpu_nodes(gpu_node) if isinstance(gpu_node, ClusterSpec) else tuple(int(n) for n in gpu_node)
    n = len(nodes)
    assert all(isinstance(v, int) and v >= 1 for v in (tp, pp, cp, 1 if dp is None else dp)), (dp, tp, pp, cp)
    dp = n // (tp * cp * pp) if dp is None else dp
    product = f"dp x tp x pp = {dp} x {tp} x {pp}" + (f" (x cp {cp})" if cp > 1 else "")
    assert dp * tp * cp * pp == n, f"io.resolve: {product}, the cluster has {n} GPUs"
    axes = parse_order(order, cp)
    layout = Layout(dp, tp, pp, axes, nodes, (), cp)
    warnings = []
    crossing = [g for g in layout.tp_groups() if len(layout.nodes_of(g)) > 1]
    if crossing:
        why = (f"{ORDER_KEY} '{','.join(a.value for a in axes)}' places them so" if order is not None
               else f"tp = {tp} does not fit in a node")
        warnings.append(f"{len(crossing)} of {len(layout.tp_groups())} tensor-parallel groups span several nodes "
                        f"({why}; e.g. ranks {crossing[0]} on nodes {layout.nodes_of(crossing[0])}): their "
                        f"all_reduces run on the inter-node network")
    return Layout(dp, tp, pp, axes, nodes, tuple(warnings), cp)
