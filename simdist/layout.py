"""Model-parallel layout: which global GPU rank holds which (dp, tp, pp) coordinate, and the groups that follow.

Ranks are the cluster's GPUs in node-major order (ClusterSpec). A placement order lists the axes innermost
first: with Megatron-LM's default "tp,dp,pp" consecutive ranks form a tp group (inside a node when tp divides
the node), dp comes next and pp is outermost, so pipeline stages land on different nodes. Any order can be
given (`training.placement_order`); a tp group that crosses a node boundary is reported in `Layout.warnings`,
never refused, because it is legal (only slow).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Sequence

from simdist.hardware.specs import ClusterSpec


class Axis(StrEnum):
    """A parallelism axis, spelled as in `training.parallelism` and `training.placement_order`."""

    TP = "tp"
    DP = "dp"
    PP = "pp"


AXES: dict[str, Axis] = {a.value: a for a in Axis}
DEFAULT_ORDER: tuple[Axis, Axis, Axis] = (Axis.TP, Axis.DP, Axis.PP)  # Megatron-LM's "tp-dp-pp", innermost first
ORDER_KEY = "training.placement_order"


@dataclass(frozen=True)
class Coord:
    """A rank's position on the three axes (0-based)."""

    dp: int
    tp: int
    pp: int

    def on(self, axis: Axis) -> int:
        return getattr(self, axis.value)


def parse_order(text: "str | Sequence[str] | None") -> tuple[Axis, Axis, Axis]:
    """'tp,pp,dp' (innermost first) -> axes; None -> the default (the schema checks the key)."""
    if text is None:
        return DEFAULT_ORDER
    parts = [p.strip() for p in text.split(",")] if isinstance(text, str) else [str(p).strip() for p in text]
    assert sorted(parts) == sorted(AXES) and len(parts) == 3, f"the schema checks {ORDER_KEY}: {text!r}"
    return tuple(AXES[p] for p in parts)  # type: ignore[return-value]


@dataclass(frozen=True)
class Layout:
    """dp x tp x pp ranks over GPUs 0..n-1; `gpu_node[r]` is the node of GPU (= rank) r."""

    dp: int
    tp: int
    pp: int
    order: tuple[Axis, Axis, Axis]
    gpu_node: tuple[int, ...]
    warnings: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return self.dp * self.tp * self.pp

    def degree(self, axis: Axis) -> int:
        return getattr(self, Axis(axis).value)

    def _strides(self) -> dict[Axis, int]:
        stride, out = 1, {}
        for axis in self.order:
            out[axis] = stride
            stride *= self.degree(axis)
        return out

    def coords(self, rank: int) -> Coord:
        """(dp, tp, pp) of global rank `rank`."""
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} outside 0..{self.size - 1}")
        strides = self._strides()
        c = {a.value: (rank // strides[a]) % self.degree(a) for a in Axis}
        return Coord(**c)

    def rank(self, dp: int, tp: int, pp: int) -> int:
        """The global rank at coordinates (dp, tp, pp)."""
        c = Coord(dp, tp, pp)
        for a in Axis:
            if not 0 <= c.on(a) < self.degree(a):
                raise ValueError(f"{a} coordinate {c.on(a)} outside 0..{self.degree(a) - 1}")
        strides = self._strides()
        return sum(c.on(a) * strides[a] for a in Axis)

    def groups(self, axis: "Axis | str") -> list[list[int]]:
        """Every group along `axis` (ranks differing only in that coordinate), each in coordinate order,
        the groups sorted by their first rank."""
        axis = Axis(axis)
        stride = self._strides()[axis]
        seen: set[int] = set()
        out = []
        for r in range(self.size):
            if r in seen:
                continue
            base = r - self.coords(r).on(axis) * stride
            g = [base + i * stride for i in range(self.degree(axis))]
            seen.update(g)
            out.append(g)
        return out

    def tp_groups(self) -> list[list[int]]:
        return self.groups(Axis.TP)

    def pp_groups(self) -> list[list[int]]:
        """Pipeline groups: element i is the rank running stage i."""
        return self.groups(Axis.PP)

    def dp_groups(self) -> list[list[int]]:
        return self.groups(Axis.DP)

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
                 order: "str | Sequence[str] | None" = None) -> Layout:
    """Lay dp x tp x pp ranks over the GPUs (dp None: GPUs / (tp x pp)); refuse a product that is not the GPU count."""
    nodes = gpu_nodes(gpu_node) if isinstance(gpu_node, ClusterSpec) else tuple(int(n) for n in gpu_node)
    n = len(nodes)
    assert all(isinstance(v, int) and v >= 1 for v in (tp, pp, 1 if dp is None else dp)), (dp, tp, pp)
    dp = n // (tp * pp) if dp is None else dp
    assert dp * tp * pp == n, f"io.rules_training: dp x tp x pp = {dp} x {tp} x {pp}, the cluster has {n} GPUs"
    axes = parse_order(order)
    layout = Layout(dp, tp, pp, axes, nodes)
    warnings = []
    crossing = [g for g in layout.tp_groups() if len(layout.nodes_of(g)) > 1]
    if crossing:
        why = (f"{ORDER_KEY} '{','.join(a.value for a in axes)}' places them so" if order is not None
               else f"tp = {tp} does not fit in a node")
        warnings.append(f"{len(crossing)} of {len(layout.tp_groups())} tensor-parallel groups span several nodes "
                        f"({why}; e.g. ranks {crossing[0]} on nodes {layout.nodes_of(crossing[0])}): their "
                        f"all_reduces run on the inter-node network")
    return Layout(dp, tp, pp, axes, nodes, tuple(warnings))
