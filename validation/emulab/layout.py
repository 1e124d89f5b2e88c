"""What an emulated cluster looks like: hosts, racks, link rates and the tbf/TCP knobs, as plain data.

Kept apart from the commands that build it so the layout (and `from_scenario`) can be tested without
root. The defaults are settings measured on the emulated cluster: one TCP stream then runs at the shaped
rate's TCP-over-Ethernet goodput (1448/1514 of it).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from simdist.errors import ScenarioError

# tbf counts 1514-byte Ethernet frames while TCP moves 1448 payload bytes each (MTU 1500, timestamps).
GOODPUT_FACTOR = 1448 / 1514
MAX_HOSTS = 250  # addresses are 10.77.0.(i+1)/24
_PREFIX_RE = re.compile(r"^sdt[a-z0-9]{0,6}$")


@dataclass(frozen=True)
class EmulabLayout:
    """Hosts `0..hosts-1`, each with one link of `host_rate_bps` (bits/s) to its leaf bridge.

    `nodes_per_leaf=None` puts every host on one bridge (single_switch). Otherwise hosts are cut
    into racks of `nodes_per_leaf`; racks are joined directly (2 racks) or through a core bridge,
    each rack uplink shaped at `uplink_rate_bps` (default nodes_per_leaf x host rate / oversubscription).
    """

    hosts: int
    host_rate_bps: float
    nodes_per_leaf: int | None = None
    oversubscription: float = 1.0
    uplink_rate_bps: float | None = None
    burst_bytes: int = 256 * 1024
    host_limit_bytes: int = 1024 * 1024
    switch_limit_bytes: int = 8 * 1024 * 1024
    tsq_bytes: int = 65536
    congestion_control: str = "reno"
    prefix: str = "sdt"

    def __post_init__(self) -> None:
        if not 1 <= self.hosts <= MAX_HOSTS:
            raise ScenarioError.bad_value("hosts", self.hosts, f"1 to {MAX_HOSTS} hosts")
        if not self.host_rate_bps > 0:
            raise ScenarioError.bad_value("host_rate_bps", self.host_rate_bps, "a positive rate in bits/s")
        if self.nodes_per_leaf is not None and self.nodes_per_leaf < 1:
            raise ScenarioError.bad_value("nodes_per_leaf", self.nodes_per_leaf, "a positive integer or None")
        if not self.oversubscription > 0:
            raise ScenarioError.bad_value("oversubscription", self.oversubscription, "a positive ratio")
        if self.uplink_rate_bps is not None and not self.uplink_rate_bps > 0:
            raise ScenarioError.bad_value("uplink_rate_bps", self.uplink_rate_bps, "a positive rate in bits/s")
        if self.burst_bytes < 65536:
            raise ScenarioError.bad_value("burst_bytes", self.burst_bytes, ">= 65536 (veth passes 64 KB GSO packets)")
        if not _PREFIX_RE.match(self.prefix):
            raise ScenarioError.bad_value("prefix", self.prefix, "'sdt' followed by up to 6 of [a-z0-9]")

    # ---- derived figures -------------------------------------------------------------------
    @property
    def racks(self) -> int:
        """Number of leaf bridges (1 for a single switch)."""
        return 1 if self.nodes_per_leaf is None else math.ceil(self.hosts / self.nodes_per_leaf)

    @property
    def effective_uplink_rate_bps(self) -> float:
        """The shaped rate of each rack uplink (per direction)."""
        if self.uplink_rate_bps is not None:
            return self.uplink_rate_bps
        npl = self.nodes_per_leaf or self.hosts
        return npl * self.host_rate_bps / self.oversubscription

    def rack_of(self, host: int) -> int:
        return 0 if self.nodes_per_leaf is None else host // self.nodes_per_leaf

    def address(self, host: int) -> str:
        """The host's IPv4 address; it exists only inside the host's namespace."""
        return f"10.77.0.{host + 1}"

    def host_ns(self, host: int) -> str:
        return f"{self.prefix}-h{host}"

    @property
    def switch_ns(self) -> str:
        return f"{self.prefix}-sw"

    def namespaces(self) -> list[str]:
        """Every namespace this layout creates, switch first."""
        return [self.switch_ns] + [self.host_ns(i) for i in range(self.hosts)]

    def goodput_Bps(self, rate_bps: float) -> float:
        """TCP payload bytes/s through a tbf of `rate_bps`: what a prediction should use."""
        return rate_bps / 8 * GOODPUT_FACTOR

    def describe(self) -> dict[str, object]:
        """Plain figures for result files."""
        return {
            "hosts": self.hosts, "host_rate_bps": self.host_rate_bps, "racks": self.racks,
            "nodes_per_leaf": self.nodes_per_leaf,
            "uplink_rate_bps": self.effective_uplink_rate_bps if self.racks > 1 else None,
            "burst_bytes": self.burst_bytes, "host_limit_bytes": self.host_limit_bytes,
            "switch_limit_bytes": self.switch_limit_bytes, "tsq_bytes": self.tsq_bytes,
            "congestion_control": self.congestion_control, "goodput_factor": GOODPUT_FACTOR,
        }


def from_scenario(scenario: object, rate_scale: float = 1.0, prefix: str = "sdt") -> EmulabLayout:
    """The layout emulating `scenario.cluster`: one host per node, NIC rate x count x `rate_scale`.

    single_switch -> one bridge; fat_tree / leaf_spine -> racks of `nodes_per_leaf`. Other fabrics
    cannot be built from bridges and raise ScenarioError naming the key.
    """
    cluster = scenario.cluster  # type: ignore[attr-defined]
    rates = {g.nic.link.bandwidth_Bps * 8 * g.nic.count for g in cluster.node_groups}
    if len(rates) != 1:
        raise ScenarioError.bad_value(
            "cluster.nodes", sorted(rates), "one NIC rate for all node groups (the emulated cluster is uniform)")
    rate_bps = rates.pop() * rate_scale
    fabric = cluster.fabric
    kind = str(fabric.topology)
    if kind == "single_switch":
        return EmulabLayout(cluster.num_nodes, rate_bps, prefix=prefix)
    if kind in ("fat_tree", "leaf_spine"):
        if fabric.nodes_per_leaf is None:
            raise ScenarioError.bad_value(
                "cluster.fabric.nodes_per_leaf", None, "an explicit nodes_per_leaf to emulate racks")
        return EmulabLayout(cluster.num_nodes, rate_bps, nodes_per_leaf=fabric.nodes_per_leaf,
                            oversubscription=fabric.oversubscription, prefix=prefix)
    raise ScenarioError.bad_value(
        "cluster.fabric.topology", kind, "single_switch, fat_tree or leaf_spine for the emulated cluster")
