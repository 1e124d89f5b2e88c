"""Text reports for the CLI: cluster summary, result tables, catalog listings (presentation only)."""
from __future__ import annotations

import re

from simdist.engine.context import server_topology_args
from simdist.engine.context_cache import shared_topology
from simdist.failures.report import format_goodput, format_phases
from simdist.io.catalog import catalog_table
from simdist.results.records import RunResult
from simdist.scenario import PsPlacement, Scenario, StrategyKind
from simdist.strategies.rank_memory import memory_by_group
from simdist.tables import format_pairs, format_table
from simdist.topology.summary import summary as topology_facts
from simdist.units import format_bandwidth, format_duration, format_flops, format_memory, format_size
from simdist.workload.catalog import get_model, model_keys


def catalog_rows(kind: str) -> tuple[list[str], list[list[object]]]:
    """Rows for `simdist catalog KIND`."""
    if kind == "models":
        rows = []
        for key in model_keys():
            m = get_model(key)
            rows.append([key, m.family, f"{m.params / 1e6:,.1f} M", f"{m.fwd_flops / 1e9:,.2f} G",
                         m.tokens_per_sample or "-", len(m.layers)])
        return ["model", "family", "params", "fwd FLOPs/sample", "tokens/sample", "layers"], rows

    headers, rows = catalog_table(kind)
    return list(headers), [list(r) for r in rows]


def catalog_text(kind: str) -> str:
    """`simdist catalog KIND` for a terminal: the GPU table keeps the figures (peak dense TFLOP/s per precision,
    memory, bandwidth, power, price) within ~110 columns; price basis and full name are in --json."""
    headers, rows = catalog_rows(kind)
    if kind != "gpus":
        return format_table(headers, rows)
    keep = ["key", "fp32 TFLOP/s", "tf32 TFLOP/s", "fp16 TFLOP/s", "bf16 TFLOP/s", "fp8 TFLOP/s", "memory",
            "mem bw", "TDP", "$/h", "price date"]
    at = [headers.index(h) for h in keep]
    table = format_table([h.replace(" TFLOP/s", "") for h in keep], [[row[i] for i in at] for row in rows],
                         title="GPUs: peak dense TFLOP/s per precision ('-': no units for it), memory, power, "
                               "on-demand $ per GPU-hour")
    return table + "\nprice basis and full names: simdist catalog gpus --json"


def _caps(link) -> str:
    """The NIC's per-connection and per-stream limits, where it has them."""
    parts = []
    if link.flow_cap_Bps is not None:
        parts.append(f"one connection at most {format_bandwidth(link.flow_cap_Bps)}")
    if link.stream_cap_Bps is not None:
        parts.append(f"one TCP stream at most {format_bandwidth(link.stream_cap_Bps)}")
    return "".join(f"; {p}" for p in parts)


def cluster_summary(scenario: Scenario) -> tuple[dict[str, object], object]:
    """The figures `make demo` starts with: GPUs, nodes, links, bisection bandwidth, peak FLOP/s."""
    cluster = scenario.cluster
    comm = scenario.communication

    dedicated = comm.strategy == StrategyKind.PS and comm.ps_placement == PsPlacement.DEDICATED
    topology = shared_topology(cluster, **server_topology_args(scenario))
    facts = topology_facts(topology)
    precision = scenario.workload.precision.value
    peak = sum(g.count * g.gpus_per_node * g.gpu.flops(precision) for g in cluster.node_groups)
    out: dict[str, object] = {
        "gpus": cluster.num_gpus,
        "nodes": cluster.num_nodes,
        "gpu models": ", ".join(f"{g.count * g.gpus_per_node} x {g.gpu.key}" for g in cluster.node_groups),
        "intra-node": ", ".join(sorted({g.intra_node.key + (" (default: no intra_node given)" if g.intra_node_default
                                                            else "") for g in cluster.node_groups})),
        "nic per node": ", ".join(sorted({f"{g.nic.count} x {format_bandwidth(g.nic.link.bandwidth_Bps)}"
                                          f" ({g.nic.link.name} link, {g.nic.link.efficiency:.3g} of line rate achieved:"
                                          f" {g.nic.link.efficiency_basis or 'given'}{_caps(g.nic.link)})"
                                          for g in cluster.node_groups})),
        "nic path": ", ".join(sorted({"GPUDirect RDMA" if g.nic.gpudirect else g.nic.staging
                                      for g in cluster.node_groups})),
        "fabric": f"{cluster.fabric.topology.value}, {format_bandwidth(cluster.fabric.link.bandwidth_Bps)} links"
                  + (f", {cluster.fabric.oversubscription:g}:1 oversubscription" if cluster.fabric.oversubscription != 1 else ""),
    }
    if comm.strategy == StrategyKind.PS:  # `servers` counts server machines; colocated ones are on the workers
        facts["ps servers"] = (f"{comm.ps_servers} dedicated machines" if dedicated else
                               f"{comm.ps_servers} in the worker nodes' host memory (no extra machines)"
                               if comm.ps_placement == PsPlacement.HOST else
                               f"{comm.ps_servers} colocated on the worker nodes (no extra machines)")
    for key, value in facts.items():
        if key in ("gpus", "nodes"):
            continue
        if key == "servers" and comm.strategy != StrategyKind.PS:
            continue  # no parameter server: '0 servers' only confuses
        if isinstance(value, dict):  # link counts by kind: '128 fabric, 128 nic, ...', not a dict repr
            value = ", ".join(f"{count} {kind}" for kind, count in value.items())
        if "bisection" in key and isinstance(value, (int, float)):
            value = format_bandwidth(value) if cluster.num_nodes > 1 else "n/a (one node)"
            key = "bisection bandwidth"
        if key == "node_switches":  # NVSwitch chips and PCIe switches inside the nodes, not fabric switches
            key, value = "switches inside nodes", f"{value} (NVSwitch and PCIe switches)"
        out[key.replace("_", " ")] = value
    out[f"aggregate peak ({precision})"] = format_flops(peak) + _fallback_text(scenario)
    return out, topology


