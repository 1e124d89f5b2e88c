"""Text reports for the CLI: cluster summary, result tables, catalog listings (presentation only)."""
from __future__ import annotations

from simdist.failures.report import format_goodput
from simdist.results.records import RunResult
from simdist.scenario import Scenario
from simdist.tables import format_pairs, format_table
from simdist.units import format_bandwidth, format_duration, format_flops, format_size


def catalog_rows(kind: str) -> tuple[list[str], list[list[object]]]:
    """Rows for `simdist catalog KIND`."""
    if kind == "models":
        from simdist.workload.catalog import get_model, model_keys

        rows = []
        for key in model_keys():
            m = get_model(key)
            rows.append([key, m.family, f"{m.params / 1e6:,.1f} M", f"{m.fwd_flops / 1e9:,.2f} G",
                         m.tokens_per_sample or "-", len(m.layers)])
        return ["model", "family", "params", "fwd FLOPs/sample", "tokens/sample", "layers"], rows
    from simdist.io.catalog import catalog_table

    headers, rows = catalog_table(kind)
    return list(headers), [list(r) for r in rows]


def cluster_summary(scenario: Scenario) -> tuple[dict[str, object], object]:
    """The figures `make demo` starts with: GPUs, nodes, links, bisection bandwidth, peak FLOP/s."""
    from simdist.topology.build import build_topology
    from simdist.topology.summary import summary

    cluster = scenario.cluster
    topology = build_topology(cluster)
    facts = summary(topology)
    precision = scenario.workload.precision.value
    peak = sum(g.count * g.gpus_per_node * g.gpu.flops(precision) for g in cluster.node_groups)
    out: dict[str, object] = {
        "gpus": cluster.num_gpus,
        "nodes": cluster.num_nodes,
        "gpu models": ", ".join(f"{g.count * g.gpus_per_node} x {g.gpu.key}" for g in cluster.node_groups),
        "intra-node": ", ".join(sorted({g.intra_node.key for g in cluster.node_groups})),
        "nic per node": ", ".join(sorted({f"{g.nic.count} x {format_bandwidth(g.nic.link.bandwidth_Bps)}"
                                          f" ({g.nic.link.name}, efficiency {g.nic.link.efficiency:g})"
                                          for g in cluster.node_groups})),
        "fabric": f"{cluster.fabric.topology.value}, {format_bandwidth(cluster.fabric.link.bandwidth_Bps)} links"
                  + (f", {cluster.fabric.oversubscription:g}:1 oversubscription" if cluster.fabric.oversubscription != 1 else ""),
    }
    for key, value in facts.items():
        if key in ("gpus", "nodes"):
            continue
        if "bisection" in key and isinstance(value, (int, float)):
            value = format_bandwidth(value) if cluster.num_nodes > 1 else "n/a (one node)"
            key = "bisection bandwidth"
        out[key.replace("_", " ")] = value
    out[f"aggregate peak ({precision})"] = format_flops(peak)
    return out, topology


def print_result(scenario: Scenario, result: RunResult) -> str:
    """A readable report of one run."""
    summary, _ = cluster_summary(scenario)
    parts = [format_pairs(list(summary.items()), title=f"== {scenario.name}: cluster ==")]
    if result.collectives is not None:
        rows = [[format_size(r.size_bytes), r.algorithm, format_duration(r.time_s), round(r.algbw_GBps, 3),
                 round(r.busbw_GBps, 3)] for r in result.collectives]
        bench = result.extra.get("benchmark", {})
        title = (f"== {bench.get('op', '')} over {bench.get('ranks', result.gpus)} ranks "
                 f"({result.fidelity}, backend {bench.get('backend', '')}) ==")
        parts.append(format_table(["size", "algorithm", "time", "algbw GB/s", "busbw GB/s"], rows, title=title))
    elif result.iteration_time_s is not None:
        parts.append(_training_report(result))
    if result.goodput:  # failure runs (simdist/failures/report.py)
        parts.append(format_goodput(result.goodput))
    if result.links:
        parts.append(format_table(["link", "utilization"], [[l.link, f"{l.utilization:.1%}"] for l in result.links],
                                  title="== most utilised links =="))
    return "\n\n".join(parts)


def _training_report(result: RunResult) -> str:
    s = result.extra.get("strategy", {})
    b = result.breakdown_s
    tp = result.throughput
    pairs = [
        ("strategy", f"{s.get('name')} (backend {s.get('backend')}, {s.get('buckets')} buckets, "
                     f"overlap {s.get('overlap')}, compression {s.get('compression')})"),
        ("global batch", f"{s.get('global_batch')} ({s.get('batch_per_gpu')} per GPU x {s.get('grad_accumulation')} micro-steps)"),
        ("iteration time", format_duration(result.iteration_time_s or 0.0)),
        ("throughput", f"{tp.samples_per_s:,.1f} samples/s" + (f", {tp.tokens_per_s:,.0f} tokens/s" if tp.tokens_per_s else "")),
        ("scaling efficiency", f"{result.scaling_efficiency:.1%}"),
    ]
    if result.memory:
        m = result.memory
        pairs.append(("memory per GPU", f"{format_size(m.per_gpu_bytes)} of {format_size(m.capacity_bytes)}"))
    out = format_pairs(pairs, title=f"== training ({result.fidelity}) ==")
    if b:
        rows = [["compute", b.compute], ["communication", b.communication], ["exposed communication", b.exposed_communication],
                ["compression", b.compression], ["optimizer", b.optimizer]]
        total = result.iteration_time_s or 1.0
        out += "\n\n" + format_table(["per iteration", "time", "share of iteration"],
                                     [[k, format_duration(v), f"{v / total:.1%}"] for k, v in rows],
                                     title="== where the time goes ==")
    return out
