"""Alpha-beta (beta only) predictions for the emulated cluster, to print measured/predicted ratios.

A stand-in until `simdist validate` compares against the simulator: B = 0.956 x tbf rate (TCP
goodput), one rank per host, gloo's algorithms, alpha ignored (sizes are chosen where the network dominates).
"""
from __future__ import annotations

from simdist.validation.cases import Case, CaseKind, DdpHook
from simdist.validation.emulab.layout import EmulabLayout


def _bw(layout: EmulabLayout) -> tuple[float, float]:
    """(host goodput, uplink goodput) in bytes/s."""
    return layout.goodput_Bps(layout.host_rate_bps), layout.goodput_Bps(layout.effective_uplink_rate_bps)


def ring_bw(layout: EmulabLayout) -> float:
    """Bottleneck of a ring over consecutive hosts: every rack uplink carries one flow per direction."""
    host, up = _bw(layout)
    return host if layout.racks == 1 else min(host, up)


def all_reduce_s(layout: EmulabLayout, size_bytes: float) -> float:
    n = layout.hosts
    return 2 * (n - 1) / n * size_bytes / ring_bw(layout)


def gather_scatter_s(layout: EmulabLayout, size_bytes: float) -> float:
    """Ring all_gather (textbook reduce_scatter) of a `size_bytes` buffer: (N-1)/N S / B."""
    n = layout.hosts
    return (n - 1) / n * size_bytes / ring_bw(layout)


def gloo_reduce_scatter_s(layout: EmulabLayout, size_bytes: float) -> float:
    """gloo's reduce_scatter all-reduces the whole buffer and keeps a slice (measured: 2.02-2.07 x textbook)."""
    return all_reduce_s(layout, size_bytes)


def hierarchical_s(layout: EmulabLayout, size_bytes: float, local: int) -> float:
    """Intra-group reduce-scatter (gloo: an all_reduce) + per-local-rank inter all_reduce (the local
    flows share the rack uplink) + intra-group all_gather."""
    host, up = _bw(layout)
    groups = layout.hosts // local
    intra = (local - 1) / local * size_bytes / host  # all_gather; gloo's reduce_scatter costs twice this
    crossing = layout.racks > 1 and local == (layout.nodes_per_leaf or layout.hosts)
    inter_bw = min(host, up / local) if crossing else host
    inter = 2 * (groups - 1) / groups * (size_bytes / local) / inter_bw if groups > 1 else 0.0
    return 3 * intra + inter


def ps_s(layout: EmulabLayout, size_bytes: float, servers: int, colocated: bool) -> float:
    """Push then pull; the busiest link is a server's (W remote shards) or a worker's (its shards)."""
    host, _ = _bw(layout)
    workers = layout.hosts if colocated else layout.hosts - servers
    remote_workers = workers - 1 if colocated else workers
    shard = size_bytes / servers
    worker_out = shard * (servers - 1 if colocated else servers)
    return 2 * max(remote_workers * shard, worker_out) / host


def p2p_bw(layout: EmulabLayout, pair_class: str) -> float:
    """Goodput of one flow between two hosts: the host link, or the slower of it and the rack uplink."""
    host, up = _bw(layout)
    return min(host, up) if pair_class == "cross_uplink" and layout.racks > 1 else host


def predict_case(layout: EmulabLayout, case: Case, size_bytes: float, compute_s: float = 0.0,
                 pair_class: str = "same_switch") -> float | None:
    """Predicted seconds of one point of `case`, or None where no closed form is given here."""
    if case.kind is CaseKind.P2P:  # one-way time; alpha ignored (ping-pong ratios show it)
        return size_bytes / p2p_bw(layout, pair_class)
    if layout.racks > 1 and case.kind is CaseKind.PS:
        return None
    if case.kind is CaseKind.ALL_REDUCE:
        return all_reduce_s(layout, size_bytes)
    if case.kind is CaseKind.REDUCE_SCATTER:
        return gloo_reduce_scatter_s(layout, size_bytes)
    if case.kind is CaseKind.ALL_GATHER:
        return gather_scatter_s(layout, size_bytes)
    if case.kind is CaseKind.HIERARCHICAL:
        return hierarchical_s(layout, size_bytes, case.local_size or (layout.nodes_per_leaf or layout.hosts))
    if case.kind is CaseKind.PS:
        return ps_s(layout, size_bytes, case.servers, case.placement == "colocated")
    if case.kind is CaseKind.DDP:
        if case.hook is DdpHook.POWERSGD:
            h, r = case.hidden, case.powersgd_rank
            wire = case.depth * (2 * h * r + h) * 4  # P and Q per weight matrix, biases uncompressed
        elif case.hook in (DdpHook.NONE, DdpHook.FP16, DdpHook.BF16):
            wire = size_bytes * (1.0 if case.hook is DdpHook.NONE else 0.5)
        else:
            return None  # the other codecs' collectives: simdist's prediction (`simdist validate`)
        return compute_s + all_reduce_s(layout, wire)
    return None


def add_predictions(layout: EmulabLayout, measured: dict[str, object]) -> list[dict[str, object]]:
    """Rows {label, size_bytes, measured_s, predicted_s, ratio} for every point of a bench result."""
    from simdist.validation.cases import case_from_dict

    rows = []
    for res in measured["cases"]:  # type: ignore[index]
        case = case_from_dict(res["case"])
        compute = res.get("compute", {}).get("median_s", 0.0)
        for p in res["points"]:
            pred = predict_case(layout, case, p["size_bytes"], compute, p.get("pair_class", "same_switch"))
            label = f"{res['label']} {p['pair'][0]}-{p['pair'][1]} {p['mode']}" if "pair" in p else res["label"]
            rows.append({"label": label, "size_bytes": p["size_bytes"], "measured_s": p["median_s"],
                         "min_s": p["min_s"], "max_s": p["max_s"], "predicted_s": pred,
                         "ratio": None if pred is None else p["median_s"] / pred})
    return rows