def _fallback_text(scenario: Scenario) -> str:
    """' (a100-sxm4-80gb: no fp8 units, counted at its fp16 peak)' where a GPU computes the run's precision in
    another (GpuSpec.runs_as), else ''."""
    precision = scenario.workload.precision.value
    ran = {g.gpu.key: g.gpu.runs_as(precision) for g in scenario.cluster.node_groups}
    gone = [f"{gpu}: no {precision} units, counted at its {r} peak" for gpu, r in ran.items() if r != precision]
    return f" ({'; '.join(gone)})" if gone else ""


def print_result(scenario: Scenario, result: RunResult) -> str:
    """A readable report of one run."""
    summary, _ = cluster_summary(scenario)
    parts = [format_pairs(list(summary.items()), title=f"== {scenario.name}: cluster ==")]
    if result.collectives is not None:
        rows = [[format_size(r.size_bytes), r.algorithm, format_duration(r.time_s), round(r.algbw_GBps, 3),
                 round(r.busbw_GBps, 3)] for r in result.collectives]
        bench = result.benchmark
        title = (f"== {bench.op if bench else ''} over {bench.ranks if bench else result.gpus} ranks "
                 f"({result.fidelity}, backend {bench.backend if bench else ''}) ==")
        parts.append(format_table(["size", "algorithm", "time", "algbw GB/s", "busbw GB/s"], rows, title=title)
                     + _algorithm_notes([r.algorithm for r in result.collectives]))
    elif result.iteration_time_s is not None:
        parts.append(_training_report(result, scenario))
    if result.phases:  # sync hybrid, batch_split dynamic (engine/composite.py)
        parts.append(format_phases(result.phases))
    if result.goodput:  # failure runs (simdist/failures/report.py)
        parts.append(format_goodput(result.goodput))
    cost = cost_text(result.cost.to_dict() if result.cost else None)
    if cost:
        parts.append(format_pairs([("cost", cost)], title="== cost (catalog prices, `simdist catalog gpus`) =="))
    if result.links:
        parts.append(format_table(["link", "utilization", "links like it"], link_rows(result.links),
                                  title=f"== the {len(result.links)} most utilised links (one direction each) =="))
    return "\n\n".join(parts)


def link_rows(links) -> list[list[object]]:
    """One row per kind of link at one utilisation: ten NICs of one leaf equally loaded are
    'leaf0->node0/nic0 (and 9 like it: leaf#->node#/nic#)', not ten identical rows."""
    groups: dict[tuple[str, str], list[str]] = {}
    for link in links:
        groups.setdefault((re.sub(r"\d+", "#", link.link), f"{link.utilization:.1%}"), []).append(link.link)
    return [[names[0], share, f"x {len(names)} ({shape})" if len(names) > 1 else "-"]
            for (shape, share), names in groups.items()]


_ALGORITHMS = {  # what the benchmark table's algorithm names mean (docs/collectives.md)
    "nvls": "NVLink SHARP: the NVSwitch reduces and multicasts",
    "nvls_tree": "NVLSTree: NVLS inside each node, a tree between the nodes",
    "collnet_direct": "CollNet Direct: SHARP reduction in the fabric switches, every GPU to the switch",
    "collnet_chain": "CollNet Chain: SHARP in the fabric switches, through a chain of the node's GPUs",
    "LL": "low-latency protocol: 8-byte stores with flags", "LL128": "low-latency protocol on 128-byte lines",
    "Simple": "large transfers with fences"}


