"""The `ip`/`tc`/`sysctl` commands that build an EmulabLayout, as argv lists (no side effects).

Every command runs inside a namespace the layout creates (`ip netns exec NS ...`) or creates one;
nothing touches the root namespace's interfaces, routes or addresses.
"""
from __future__ import annotations

from simdist.validation.emulab.layout import EmulabLayout

Argv = list[str]


def _ns(ns: str, *cmd: str) -> Argv:
    return ["ip", "netns", "exec", ns, *cmd]


def tbf(ns: str, dev: str, rate_bps: float, burst_bytes: int, limit_bytes: int) -> Argv:
    """Shape the egress of `dev` with a token bucket (`tc qdisc replace`, so it also re-rates)."""
    return _ns(ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{int(round(rate_bps))}bit",
               "burst", str(int(burst_bytes)), "limit", str(int(limit_bytes)))


def bridge_cmds(ns: str, name: str) -> list[Argv]:
    return [
        _ns(ns, "ip", "link", "add", name, "type", "bridge"),
        _ns(ns, "ip", "link", "set", name, "type", "bridge", "stp_state", "0", "forward_delay", "0"),
        _ns(ns, "ip", "link", "set", name, "up"),
    ]


def host_cmds(lay: EmulabLayout, i: int) -> list[Argv]:
    """Namespace, TCP sysctls, veth h<i> <-> s<i>, address, and tbf on both ends of host i's link."""
    ns, sw = lay.host_ns(i), lay.switch_ns
    return [
        ["ip", "netns", "add", ns],
        _ns(ns, "ip", "link", "set", "lo", "up"),
        _ns(ns, "sysctl", "-q", "-w", f"net.ipv4.tcp_limit_output_bytes={lay.tsq_bytes}",
            "net.ipv4.tcp_slow_start_after_idle=0", f"net.ipv4.tcp_congestion_control={lay.congestion_control}"),
        ["ip", "link", "add", f"h{i}", "netns", ns, "type", "veth", "peer", "name", f"s{i}", "netns", sw],
        _ns(ns, "ip", "addr", "add", f"{lay.address(i)}/24", "dev", f"h{i}"),
        _ns(ns, "ip", "link", "set", f"h{i}", "up"),
        _ns(sw, "ip", "link", "set", f"s{i}", "master", f"br{lay.rack_of(i)}", "up"),
        tbf(ns, f"h{i}", lay.host_rate_bps, lay.burst_bytes, lay.host_limit_bytes),
        tbf(sw, f"s{i}", lay.host_rate_bps, lay.burst_bytes, lay.switch_limit_bytes),
    ]


def uplink_pairs(lay: EmulabLayout) -> list[tuple[str, str, str, str]]:
    """(dev_a, bridge_a, dev_b, bridge_b) per inter-switch link: rack0-rack1 directly, else rack-core."""
    if lay.racks == 1:
        return []
    if lay.racks == 2:
        return [("up0", "br0", "up1", "br1")]
    return [(f"up{r}", f"br{r}", f"cr{r}", "core") for r in range(lay.racks)]


def build_plan(lay: EmulabLayout) -> list[Argv]:
    """All commands, in order, that turn nothing into the emulated cluster."""
    sw = lay.switch_ns
    plan: list[Argv] = [["ip", "netns", "add", sw], _ns(sw, "ip", "link", "set", "lo", "up")]
    for r in range(lay.racks):
        plan += bridge_cmds(sw, f"br{r}")
    if lay.racks > 2:
        plan += bridge_cmds(sw, "core")
    rate = lay.effective_uplink_rate_bps
    for a, br_a, b, br_b in uplink_pairs(lay):
        plan += [
            _ns(sw, "ip", "link", "add", a, "type", "veth", "peer", "name", b),
            _ns(sw, "ip", "link", "set", a, "master", br_a, "up"),
            _ns(sw, "ip", "link", "set", b, "master", br_b, "up"),
            tbf(sw, a, rate, lay.burst_bytes, lay.switch_limit_bytes),
            tbf(sw, b, rate, lay.burst_bytes, lay.switch_limit_bytes),
        ]
    for i in range(lay.hosts):
        plan += host_cmds(lay, i)
    return plan


def rerate_plan(lay: EmulabLayout, host_rate_bps: float, uplink_rate_bps: float | None = None) -> list[Argv]:
    """Commands that change the shaped rates in place (TCP connections survive)."""
    plan = []
    for i in range(lay.hosts):
        plan.append(tbf(lay.host_ns(i), f"h{i}", host_rate_bps, lay.burst_bytes, lay.host_limit_bytes))
        plan.append(tbf(lay.switch_ns, f"s{i}", host_rate_bps, lay.burst_bytes, lay.switch_limit_bytes))
    if uplink_rate_bps is not None:
        for a, _, b, _ in uplink_pairs(lay):
            plan.append(tbf(lay.switch_ns, a, uplink_rate_bps, lay.burst_bytes, lay.switch_limit_bytes))
            plan.append(tbf(lay.switch_ns, b, uplink_rate_bps, lay.burst_bytes, lay.switch_limit_bytes))
    return plan