def _algorithm_notes(algorithms: list[str]) -> str:
    """'\n  nvls_tree: NVLSTree: ...' for the less familiar algorithm and protocol names the table shows."""
    names = dict.fromkeys(part for a in algorithms for part in str(a).split("/") if part in _ALGORITHMS)
    return "".join(f"\n  {name}: {_ALGORITHMS[name]}" for name in names)


def cost_text(cost: dict | None) -> str:
    """'$655.36/hour, $4.348e-07/sample, ...' from a result's `cost` key ('' without one)."""
    if not isinstance(cost, dict) or cost.get("price_per_hour_usd") is None:
        return ""
    out = f"${cost['price_per_hour_usd']:,.2f}/hour"
    for key, unit in (("per_sample_usd", "sample"), ("per_token_usd", "token"),
                      ("per_useful_sample_usd", "useful sample"), ("per_useful_token_usd", "useful token")):
        if cost.get(key) is not None:
            out += f", ${cost[key]:.4g}/{unit}"
    prices, sources = cost.get("gpu_price_per_hour_usd") or {}, cost.get("gpu_price_source") or {}
    for gpu, price in prices.items():  # what the figure rests on: each GPU's price, its basis and its date
        src = sources.get(gpu) or {}
        out += f"\n  {gpu} at ${price:.4g}/GPU-hour: {src.get('basis') or 'given'} (price date {src.get('date') or '-'})"
    return out


def _compression_text(strategy: dict) -> str:
    """The compression that ran: the requested method, or what it fell back to and why."""
    ran = strategy.get("compression_ran")
    if not isinstance(ran, dict):
        return str(strategy.get("compression"))
    reasons = ran.get("fallback_reasons") or []
    return str(ran.get("ran")) + (f"; {reasons[0]}" if reasons else "")


def _ps_text(scenario: Scenario | None) -> str:
    """', 4 dedicated servers, aggregation node, server cpu' for a PS run, else ''."""
    if scenario is None or scenario.communication.strategy != StrategyKind.PS:
        return ""
    c = scenario.communication
    return (f", {c.ps_servers} {c.ps_placement.value} servers, aggregation {c.ps_aggregation.value}, "
            f"server {c.ps_server.value}")


_BREAKDOWN_TERMS = (  # (breakdown_s key, row label): docs/results.md explains each
    ("compute", "compute"), ("communication", "communication (busy)"),
    ("exposed_communication", "exposed communication (not hidden by compute)"),
    ("compression", "compression"), ("grad_copy", "copies of reduced buckets into .grad (DDP)"),
    ("optimizer", "optimizer"),
    ("pipeline_bubble", "pipeline bubble (stage waits for inputs)"),
    ("tp_communication", "tensor-parallel communication"), ("dp_communication", "data-parallel communication"),
    ("pp_communication", "pipeline sends in flight"))


def _parallelism_text(p: dict) -> str:
    """'tp 8 x pp 16 x dp 8, 1f1b schedule, 192 micro-batches of 1, recompute full'."""
    text = f"tp {p.get('tp')} x pp {p.get('pp')} x dp {p.get('dp')}"
    if p.get("cp"):
        text += f" x cp {p['cp']} ({p.get('cp_comm_type')})"
    if p.get("ep"):
        text += f"; experts ep {p['ep']} x etp {p.get('etp')} x edp {p.get('edp')}"
        text += f", hottest expert {p['moe_load_imbalance']:g} x the mean" if p.get("moe_load_imbalance") != 1 else ""
    if int(p.get("pp") or 1) > 1:
        stages = f" x {p['virtual_stages']} virtual stages" if int(p.get("virtual_stages") or 1) > 1 else ""
        text += f", {p.get('schedule')} schedule{stages}, {p.get('micro_batches')} micro-batches of {p.get('micro_batch')}"
    extras = [f"ZeRO {p['zero']}" if p.get("zero") else "", f"recompute {p['recompute']}" if p.get("recompute")
              not in (None, "none") else "", "sequence parallel" if p.get("sequence_parallel") else ""]
    return text + "".join(f", {e}" for e in extras if e)


def _flops_pairs(result: RunResult, scenario: Scenario | None) -> list[tuple[str, str]]:
    """MFU and model TFLOP/s per GPU (3 x forward FLOPs per sample, as Megatron counts), the peak they are a
    share of (naming a precision fallback), and hardware TFLOP/s where recomputation adds FLOPs."""
    mfu = result.extra.get("mfu")
    if mfu is None:
        return []
    peak_text, model_tflops = "", None
    if scenario is not None:
        groups = scenario.cluster.node_groups
        precision = scenario.workload.precision.value
        peak = sum(g.count * g.gpus_per_node * g.gpu.flops(precision) for g in groups) / max(1, result.gpus)
        model_tflops = mfu * peak / 1e12
        mean = "mean over the node groups: " if len({g.gpu.key for g in groups}) > 1 else ""
        fallback = _fallback_text(scenario).strip()[1:-1]  # '(...)' -> '...'
        peak_text = (f" of the {precision} peak ({mean}{peak / 1e12:,.1f} TFLOP/s per GPU"
                     + (f"; {fallback})" if fallback else ")"))
    pairs = [("MFU", f"{mfu:.1%}{peak_text}")]
    if model_tflops is not None:
        text = f"{model_tflops:,.1f} (model FLOPs)"
        hw = result.extra.get("achieved_tflops_per_gpu")
        if hw is not None and abs(hw - model_tflops) > 0.05:
            text += f", {hw:,.1f} with recomputation (hardware FLOPs)"
        pairs.append(("TFLOP/s per GPU", text))
    return pairs


def _training_report(result: RunResult, scenario: Scenario | None = None) -> str:
    s = result.strategy.to_dict() if result.strategy else {}
    tp = result.throughput
    pairs = [
        ("strategy", f"{s.get('name')} (backend {s.get('backend')}{_ps_text(scenario)}, {s.get('buckets')} "
                     f"bucket{'' if s.get('buckets') == 1 else 's'}, "
                     f"overlap {s.get('overlap')}, compression {_compression_text(s)})"),
    ]
    if result.parallelism:
        pairs.append(("parallelism", _parallelism_text(result.parallelism.to_dict())))
    p = result.parallelism.to_dict() if result.parallelism else {}
    pairs += [
        ("global batch", f"{s.get('global_batch')} ({p.get('micro_batches')} micro-batches of {p.get('micro_batch')} "
                         f"per pipeline x dp {p.get('dp')})" if p else
                         f"{s.get('global_batch')} ({s.get('batch_per_gpu')} per GPU x {s.get('grad_accumulation')} micro-steps)"
                         if s.get("batch_split", "equal") == "equal" else
                         f"{s.get('global_batch')} (split {s.get('batch_split')} over the node groups, "
                         f"x {s.get('grad_accumulation')} micro-steps)"),
        ("iterations", f"{result.extra.get('simulated_iterations')} simulated, "
                       f"{result.extra.get('inferred_iterations', 0)} inferred (repeats of the steady state, not re-run)"),
        ("iteration time", format_duration(result.iteration_time_s or 0.0)),
        ("throughput", f"{tp.samples_per_s:,.1f} samples/s" + (f", {tp.tokens_per_s:,.0f} tokens/s" if tp.tokens_per_s else "")),
        *_flops_pairs(result, scenario),
        ("scaling efficiency", f"{result.scaling_efficiency:.1%} (throughput over the GPUs' single-GPU sum)"),
    ]
    groups = [g.to_dict() for g in result.node_groups or ()]
    memory = _group_memory(scenario) if scenario is not None and len(groups) > 1 else {}
    if result.memory:
        m = result.memory
        pairs.append(("memory per GPU", f"{format_memory(m.per_gpu_bytes)} of {format_memory(m.capacity_bytes)}"
                      + (" on the tightest node group (each group's below)" if memory else "")))
    out = format_pairs(pairs, title=f"== training ({result.fidelity}) ==")
    b = result.breakdown_s
    if b:
        terms = b.to_dict()
        total = result.iteration_time_s or 1.0
        rows = [[label, format_duration(terms[k]), f"{terms[k] / total:.1%}"] for k, label in _BREAKDOWN_TERMS
                if k in terms and (k != "compression" or terms[k] > 0)]
        out += "\n\n" + format_table(["per iteration", "time", "share of iteration"], rows,
                                     title="== where the time goes (terms overlap: they need not add up) ==")
    if groups:
        head = ["node group", "GPUs", "batch per GPU", "step time", "idle (waits for slowest)"]
        rows = [[f"{g['group']}: {g['gpu']}", g["gpus"], ", ".join(str(b) for b in g["batches"]),
                 format_duration(g["step_s"]), format_duration(g["idle_s"])] for g in groups]
        if memory:
            head.append("memory per GPU")
            for row, g in zip(rows, groups):
                used, capacity = memory.get(g["group"], (None, None))
                row.append(f"{format_memory(used)} of {format_memory(capacity)}" if used is not None else "-")
        out += "\n\n" + format_table(head, rows, title=f"== node groups (batch split {s.get('batch_split', 'equal')}) ==")
        for g in groups:
            if g.get("precision_ran"):
                out += (f"\n  group {g['group']}: the {g['gpu']} has no {g['precision']} units; it computes "
                        f"{g['precision']} as {g['precision_ran']}")
    return out


def _group_memory(scenario: Scenario) -> dict[int, tuple[float, float]]:
    """{node group: (bytes per GPU, capacity)} of a mixed cluster (strategies.rank_memory.memory_by_group)."""
    return {g: (est.total_bytes, est.capacity_bytes) for g, est in memory_by_group(scenario).items()}
